"""Malformed import files name file, line and field, write nothing, and never crash (command
and upload page); the worker API answers 400, not 500, to JSON nested 1000 deep."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from annotation.models import Answer, Prompt, System
from tests.conftest import PASSWORD, Cast

SYSTEM = '{"type": "system", "name": "atlas", "version": "1"}\n'


def prompt_line(answer_fields: str = '"text": "fine"', turns: str = '["Q?"]') -> str:
    return (
        f'{{"type": "prompt", "id": "p1", "turns": {turns}, '
        f'"answers": [{{"system": "atlas", "version": "1", {answer_fields}}}]}}\n'
    )


CASES: list[tuple[str, str, str, str]] = [
    # (name, file name, content, expected "line: field: message" part)
    (
        "nul escape in a text",
        "nul.jsonl",
        SYSTEM + prompt_line(turns='["Q\\u0000?"]'),
        r":2: turns\[0\]: contains a NUL character",
    ),
    (
        "lone surrogate",
        "surrogate.jsonl",
        SYSTEM + prompt_line(answer_fields='"text": "bad \\ud800 text"'),
        r":2: answers\[0\]\.text: contains a lone surrogate",
    ),
    (
        "rank of 10^30",
        "rank.jsonl",
        SYSTEM + prompt_line(answer_fields='"text": "x", "rank": ' + "1" + "0" * 30),
        r":2: answers\[0\]\.rank: 1000000000000000000000000000000 is out of range",
    ),
    (
        "100,000-deep decoding",
        "deep.jsonl",
        '{"type": "system", "name": "atlas", "decoding": '
        + "[" * 100_000
        + "]" * 100_000
        + "}\n"
        + prompt_line(),
        r":1: nested 100001 levels deep; at most 64",
    ),
    (
        "raw NUL in a CSV cell",
        "nul.csv",
        "prompt_id,turn_1,system,answer\np1,q?,atlas,bad\x00cell\n",
        r":2: answer: contains a NUL character",
    ),
    (
        "CSV rank of 10^30",
        "rank.csv",
        "prompt_id,turn_1,system,answer,rank\np1,q?,atlas,a," + "1" + "0" * 30 + "\n",
        r":2: rank: 1000000000000000000000000000000 is out of range",
    ),
]


def nothing_written() -> bool:
    return not (Prompt.objects.exists() or Answer.objects.exists() or System.objects.exists())


@pytest.mark.parametrize(
    ("name", "filename", "content", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_the_command_names_file_line_and_field_and_writes_nothing(
    cast: Cast, tmp_path: Path, name: str, filename: str, content: str, expected: str
) -> None:
    path = tmp_path / filename
    path.write_bytes(content.encode("utf-8", "surrogatepass"))
    with pytest.raises(CommandError) as error:
        call_command(
            "import_study", "--study", "main-study", "--add-systems", str(path), "--no-progress",
            stdout=io.StringIO(), stderr=io.StringIO(),
        )  # fmt: skip
    assert re.search(re.escape(str(path)) + expected, str(error.value)), str(error.value)
    assert nothing_written()


@pytest.mark.parametrize(
    ("name", "filename", "content", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_the_upload_page_names_line_and_field_and_writes_nothing(
    client: Client, cast: Cast, name: str, filename: str, content: str, expected: str
) -> None:
    assert client.login(username="rhea-researcher", password=PASSWORD)
    upload = io.BytesIO(content.encode("utf-8", "surrogatepass"))
    upload.name = filename
    response = client.post(
        f"/studies/{cast.study.slug}/import/", {"file": upload, "add_systems": "on"}
    )
    assert response.status_code == 400
    text = re.sub(r"</?code>", "", response.content.decode())
    assert re.search("line " + expected.lstrip(":").split(":", 1)[0] + ":", text), text[-2000:]
    message = expected.rsplit(": ", 1)[-1].replace("\\", "")
    assert message.split(" (")[0] in text
    assert nothing_written()


def test_the_submit_api_answers_400_to_json_nested_1000_deep(client: Client, cast: Cast) -> None:
    from annotation.services.workers import worker_consent
    from tests.annotation.work_helpers import make_pairs

    make_pairs(cast.study, 1)
    worker = cast.worker_one
    worker_consent(worker=worker)
    assert worker.user is not None
    client.force_login(worker.user)
    session_key = client.session.session_key
    type(worker).objects.filter(pk=worker.pk).update(session_key=session_key)
    next_item = client.post(f"/work/{cast.study.slug}/api/next/")
    assert next_item.status_code == 200, next_item.content
    item = next_item.json()["item"]["id"]
    body = (
        '{"submission_id": "00000000-0000-4000-8000-000000000000", "comment": '
        + "[" * 1000
        + "]" * 1000
        + "}"
    )
    response = client.post(
        f"/work/{cast.study.slug}/api/items/{item}/submit/", body, content_type="application/json"
    )
    assert response.status_code == 400
    assert "nested" in response.json()["detail"]
    # And ordinary JSON still works afterwards.
    ok = client.post(
        f"/work/{cast.study.slug}/api/items/{item}/submit/",
        json.dumps({"submission_id": "00000000-0000-4000-8000-000000000001", "likert": 2}),
        content_type="application/json",
    )
    assert ok.status_code == 201, ok.content
