"""Study import from JSONL and CSV: all or nothing, idempotent, every bad row named by line."""

from __future__ import annotations

import io
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from annotation.importformat import (
    CATEGORY_MAX,
    EXTERNAL_ID_MAX,
    MAX_REPORTED_PROBLEMS,
    SYSTEM_NAME_MAX,
    SYSTEM_VERSION_MAX,
)
from annotation.models import Answer, Pair, Prompt, Study, System
from annotation.services.importing import StudyImportError, study_import
from tests.conftest import Cast

ATLAS = {"type": "system", "name": "atlas-large", "version": "2026-03", "decoding": {"t": 0.7}}
BOREAL = {"type": "system", "name": "borealis", "version": "1"}


def answer(system: str = "atlas-large", version: str = "2026-03", **fields: Any) -> dict:
    return {"system": system, "version": version, **fields}


def prompt(external_id: str, *answers: dict, turns: list[str] | None = None, **fields: Any) -> dict:
    return {
        "type": "prompt",
        "id": external_id,
        "category": "coding",
        "turns": turns or [f"Question {external_id}?"],
        "answers": list(answers),
        **fields,
    }


def write_jsonl(path: Path, *records: dict) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def good_records() -> list[dict]:
    return [
        ATLAS,
        BOREAL,
        prompt(
            "demo-001",
            answer(text="Use reversed(items)."),
            answer("borealis", "1", text="Slice it: items[::-1]."),
        ),
        prompt(
            "demo-002",
            answer(turns=["Paris.", "About two million people."]),
            answer("borealis", "1", turns=["Lyon.", "Sorry, I meant Paris."]),
            turns=["What is the capital of France?", "How many people live there?"],
            category="geography",
        ),
        prompt(
            "advice-1",
            answer(text="Talk to them first.", rank=1, upvotes=42),
            answer("borealis", "1", text="Move out.", rank=2, upvotes=3),
            category="advice",
        ),
    ]


def model_counts() -> dict[str, int]:
    """Rows of every model of the project's apps and auth, to show that nothing was written."""
    return {
        model._meta.label: model._default_manager.count()
        for model in apps.get_models()
        if model._meta.app_label in {"annotation", "judges", "leaderboard", "auth"}
    }


def test_a_jsonl_file_imports_systems_prompts_and_answers(cast: Cast, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "study.jsonl", *good_records())

    result = study_import(study=cast.study, path_or_file=path)

    assert (result.systems_created, result.prompts_created, result.answers_created) == (2, 3, 6)
    assert result.dry_run is False
    atlas = System.objects.get(study=cast.study, name="atlas-large", version="2026-03")
    assert atlas.decoding == {"t": 0.7}
    demo = Prompt.objects.get(study=cast.study, external_id="demo-001")
    assert (demo.category, demo.turns) == ("coding", ["Question demo-001?"])
    assert demo.answers.get(system=atlas).text == "Use reversed(items)."


def test_a_multi_turn_answer_keeps_one_text_per_turn(cast: Cast, tmp_path: Path) -> None:
    study_import(study=cast.study, path_or_file=write_jsonl(tmp_path / "s.jsonl", *good_records()))

    demo = Prompt.objects.get(study=cast.study, external_id="demo-002")
    assert demo.turn_count == 2
    turns = Answer.objects.get(prompt=demo, system__name="atlas-large").turns
    assert turns == ["Paris.", "About two million people."]


def test_ranked_answers_keep_their_rank_and_upvotes(cast: Cast, tmp_path: Path) -> None:
    study_import(study=cast.study, path_or_file=write_jsonl(tmp_path / "s.jsonl", *good_records()))

    ranked = Answer.objects.filter(prompt__external_id="advice-1").order_by("rank")
    assert [(a.system.name, a.rank, a.upvotes) for a in ranked] == [
        ("atlas-large", 1, 42),
        ("borealis", 2, 3),
    ]


