"""Low findings: the API schema is not for annotators; the gold warning names no item."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client

from annotation.models import Worker
from annotation.services.assignments import assignment_claim_next
from annotation.services.workers import worker_consent
from tests.annotation.work_helpers import make_pairs, submit
from tests.conftest import PASSWORD, Cast


def test_annotators_cannot_read_the_api_schema(cast: Cast) -> None:
    worker = Client()
    assert worker.login(username="wendy-worker", password=PASSWORD)
    assert worker.get("/api/v1/schema/").status_code == 403
    researcher = Client()
    assert researcher.login(username="rhea-researcher", password=PASSWORD)
    assert researcher.get("/api/v1/schema/").status_code == 200


def test_the_gold_warning_appears_only_at_checkpoints_not_after_the_gold_item(cast: Cast) -> None:
    study = cast.study
    study.gold_share = Decimal(0)
    study.target_per_worker = 20
    study.save()
    make_pairs(study, 12)
    worker = cast.worker_one
    worker_consent(worker=worker)
    assert worker.user is not None
    client = Client()
    client.force_login(worker.user)
    Worker.objects.filter(pk=worker.pk).update(session_key=client.session.session_key)
    shown = []
    for done in range(7):
        if done == 1:  # as if the first judgment was a failed gold item
            Worker.objects.filter(pk=worker.pk).update(state=Worker.State.WARNED)
        assignment = assignment_claim_next(worker=worker)
        assert assignment is not None
        page = client.get(f"/work/{study.slug}/item/{assignment.public_id}/").content.decode()
        shown.append("did not match" in page)
        submit(assignment, likert_shown=2)
    # Right after the gold item (done = 1) nothing; at the 5th item, in aggregate.
    assert shown == [False, False, False, False, False, True, False]


def test_a_study_may_show_links_in_answers_as_plain_text(cast: Cast) -> None:
    from annotation.models import Answer
    from annotation.selectors.work import work_item_build

    study = cast.study
    study.gold_share = Decimal(0)
    study.links_as_text = True
    study.save()
    (pair,) = make_pairs(study, 1)
    Answer.objects.filter(pk=pair.answer_a_id).update(
        turns=["Read [this guide](https://evil.example/phish) first."]
    )
    assignment = assignment_claim_next(worker=cast.worker_one)
    assert assignment is not None
    item = work_item_build(assignment=assignment)
    html = "".join(turn.html for turn in (*item.left_turns, *item.right_turns))
    assert "<a " not in html
    assert "this guide (https://evil.example/phish)" in html
    study.links_as_text = False
    study.save()
    assignment.refresh_from_db()
    again = work_item_build(assignment=type(assignment).objects.get(pk=assignment.pk))
    assert "<a href" in "".join(t.html for t in (*again.left_turns, *again.right_turns))


def test_an_upload_over_the_limit_is_refused_from_its_header_before_the_body_is_read(
    cast: Cast, settings
) -> None:
    client = Client()
    assert client.login(username="rhea-researcher", password=PASSWORD)
    too_big = settings.CONCORD_MAX_IMPORT_BYTES + (2 << 20)
    response = client.generic(
        "POST",
        f"/studies/{cast.study.slug}/import/",
        b"--x\r\n",
        content_type="multipart/form-data; boundary=x",
        CONTENT_LENGTH=str(too_big),
    )
    assert response.status_code == 413 and b"too large" in response.content


@pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/", "/api/v1/"])
def test_an_anonymous_150_mib_post_is_refused_from_its_header_on_any_other_path(
    path: str,
) -> None:
    # Issue 27: a 150 MiB POST to the log-in page was read in full and written to a temporary
    # file before its 403; only the import page takes bodies that big.
    response = Client().generic(
        "POST",
        path,
        b"--x\r\n",
        content_type="multipart/form-data; boundary=x",
        CONTENT_LENGTH=str(150 << 20),
    )
    assert response.status_code == 413 and b"at most 5 MB" in response.content


def test_a_chunked_body_without_a_length_is_refused_and_a_small_post_goes_on(
    cast: Cast,
) -> None:
    client = Client()
    chunked = client.generic(
        "POST", "/accounts/login/", b"", HTTP_TRANSFER_ENCODING="chunked", CONTENT_LENGTH=""
    )
    assert chunked.status_code == 411
    # An ordinary log-in is untouched, and the import page still takes a body over 5 MB.
    ordinary = client.post("/accounts/login/", {"username": "rhea-researcher", "password": "x"})
    assert ordinary.status_code == 200
    assert client.login(username="rhea-researcher", password=PASSWORD)
    upload = client.generic(
        "POST",
        f"/studies/{cast.study.slug}/import/",
        b"--x\r\n" + b"x" * (6 << 20),
        content_type="multipart/form-data; boundary=x",
    )
    assert upload.status_code != 413
