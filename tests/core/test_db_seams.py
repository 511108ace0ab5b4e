"""The seams of core/db/ (and the session engine on top of them) behave as the services that
use them rely on, against the real PostgreSQL models.

Each seam stands in for a piece of Django or psycopg that is not public API: a prepared SELECT
builds instances as a queryset would (the compiler's converters, the related populators,
`Model.from_db`) and prepares its statement on the server (psycopg's `_send_query_prepared`); an
instance made from a row the service read or wrote itself is saved, not adding, bound to its
database (`Model._state`); a model's INSERT is the columns and values Django's would send
(`_meta.concrete_fields`, `get_db_prep_save`); a relation is loaded or attached without a query
(the field's cache); a queryset's SQL nests in a statement of our own; the session engine reads
Django's sessions (`SessionStore._get_session_from_db`). When a Django or psycopg upgrade moves
one of those internals, this file fails first. The last test keeps those internals here: no other
module of the project names them.
"""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.sessions.backends.db import SessionStore as DjangoSessionStore
from django.contrib.sessions.models import Session
from django.core.exceptions import EmptyResultSet
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, transaction
from django.db.models import Count
from django.db.models.sql.compiler import SQLCompiler
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation.models import Assignment, HumanJudgment, PayEntry, Prompt, Study, Worker
from annotation.services.assignments import assignment_claim_next
from core.db.prepared import PreparedSelect, prepared_cursor
from core.db.rows import (
    instance_saved,
    mark_new,
    mark_saved,
    model_insert,
    queryset_sql,
    relation_attach,
    relation_loaded,
)
from core.sessions import SessionStore
from tests.annotation.work_helpers import make_pairs, make_worker, submit
from tests.conftest import Cast

REPO = Path(__file__).resolve().parents[2]


def worker_in_study() -> PreparedSelect[Worker]:
    return PreparedSelect(
        lambda slug, user_id: Worker.objects.select_related("study").filter(
            study__slug=slug, user_id=user_id
        )
    )


def count_compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    compiled: list[str] = []
    original = SQLCompiler.as_sql

    def counting(self: SQLCompiler, *args: Any, **kwargs: Any) -> Any:
        compiled.append(self.query.model.__name__ if self.query.model else "")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SQLCompiler, "as_sql", counting)
    return compiled


def test_it_finds_what_the_queryset_finds_with_related_objects(cast: Cast) -> None:
    prepared = worker_in_study()
    for worker in (cast.worker_one, cast.worker_two):
        assert worker.user_id is not None
        found = prepared.first(cast.study.slug, worker.user_id)
        assert found is not None and found.pk == worker.pk
        assert found.external_id == worker.external_id
        assert relation_loaded(found, "study")
        assert found.study.pk == cast.study.pk and found.study.slug == cast.study.slug
    assert prepared.first("no-such-study", cast.worker_one.user_id) is None
    assert prepared.first(cast.other_study.slug, cast.worker_one.user_id) is None