CSV_GOOD = (
    "prompt_id,category,turn_1,turn_2,system,system_version,answer_1,answer_2,rank,upvotes\n"
    'demo-001,coding,"How do I reverse\na list?",,atlas-large,2026-03,Use reversed().,,1,10\n'
    'demo-001,coding,"How do I reverse\na list?",,borealis,1,"Slice, then copy.",,2,\n'
    "demo-002,geo,Capital of France?,How many live there?,atlas-large,2026-03,Paris.,"
    "Two million.,,\n"
)


def test_a_csv_file_imports_one_row_per_answer(cast: Cast, tmp_path: Path) -> None:
    path = tmp_path / "study.csv"
    path.write_text(CSV_GOOD, encoding="utf-8")

    result = study_import(study=cast.study, path_or_file=path, add_systems=True)

    assert (result.systems_created, result.prompts_created, result.answers_created) == (2, 2, 3)
    demo = Prompt.objects.get(study=cast.study, external_id="demo-001")
    assert demo.turns == ["How do I reverse\na list?"]
    borealis = demo.answers.get(system__name="borealis")
    assert (borealis.turns, borealis.rank, borealis.upvotes) == (["Slice, then copy."], 2, None)
    two_turns = Answer.objects.get(prompt__external_id="demo-002")
    assert two_turns.turns == ["Paris.", "Two million."]
    assert System.objects.get(study=cast.study, name="atlas-large").version == "2026-03"


def test_a_csv_prompt_whose_rows_disagree_names_both_lines(cast: Cast, tmp_path: Path) -> None:
    path = tmp_path / "study.csv"
    path.write_text(
        "prompt_id,category,turn_1,system,answer\n"
        "p1,coding,Reverse a list?,atlas,Use reversed().\n"
        "p1,coding,Reverse a tuple?,borealis,Slice it.\n",
        encoding="utf-8",
    )
    before = model_counts()

    with pytest.raises(StudyImportError) as caught:
        study_import(study=cast.study, path_or_file=path, add_systems=True)

    (problem,) = caught.value.problems
    assert (problem.line, problem.field) == (3, "turn_1")
    assert "differs from line 2 for prompt p1" in problem.message
    assert model_counts() == before


def test_reimporting_the_same_file_creates_no_duplicates(cast: Cast, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "study.jsonl", *good_records())
    study_import(study=cast.study, path_or_file=path)
    after_first = model_counts()

    again = study_import(study=cast.study, path_or_file=path)

    assert model_counts() == after_first
    assert (again.systems_created, again.prompts_created, again.answers_created) == (0, 0, 0)
    assert (again.systems_unchanged, again.prompts_unchanged, again.answers_unchanged) == (2, 3, 6)


def test_reimporting_the_same_csv_creates_no_duplicates(cast: Cast, tmp_path: Path) -> None:
    path = tmp_path / "study.csv"
    path.write_text(CSV_GOOD, encoding="utf-8")
    study_import(study=cast.study, path_or_file=path, add_systems=True)
    after_first = model_counts()

    again = study_import(study=cast.study, path_or_file=path)

    assert model_counts() == after_first
    assert (again.prompts_unchanged, again.answers_unchanged) == (2, 3)


def test_changed_texts_update_a_prompt_that_has_no_pairs_yet(cast: Cast, tmp_path: Path) -> None:
    study_import(study=cast.study, path_or_file=write_jsonl(tmp_path / "a.jsonl", *good_records()))
    records = good_records()
    records[2] = prompt(
        "demo-001",
        answer(text="Call items.reverse() to reverse in place."),
        answer("borealis", "1", text="Slice it: items[::-1]."),
        turns=["How do I reverse a list in Python?"],
    )
    records[0] = {**ATLAS, "decoding": {"t": 0.2}}

    result = study_import(
        study=cast.study, path_or_file=write_jsonl(tmp_path / "b.jsonl", *records)
    )

    assert (result.prompts_updated, result.answers_updated, result.systems_updated) == (1, 1, 1)
    assert (result.prompts_created, result.answers_created) == (0, 0)
    demo = Prompt.objects.get(study=cast.study, external_id="demo-001")
    assert demo.turns == ["How do I reverse a list in Python?"]
    assert demo.answers.get(system__name="atlas-large").turns == [
        "Call items.reverse() to reverse in place."
    ]
    assert System.objects.get(name="atlas-large").decoding == {"t": 0.2}


