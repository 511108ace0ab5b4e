"""A prepared SELECT answers as its queryset does, with its SQL compiled once per process."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models.sql.compiler import SQLCompiler
from django.test.utils import CaptureQueriesContext

from annotation.models import Assignment, Worker
from annotation.services.assignments import assignment_claim_next
from core.db.prepared import PreparedSelect, prepared_cursor
from tests.annotation.work_helpers import make_pairs, make_worker
from tests.conftest import Cast


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
        assert Worker._meta.get_field("study").is_cached(found)
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