def test_it_compiles_once_then_binds_new_parameters(
    cast: Cast, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepared = worker_in_study()
    compiled = count_compiles(monkeypatch)
    first = prepared.first(cast.study.slug, cast.worker_one.user_id)
    second = prepared.first(cast.study.slug, cast.worker_two.user_id)
    assert first is not None and second is not None and first.pk != second.pk
    assert compiled == ["Worker"]


def test_an_argument_it_cannot_place_runs_the_queryset(
    cast: Cast, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two equal arguments cannot be told apart among the parameters: no SQL is kept.
    prepared: PreparedSelect[Worker] = PreparedSelect(
        lambda a, b: Worker.objects.filter(pk=a, user_id=b)
    )
    worker = cast.worker_one
    compiled = count_compiles(monkeypatch)
    assert (
        prepared.first(worker.pk, worker.pk)
        == Worker.objects.filter(pk=worker.pk, user_id=worker.pk).first()
    )
    assert prepared._compiled is None and len(compiled) >= 2
    # A string where a number was compiled is bound by the queryset, as Django would bind it.
    assert worker.user_id is not None
    prepared.first(worker.pk, worker.user_id)
    assert prepared._compiled is not None
    assert prepared.first(str(worker.pk), worker.user_id) == worker


def test_a_locking_select_finds_only_the_workers_own_assignment(cast: Cast) -> None:
    make_pairs(cast.study, 2)
    worker = make_worker(cast.study, "prepared-lock")
    assignment = assignment_claim_next(worker=worker)
    assert assignment is not None
    locked: PreparedSelect[Assignment] = PreparedSelect(
        lambda public_id, worker_id: (
            Assignment.objects.select_for_update(of=("self",))
            .select_related("pair", "study")
            .filter(public_id=public_id, worker_id=worker_id)
        ),
        for_update=True,
    )
    with transaction.atomic():
        found = locked.first(assignment.public_id, worker.pk)
        assert found is not None and found.pk == assignment.pk
        assert found.pair.pk == assignment.pair_id and found.study.pk == cast.study.pk
        assert locked.first(uuid.uuid4(), worker.pk) is None
        assert locked.first(assignment.public_id, cast.worker_one.pk) is None


def server_prepared(text: str) -> list[str]:
    """The statements prepared on this connection whose text contains `text`."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall() if text in row[0]]


def test_the_statement_is_prepared_on_the_server_and_answers_again_from_there(
    cast: Cast,
) -> None:
    assert settings.DATABASES["default"]["OPTIONS"]["prepare_threshold"] is not None
    prepared = worker_in_study()
    assert server_prepared('FROM "annotation_worker"') == []
    for worker in (cast.worker_one, cast.worker_two, cast.worker_one):
        found = prepared.first(cast.study.slug, worker.user_id)
        assert found is not None and found.pk == worker.pk and found.study.pk == cast.study.pk
    # One prepared statement, run three times with new parameters.
    assert len(server_prepared('FROM "annotation_worker"')) == 1
    assert prepared.first("no-such-study", cast.worker_one.user_id) is None


def test_with_prepared_statements_off_nothing_is_prepared(
    cast: Cast, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(connection.settings_dict["OPTIONS"], "prepare_threshold", None)
    prepared: PreparedSelect[Worker] = PreparedSelect(
        lambda external_id: Worker.objects.filter(external_id=external_id)
    )
    for _ in range(2):
        found = prepared.first(cast.worker_one.external_id)
        assert found is not None and found.pk == cast.worker_one.pk
    with prepared_cursor() as cursor:
        cursor.execute("SELECT %s::int + 41", [1])
        assert cursor.fetchone() == (42,)
    assert server_prepared('"annotation_worker"."external_id" =') == []
    assert server_prepared("+ 41") == []


def test_a_prepared_cursor_counts_as_a_query_and_raises_djangos_errors(cast: Cast) -> None:
    with CaptureQueriesContext(connection) as queries, prepared_cursor() as cursor:
        cursor.execute("SELECT %(a)s::int + %(b)s::int", {"a": 1, "b": 2})
        assert cursor.fetchone() == (3,)
    assert len(queries) == 1 and "+ $2::int" in queries[0]["sql"]
    with pytest.raises(IntegrityError), transaction.atomic(), prepared_cursor() as cursor:
        # The same primary key again.
        cursor.execute(
            "INSERT INTO auth_user SELECT * FROM auth_user WHERE id = %s", [cast.admin.pk]
        )


def concrete_values(obj: Any) -> dict[str, Any]:
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields}


def test_a_prepared_read_converts_each_column_as_the_queryset_does(cast: Cast) -> None:
    Study.objects.filter(pk=cast.study.pk).update(
        categories=["advice", "code"], gold_share=Decimal("0.125")
    )
    prepared: PreparedSelect[Study] = PreparedSelect(lambda slug: Study.objects.filter(slug=slug))
    for _ in range(2):  # compiled, then from the kept description of the columns
        found = prepared.first(cast.study.slug)
        assert found is not None
        expected = Study.objects.get(slug=cast.study.slug)
        assert concrete_values(found) == concrete_values(expected)
        # JSON decoded (a converter), decimals exact, times aware.
        assert found.categories == ["advice", "code"]
        assert found.gold_share == Decimal("0.125") and isinstance(found.gold_share, Decimal)
        assert timezone.is_aware(found.created_at)
        # A row read from the default database, as a queryset's: save() updates it.
        assert found._state.adding is False and found._state.db == DEFAULT_DB_ALIAS


def test_a_prepared_read_fills_nested_related_objects_and_annotations(cast: Cast) -> None:
    make_pairs(cast.study, 1)
    assignment = assignment_claim_next(worker=cast.worker_one)
    assert assignment is not None
    judgment = submit(assignment, values=[], likert_shown=2)
    prepared: PreparedSelect[HumanJudgment] = PreparedSelect(
        lambda pk: (
            HumanJudgment.objects.select_related("pair__answer_a", "assignment")
            .annotate(paid=Count("pay_entries"))
            .filter(pk=pk)
        )
    )
    for _ in range(2):
        with CaptureQueriesContext(connection) as queries:
            found = prepared.first(judgment.pk)
            assert found is not None
            assert found.pair.answer_a.turns == ["first answer"]  # nested, JSON decoded
            assert found.assignment is not None
            assert found.assignment.public_id == assignment.public_id
            assert found.paid == 1  # type: ignore[attr-defined]
            assert found.axes == {} and found.values == []
        assert len(queries) == 1
        related = (found.pair, found.pair.answer_a, found.assignment)
        for obj in (found, *related):
            assert (
                obj is not None and obj._state.adding is False and obj._state.db == DEFAULT_DB_ALIAS
            )


def test_an_instance_saved_is_the_row_its_values_name(cast: Cast) -> None:
    worker = cast.worker_one
    built = instance_saved(
        Worker, pk=worker.pk, study_id=cast.study.pk, user=worker.user, external_id="renamed"
    )
    assert built._state.adding is False and built._state.db == DEFAULT_DB_ALIAS
    with CaptureQueriesContext(connection) as queries:
        assert built.user == worker.user  # the object given: no query
        assert built.state == Worker.State.ACTIVE  # a default, not a deferred read
    assert len(queries) == 0
    with CaptureQueriesContext(connection) as queries:
        built.save(update_fields=["external_id"])
    assert len(queries) == 1 and queries[0]["sql"].startswith("UPDATE")
    worker.refresh_from_db()
    assert worker.external_id == "renamed"
    assert built.study == cast.study  # read from the instance's database


def test_the_claims_assignment_is_a_saved_row(cast: Cast) -> None:
    make_pairs(cast.study, 1)
    assignment = assignment_claim_next(worker=cast.worker_one)
    assert assignment is not None
    assert assignment._state.adding is False and assignment._state.db == DEFAULT_DB_ALIAS
    assert not relation_loaded(assignment, "pair") and relation_loaded(assignment, "worker")
    stored = Assignment.objects.get(pk=assignment.pk)
    for name in ("public_id", "pair_id", "study_id", "worker_id", "a_left", "expires_at"):
        assert getattr(assignment, name) == getattr(stored, name), name


def make_assignments(cast: Cast, count: int) -> list[Assignment]:
    make_pairs(cast.study, count)
    claimed = []
    for i in range(count):
        assignment = assignment_claim_next(worker=make_worker(cast.study, f"seam-{i}"))
        assert assignment is not None
        claimed.append(assignment)
    return claimed


def judgment_of(assignment: Assignment) -> HumanJudgment:
    return HumanJudgment(
        study_id=assignment.study_id,
        pair_id=assignment.pair_id,
        worker=assignment.worker,
        assignment=assignment,
        submission_id=uuid.uuid4(),
        a_left=True,
        likert_shown=3,
        likert=3,
        preference="A",
        values=["empathy", "ethics"],
        axes={"a": {"relevance": "yes"}},
        reason="kind",
    )


def test_a_model_insert_writes_the_row_objects_create_writes(cast: Cast) -> None:
    mine, djangos = make_assignments(cast, 2)
    ours = judgment_of(mine)
    insert = model_insert(HumanJudgment)
    assert "id" not in insert.attnames and insert.columns[0].startswith('"')
    sql = (
        f"INSERT INTO {insert.table} ({', '.join(insert.columns)}) "
        f"VALUES ({', '.join('%s' for _ in insert.columns)}) RETURNING id"
    )
    before = timezone.now()
    with prepared_cursor() as cursor:
        cursor.execute(sql, insert.values(ours))
        (pk,) = cursor.fetchone()
    assert ours.created_at >= before  # pre_save ran: auto_now_add set on the instance
    mark_saved(ours, pk=pk)
    assert ours._state.adding is False and ours._state.db == DEFAULT_DB_ALIAS
    theirs = HumanJudgment.objects.create(**{
        f.attname: getattr(judgment_of(djangos), f.attname)
        for f in HumanJudgment._meta.concrete_fields if not f.primary_key
    })  # fmt: skip
    written, created = (
        concrete_values(HumanJudgment.objects.get(pk=pk)),
        concrete_values(HumanJudgment.objects.get(pk=theirs.pk)),
    )
    differ = {"id", "assignment_id", "pair_id", "worker_id", "submission_id", "created_at"}
    assert {k: v for k, v in written.items() if k not in differ} == {
        k: v for k, v in created.items() if k not in differ
    }
    assert written["values"] == ["empathy", "ethics"] and written["axes"] == ours.axes
    # A saved instance updates its row.
    ours.comment = "edited"
    ours.save(update_fields=["comment"])
    assert HumanJudgment.objects.get(pk=pk).comment == "edited"
    assert HumanJudgment.objects.filter(assignment=mine).count() == 1


def test_a_model_insert_leaves_out_the_fields_skipped_and_refuses_database_defaults(
    cast: Cast,
) -> None:
    pay = PayEntry(study=cast.study, worker=cast.worker_one, kind="judgment", amount_cents=7)
    insert = model_insert(PayEntry)
    values = insert.values(pay, skip=("judgment_id",))
    assert len(values) == len(insert.columns) - 1
    sent = dict(zip([a for a in insert.attnames if a != "judgment_id"], values, strict=True))
    assert sent["amount_cents"] == 7 and sent["status"] == PayEntry.Status.PENDING
    assert "judgment_id" in insert.attnames and "id" not in insert.attnames
    # A prompt's reference source has only a database default: our INSERT could not send it.
    with pytest.raises(ValueError, match="reference_source"):
        model_insert(Prompt)


def test_a_copy_marked_new_saves_as_a_new_row(cast: Cast) -> None:
    copy = Study.objects.get(pk=cast.study.pk)
    mark_new(copy)
    copy.slug, copy.name = "copied-study", "Copied"
    copy.save()
    assert copy.pk != cast.study.pk
    assert Study.objects.get(pk=cast.study.pk).slug == cast.study.slug
    assert Study.objects.get(pk=copy.pk).slug == "copied-study"


def test_a_relation_attached_is_read_without_a_query(cast: Cast) -> None:
    worker = Worker.objects.get(pk=cast.worker_one.pk)
    assert not relation_loaded(worker, "study")
    relation_attach(worker, "study", cast.study)
    assert relation_loaded(worker, "study")
    with CaptureQueriesContext(connection) as queries:
        assert worker.study is cast.study
    assert len(queries) == 0
    with pytest.raises(TypeError, match="external_id"):
        relation_loaded(worker, "external_id")


def test_a_querysets_sql_nests_in_a_statement_of_our_own(cast: Cast) -> None:
    sql, params = queryset_sql(Worker.objects.filter(study=cast.study).values_list("pk"))
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM ({sql}) AS t", params)
        assert cursor.fetchone() == (2,)
    with pytest.raises(EmptyResultSet):
        queryset_sql(Worker.objects.filter(pk__in=[]))


def test_the_session_engine_reads_djangos_sessions_compiled_once(
    cast: Cast, monkeypatch: pytest.MonkeyPatch
) -> None:
    djangos = DjangoSessionStore()
    djangos["seen"] = [1, 2]
    djangos.save()
    compiled = count_compiles(monkeypatch)
    for _ in range(2):
        ours = SessionStore(session_key=djangos.session_key)
        assert ours["seen"] == [1, 2] and ours.session_key == djangos.session_key
    assert compiled.count("Session") <= 1
    # Ours is read by Django's too (same table, same encoding).
    mine = SessionStore()
    mine["k"] = "v"
    mine.save()
    assert DjangoSessionStore(session_key=mine.session_key)["k"] == "v"
    # Expired or unknown: a new, empty session without a key.
    Session.objects.filter(pk=djangos.session_key).update(
        expire_date=timezone.now() - timedelta(seconds=1)
    )
    for key in (djangos.session_key, "x" * 32):
        stale = SessionStore(session_key=key)
        assert stale.load() == {} and stale.session_key is None


# Django and psycopg internals the seams use; outside core/db/ and core/sessions.py no module of
# the project may name them (tests aside: this file is where they are checked).
PRIVATE = re.compile(
    r"\._state\b|concrete_fields|get_db_prep_save|(?<!refresh_)\bfrom_db\b|_send_query"
    r"|get_converters|apply_converters|get_related_populators|_get_session_from_db"
    r"|_prepare_cursor|\bis_cached\b|set_cached_value|fields_cache|klass_info|get_compiler"
    r"|sql_with_params"
)
SEAMS = ("core/db/", "core/sessions.py")


def project_modules() -> list[Path]:
    """Every Python file of the project but its tests (hidden folders, like .venv, aside)."""
    tops = [REPO / "manage.py"]
    for top in sorted(REPO.iterdir()):
        if top.is_dir() and not top.name.startswith(".") and top.name not in {"tests", "var"}:
            tops.extend(sorted(top.rglob("*.py")))
    return tops


def test_django_and_psycopg_internals_are_named_only_in_core_db_and_the_session_engine() -> None:
    found = []
    modules = project_modules()
    assert REPO / "annotation" / "services" / "judgments.py" in modules
    for path in modules:
        relative = path.relative_to(REPO).as_posix()
        if relative.startswith(SEAMS):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if PRIVATE.search(line):
                found.append(f"{relative}:{number}: {line.strip()}")
    assert found == [], "use a seam of core/db/ (core/db/rows.py) instead:\n" + "\n".join(found)


def test_the_internals_check_sees_a_use() -> None:
    assert PRIVATE.search("judgment._state.adding = False")
    assert PRIVATE.search('Assignment._meta.get_field("pair").is_cached(a)')
    assert PRIVATE.search("rows.query.sql_with_params()")
    assert not PRIVATE.search("worker.refresh_from_db()")
    assert not PRIVATE.search("worker_state = probe_state(kind)")