def test_changing_an_answer_of_a_prompt_with_pairs_is_refused(cast: Cast, tmp_path: Path) -> None:
    study_import(study=cast.study, path_or_file=write_jsonl(tmp_path / "a.jsonl", *good_records()))
    demo = Prompt.objects.get(study=cast.study, external_id="demo-001")
    first, second = demo.answers.order_by("pk")
    Pair.objects.create(study=cast.study, prompt=demo, answer_a=first, answer_b=second)
    records = good_records()
    records[2]["answers"][0]["text"] = "A different answer."
    records[3]["answers"][0]["turns"] = ["Paris!", "Many."]  # no pairs: would be updated
    before = model_counts()

    with pytest.raises(StudyImportError) as caught:
        study_import(study=cast.study, path_or_file=write_jsonl(tmp_path / "b.jsonl", *records))

    assert [str(problem) for problem in caught.value.problems] == [
        "line 3: prompt demo-001 already has pairs; its text and answers cannot change"
    ]
    assert model_counts() == before
    assert Answer.objects.get(pk=first.pk).text == "Use reversed(items)."
    assert (
        Answer.objects.get(prompt__external_id="demo-002", system__name="atlas-large").turns[0]
        == "Paris."
    )


def test_a_new_system_may_still_answer_a_prompt_with_pairs(cast: Cast, tmp_path: Path) -> None:
    study_import(study=cast.study, path_or_file=write_jsonl(tmp_path / "a.jsonl", *good_records()))
    demo = Prompt.objects.get(study=cast.study, external_id="demo-001")
    first, second = demo.answers.order_by("pk")
    Pair.objects.create(study=cast.study, prompt=demo, answer_a=first, answer_b=second)
    records = good_records()
    records[2]["answers"].append(answer("cirrus", "", text="reversed() or slicing."))

    result = study_import(
        study=cast.study,
        path_or_file=write_jsonl(tmp_path / "b.jsonl", *records),
        add_systems=True,
    )

    assert (result.answers_created, result.systems_created) == (1, 1)
    assert demo.answers.count() == 3


def test_a_dry_run_writes_nothing_and_reports_what_would_change(cast: Cast, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "study.jsonl", *good_records())
    before = model_counts()

    result = study_import(study=cast.study, path_or_file=path, dry_run=True)

    assert model_counts() == before
    assert result.dry_run is True
    assert (result.systems_created, result.prompts_created, result.answers_created) == (2, 3, 6)


def test_a_dry_run_reports_the_same_problems_as_an_import(cast: Cast, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", prompt("p1", answer("ghost", "", text="Hi")))

    with pytest.raises(StudyImportError) as caught:
        study_import(study=cast.study, path_or_file=path, dry_run=True)

    assert "unknown system 'ghost' version ''" in str(caught.value)


def _jsonl(*records: dict | str) -> bytes:
    return "".join(
        (record if isinstance(record, str) else json.dumps(record)) + "\n" for record in records
    ).encode()


# (file name, content, line, field, words in the message)
BAD_FILES: list[tuple[str, bytes, int | None, str, str]] = [
    (
        "bad-json.jsonl",
        _jsonl(ATLAS, prompt("p1", answer(text="a")), '{"id": "p2", "turns": ["q"]'),
        3,
        "",
        "invalid JSON: Expecting ',' delimiter",
    ),
    (
        "missing-text.jsonl",
        _jsonl(
            ATLAS,
            BOREAL,
            {**ATLAS, "name": "cirrus"},
            {"type": "system", "name": "dune"},
            prompt("p1", answer(text="a")),
            prompt("p2", answer(text="a")),
            prompt(
                "p3",
                answer(text="a"),
                answer("borealis", "1", text="b"),
                answer("cirrus", "2026-03"),
                answer("dune", ""),
            ),
        ),
        7,
        "answers[2].text",
        "missing",
    ),
    (
        "missing-id.jsonl",
        _jsonl(ATLAS, {"turns": ["q"], "answers": []}),
        2,
        "id",
        "missing",
    ),
    (
        "wrong-type.jsonl",
        _jsonl(ATLAS, prompt("p1", answer(text="a"), turns="Is this a list?")),  # type: ignore[arg-type]
        2,
        "turns",
        "expected a list of strings, got a string",
    ),
    (
        "wrong-rank-type.jsonl",
        _jsonl(ATLAS, prompt("p1", answer(text="a", rank="first"))),
        2,
        "answers[0].rank",
        "expected a whole number, got a string",
    ),
    (
        "rank-zero.jsonl",
        _jsonl(ATLAS, prompt("p1", answer(text="a", rank=0))),
        2,
        "answers[0].rank",
        "must be at least 1",
    ),
    (
        "unknown-system.jsonl",
        _jsonl(ATLAS, prompt("p1", answer(text="a"), answer("zephyr-7b", "beta", text="b"))),
        2,
        "answers[1].system",
        "unknown system 'zephyr-7b' version 'beta'",
    ),
    (
        "duplicate-prompt.jsonl",
        _jsonl(ATLAS, prompt("p1", answer(text="a")), prompt("p1", answer(text="b"))),
        3,
        "id",
        "prompt id 'p1' already appears at line 2",
    ),
    (
        "duplicate-system.jsonl",
        _jsonl(ATLAS, prompt("p1", answer(text="a"), answer(text="b"))),
        2,
        "answers[1].system",
        "answers prompt p1 twice",
    ),
    (
        "duplicate-rank.jsonl",
        _jsonl(
            ATLAS,
            BOREAL,
            prompt("p1", answer(text="a", rank=1), answer("borealis", "1", text="b", rank=1)),
        ),
        3,
        "answers[1].rank",
        "rank 1 given twice in prompt p1",
    ),
    (
        "turns-mismatch.jsonl",
        _jsonl(ATLAS, prompt("p1", answer(turns=["only one"]), turns=["first?", "second?"])),
        2,
        "answers[0].turns",
        "has 1 turn(s) but the prompt has 2",
    ),
    (
        "text-for-two-turns.jsonl",
        _jsonl(ATLAS, prompt("p1", answer(text="one"), turns=["first?", "second?"])),
        2,
        "answers[0].text",
        "the prompt has 2 turns",
    ),
    (
        "latin1.jsonl",
        _jsonl(ATLAS) + '{"id": "p1", "turns": ["caf\u00e9?"], "answers": []}\n'.encode("latin-1"),
        2,
        "",
        "not UTF-8: byte 0xe9 at byte offset",
    ),
    (
        "latin1.csv",
        b'prompt_id,turn_1,system,answer\np1,"two\nlines",atlas-large,ok\np2,caf\xe9?,atlas-large,a\n',
        4,
        "",
        "not UTF-8: byte 0xe9 at byte offset 67",
    ),
    ("empty.jsonl", b"\n\n", None, "", "the file holds no prompts"),
    ("empty.csv", b"", None, "", "the file holds no prompts"),
    ("only-systems.jsonl", _jsonl(ATLAS), None, "", "the file holds no prompts"),
    ("study.txt", _jsonl(ATLAS, prompt("p1")), None, "", "unsupported file type '.txt'"),
    (
        "missing-columns.csv",
        b"prompt_id,category,answer\np1,c,a\n",
        1,
        "header",
        "missing column(s): turn_1, system",
    ),
    (
        "csv-bad-rank.csv",
        b"prompt_id,turn_1,system,answer,rank\np1,q?,atlas-large,a,1\np1,q?,borealis,b,two\n",
        3,
        "rank",
        "expected a whole number, got 'two'",
    ),
    (
        "csv-answer-for-missing-turn.csv",
        b"prompt_id,turn_1,turn_2,system,answer_1,answer_2\np1,q?,,atlas-large,a,b\n",
        2,
        "answer_2",
        "given, but the prompt has only 1 turn(s)",
    ),
    (
        "csv-duplicate-system.csv",
        b"prompt_id,turn_1,system,answer\np1,q?,atlas-large,a\np1,q?,atlas-large,b\n",
        3,
        "system",
        "answers prompt p1 twice (also at line 2)",
    ),
    (
        "csv-scattered-prompt.csv",
        b"prompt_id,turn_1,system,answer\np1,q?,atlas-large,a\np2,r?,atlas-large,b\n"
        b"p1,q?,borealis,c\n",
        4,
        "prompt_id",
        "the rows of one prompt must be consecutive",
    ),
]


@pytest.mark.parametrize(
    ("name", "content", "line", "field", "words"),
    BAD_FILES,
    ids=[case[0] for case in BAD_FILES],
)
def test_a_bad_file_names_line_and_field_and_writes_nothing(
    cast: Cast,
    tmp_path: Path,
    name: str,
    content: bytes,
    line: int | None,
    field: str,
    words: str,
) -> None:
    System.objects.create(study=cast.study, name="borealis", version="")
    path = tmp_path / name
    path.write_bytes(content)
    before = model_counts()

    with pytest.raises(StudyImportError) as caught:
        study_import(study=cast.study, path_or_file=path, add_systems=name.endswith(".csv"))

    problem = caught.value.problems[0]
    assert (problem.line, problem.field) == (line, field), caught.value.problems
    assert words in problem.message
    assert model_counts() == before


def test_a_file_with_many_problems_reports_the_first_twenty_and_counts_the_rest(
    cast: Cast, tmp_path: Path
) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", *[prompt(f"p{n}", turns=[""]) for n in range(25)])

    with pytest.raises(StudyImportError) as caught:
        study_import(study=cast.study, path_or_file=path)

    assert len(caught.value.problems) == MAX_REPORTED_PROBLEMS
    assert caught.value.total == 25
    assert caught.value.lines()[-1] == "and 5 more problems"
    assert caught.value.problems[0].format("s.jsonl") == "s.jsonl:1: turns[0]: must not be empty"


def test_an_unknown_system_is_created_when_the_import_may_add_systems(
    cast: Cast, tmp_path: Path
) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", prompt("p1", answer("cirrus", "v2", text="Hi")))

    result = study_import(study=cast.study, path_or_file=path, add_systems=True)

    assert result.systems_created == 1
    assert System.objects.filter(study=cast.study, name="cirrus", version="v2").exists()


def test_a_system_that_the_study_already_has_needs_no_declaration(
    cast: Cast, tmp_path: Path
) -> None:
    System.objects.create(study=cast.study, name="cirrus", version="v2")
    path = write_jsonl(tmp_path / "s.jsonl", prompt("p1", answer("cirrus", "v2", text="Hi")))

    result = study_import(study=cast.study, path_or_file=path)

    assert (result.systems_unchanged, result.answers_created) == (1, 1)


def test_a_system_of_another_study_does_not_count(cast: Cast, tmp_path: Path) -> None:
    System.objects.create(study=cast.other_study, name="cirrus", version="v2")
    path = write_jsonl(tmp_path / "s.jsonl", prompt("p1", answer("cirrus", "v2", text="Hi")))

    with pytest.raises(StudyImportError, match="unknown system 'cirrus' version 'v2'"):
        study_import(study=cast.study, path_or_file=path)


def test_import_flags_answers_that_name_a_model_or_their_own_system(
    cast: Cast, tmp_path: Path
) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        ATLAS,
        BOREAL,
        prompt(
            "p1",
            answer(text="As an AI language model developed by OpenAI, I cannot say."),
            answer("borealis", "1", text="I'm borealis, here to help: use Google Sheets."),
        ),
        prompt("p2", answer(text="Add a Meta description tag to the page.")),
    )

    result = study_import(study=cast.study, path_or_file=path)

    assert result.answers_flagged == 2
    flagged = {
        (a.prompt.external_id, a.system.name): a.leak_matches
        for a in Answer.objects.filter(leak_flagged=True)
    }
    assert flagged == {
        ("p1", "atlas-large"): ["As an AI language model developed by OpenAI"],
        ("p1", "borealis"): ["I'm borealis"],
    }
    assert not Answer.objects.get(prompt__external_id="p2").leak_flagged


def test_a_changed_answer_is_scanned_again_and_loses_its_clearance(
    cast: Cast, tmp_path: Path
) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", ATLAS, prompt("p1", answer(text="I am Claude.")))
    study_import(study=cast.study, path_or_file=first)
    Answer.objects.update(
        leak_cleared_by=cast.researcher, leak_cleared_at="2026-01-01T00:00Z", leak_remedy="cleared"
    )
    second = write_jsonl(tmp_path / "b.jsonl", ATLAS, prompt("p1", answer(text="I'm Gemini.")))

    study_import(study=cast.study, path_or_file=second)

    answer_row = Answer.objects.get()
    assert (answer_row.leak_matches, answer_row.leak_cleared_at) == (["I'm Gemini"], None)
    assert not answer_row.usable_in_pairs


def test_progress_is_reported_in_bytes_for_each_pass(cast: Cast, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", *good_records())
    size = path.stat().st_size
    calls: list[tuple[str, int, int]] = []

    def progress(phase: str, done: int, total: int) -> None:
        calls.append((phase, done, total))

    study_import(study=cast.study, path_or_file=path, dry_run=True, progress=progress)
    study_import(study=cast.study, path_or_file=path, progress=progress)

    finished = [call for call in calls if call[1] == size]
    assert [phase for phase, _, _ in finished] == ["validate", "compare", "validate", "write"]
    assert all(total == size and 0 <= done <= size for _, done, total in calls)


def test_the_parser_length_limits_match_the_model_fields() -> None:
    limits = {
        (Prompt, "external_id"): EXTERNAL_ID_MAX,
        (Prompt, "category"): CATEGORY_MAX,
        (System, "name"): SYSTEM_NAME_MAX,
        (System, "version"): SYSTEM_VERSION_MAX,
    }
    for (model, name), limit in limits.items():
        field = model._meta.get_field(name)
        assert getattr(field, "max_length", None) == limit, name


def test_an_overlong_prompt_id_is_a_problem_not_a_database_error(
    cast: Cast, tmp_path: Path
) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", ATLAS, prompt("x" * 201, answer(text="a")))

    with pytest.raises(StudyImportError, match="line 2: id: longer than 200 characters"):
        study_import(study=cast.study, path_or_file=path)


def test_an_upload_like_file_object_is_read_from_its_name_and_content(cast: Cast) -> None:
    handle = io.BytesIO(_jsonl(ATLAS, prompt("p1", answer(text="Hi"))))
    handle.name = "upload.jsonl"

    result = study_import(study=cast.study, path_or_file=handle)

    assert result.prompts_created == 1


def test_a_utf8_byte_order_mark_is_accepted(cast: Cast, tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbfprompt_id,turn_1,system,answer\np1,q?,atlas,a\n")

    result = study_import(study=cast.study, path_or_file=path, add_systems=True)

    assert result.prompts_created == 1


class TestCommand:
    def run(self, *args: str) -> tuple[str, str]:
        out, err = io.StringIO(), io.StringIO()
        call_command("import_study", *args, "--no-progress", stdout=out, stderr=err)
        return out.getvalue(), err.getvalue()

    def test_the_command_imports_and_reports_counts(self, cast: Cast, tmp_path: Path) -> None:
        path = write_jsonl(tmp_path / "s.jsonl", *good_records())

        out, _ = self.run("--study", "main-study", str(path))

        assert "prompts: 3 were created, 0 were updated, 0 unchanged" in out
        assert Prompt.objects.filter(study=cast.study).count() == 3

    def test_the_command_names_path_line_and_field_of_each_problem(
        self, cast: Cast, tmp_path: Path
    ) -> None:
        path = write_jsonl(tmp_path / "s.jsonl", prompt("p1", answer("ghost", "", text="Hi")))

        with pytest.raises(CommandError) as caught:
            self.run("--study", "main-study", str(path))

        assert f"{path}:1: answers[0].system: unknown system 'ghost' version ''" in str(
            caught.value
        )

    def test_a_missing_study_is_an_error_unless_the_command_may_create_it(
        self, cast: Cast, tmp_path: Path
    ) -> None:
        path = write_jsonl(tmp_path / "s.jsonl", *good_records())

        with pytest.raises(CommandError, match="no study with slug 'fresh'"):
            self.run("--study", "fresh", str(path))
        self.run("--study", "fresh", "--create-study", str(path))

        fresh = Study.objects.get(slug="fresh")
        assert (fresh.status, fresh.prompts.count()) == (Study.Status.DRAFT, 3)

    def test_a_dry_run_with_create_study_leaves_no_study_behind(
        self, cast: Cast, tmp_path: Path
    ) -> None:
        path = write_jsonl(tmp_path / "s.jsonl", *good_records())
        before = model_counts()

        out, _ = self.run("--study", "fresh", "--create-study", "--dry-run", str(path))

        assert "prompts: 3 would be created" in out
        assert model_counts() == before

    def test_systems_named_only_in_answers_need_add_systems(
        self, cast: Cast, tmp_path: Path
    ) -> None:
        path = tmp_path / "s.csv"
        path.write_text(CSV_GOOD, encoding="utf-8")

        with pytest.raises(CommandError, match="unknown system 'atlas-large'"):
            self.run("--study", "main-study", str(path))
        out, _ = self.run("--study", "main-study", "--add-systems", str(path))

        assert "systems: 2 were created" in out


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_command_line_shows_progress_and_exits_non_zero_on_a_bad_file(
    cast: Cast, tmp_path: Path
) -> None:
    good = write_jsonl(tmp_path / "good.jsonl", *good_records())
    bad = write_jsonl(tmp_path / "bad.jsonl", prompt("p1", answer("ghost", "", text="Hi")))
    settings_dict = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        # The committed test database, so that the child process sees the cast.
        "DATABASE_URL": f"postgres://{settings_dict['USER']}:{settings_dict['PASSWORD'] or ''}"
        f"@{settings_dict['HOST']}:{settings_dict['PORT'] or 5432}/{settings_dict['NAME']}",
    }

    def run(path: Path) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "manage.py", "import_study", "--study", "main-study", str(path)]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)

    imported, refused = run(good), run(bad)

    assert imported.returncode == 0, imported.stderr
    assert "prompts: 3 were created" in imported.stdout
    assert "validate: 100%" in imported.stderr and "write: 100%" in imported.stderr
    assert refused.returncode != 0
    assert f"{bad}:1: answers[0].system: unknown system 'ghost'" in refused.stderr
    assert Prompt.objects.filter(study=cast.study).count() == 3


def _write_big_file(path: Path, prompts: int, bad_line: int | None = None) -> int:
    """Write a JSONL file of about 50 MB: two systems, prompts with two long answers each."""
    filler = "The quick brown fox jumps over the lazy dog while the answer goes on. " * 17
    with path.open("w", encoding="utf-8") as handle:
        handle.write(json.dumps(ATLAS) + "\n" + json.dumps(BOREAL) + "\n")
        for n in range(prompts):
            if bad_line is not None and n + 3 == bad_line:
                handle.write('{"id": "broken", "turns": ["q"], "answers": [}\n')
                continue
            record = prompt(
                f"big-{n:06d}",
                answer(text=f"{n}: {filler}"),
                answer(
                    "borealis", "1", text=f"I am Claude. {n}: {filler}" if n % 1000 == 0 else filler
                ),
            )
            handle.write(json.dumps(record) + "\n")
    return path.stat().st_size


@pytest.mark.slow
def test_a_50_mb_file_imports_completely_in_bounded_memory(cast: Cast, tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    size = _write_big_file(path, 20_000)
    assert size > 50_000_000
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux

    result = study_import(study=cast.study, path_or_file=path)

    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) / 1024
    assert (result.prompts_created, result.answers_created) == (20_000, 40_000)
    assert Answer.objects.filter(prompt__study=cast.study).count() == 40_000
    assert result.answers_flagged == Answer.objects.filter(leak_flagged=True).count() == 20
    # Reading the whole file into memory would cost well over its 50 MB; streaming in batches
    # stays far below that.
    assert grown_mib < 50, f"peak memory grew by {grown_mib:.0f} MiB"


@pytest.mark.slow
def test_a_50_mb_file_with_one_bad_line_near_the_end_writes_nothing(
    cast: Cast, tmp_path: Path
) -> None:
    path = tmp_path / "big.jsonl"
    _write_big_file(path, 20_000, bad_line=19_990)
    before = model_counts()

    with pytest.raises(StudyImportError) as caught:
        study_import(study=cast.study, path_or_file=path)

    assert [(p.line, p.field) for p in caught.value.problems] == [(19_990, "")]
    assert model_counts() == before


def _reference_file(tmp_path: Path, reference: Any, turns: list[str] | None = None) -> Path:
    """One math prompt with atlas-large's answer, and the reference given (None: no field)."""
    turns = turns or ["What is 6 x 7?"]
    fields = {} if reference is None else {"reference": reference}
    record = prompt(
        "mt-1", answer(turns=[f"t{i}" for i in range(len(turns))]), turns=turns, **fields
    )
    return write_jsonl(tmp_path / "ref.jsonl", ATLAS, record)


def test_a_prompts_reference_answer_is_imported_and_frozen(cast: Cast, tmp_path: Path) -> None:
    study_import(study=cast.study, path_or_file=_reference_file(tmp_path, "42"))
    stored = Prompt.objects.get(study=cast.study, external_id="mt-1")
    assert (stored.reference_turns, stored.reference_source) == (["42"], "imported")
    # The same file again, or one without a reference, keeps it.
    study_import(study=cast.study, path_or_file=_reference_file(tmp_path, "42"))
    study_import(study=cast.study, path_or_file=_reference_file(tmp_path, None))
    stored.refresh_from_db()
    assert stored.reference_turns == ["42"]
    # Another reference is refused, and nothing is written.
    with pytest.raises(StudyImportError, match="frozen once set"):
        study_import(study=cast.study, path_or_file=_reference_file(tmp_path, "41"))
    stored.refresh_from_db()
    assert stored.reference_turns == ["42"]


def test_a_reference_is_added_to_a_prompt_that_had_none(cast: Cast, tmp_path: Path) -> None:
    study_import(study=cast.study, path_or_file=_reference_file(tmp_path, None))
    assert Prompt.objects.get(external_id="mt-1").reference_turns is None
    study_import(study=cast.study, path_or_file=_reference_file(tmp_path, ["42"]))
    assert Prompt.objects.get(external_id="mt-1").reference_turns == ["42"]


@pytest.mark.parametrize(
    ("reference", "turns", "message"),
    [
        ("one text", ["Turn one?", "Turn two?"], "give a list of 2 texts"),
        (["only one"], ["Turn one?", "Turn two?"], "has 1 turn(s) but the prompt has 2"),
        (["  "], None, "must not be empty"),
        (42, None, "expected a string or a list of strings"),
    ],
)
def test_a_malformed_reference_is_named_with_its_line(
    cast: Cast, tmp_path: Path, reference: Any, turns: list[str] | None, message: str
) -> None:
    with pytest.raises(StudyImportError) as raised:
        study_import(study=cast.study, path_or_file=_reference_file(tmp_path, reference, turns))
    assert message in str(raised.value) and "reference" in str(raised.value)
    assert not Prompt.objects.filter(external_id="mt-1").exists()
