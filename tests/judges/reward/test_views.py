"""The PL training pages: who may see them, starting a training, live status, the curve."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from judges.models import JudgeRun, PLTraining
from judges.reward.services import pl_training_execute
from tests.conftest import PASSWORD, Cast
from tests.judges.reward.conftest import ranked_study

pytestmark = pytest.mark.django_db

FORM = {
    "name": "pl-page",
    "recipe": "pairwise",
    "k": "3",
    "sources": ["ranked"],
    "ties": "drop",
    "mode": "head",
    "epochs": "6",
    "learning_rate": "0.001",
    "holdout": "0.25",
    "seed": "9",
}


def login(client: Client, cast: Cast, who: str = "researcher") -> Client:
    user = getattr(cast, who)
    assert client.login(username=user.username, password=PASSWORD)
    return client


def test_a_researcher_queues_a_training_watches_it_finish_and_finds_the_judge(
    client: Client, cast: Cast, reward_dirs: Path
) -> None:
    ranked_study(cast.study, prompts=4)
    login(client, cast)
    slug = cast.study.slug
    response = client.post(reverse("judges:pl_training_list", args=[slug]), FORM)
    training = PLTraining.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("judges:pl_training_detail", args=[slug, training.pk])
    assert training.status == PLTraining.Status.PENDING  # queued, not trained in the request
    status_url = reverse("judges:pl_training_status", args=[slug, training.pk])
    assert client.get(status_url).json()["terminal"] is False
    pl_training_execute(training_id=training.pk)
    status = client.get(status_url).json()
    assert (status["status"], status["epoch"], status["terminal"]) == ("done", 6, True)
    page = client.get(reverse("judges:pl_training_detail", args=[slug, training.pk]))
    assert b"1st vs last accuracy" in page.content and b"pl_training.js" in page.content
    assert b'data-terminal="yes"' in page.content
    assert b"PL pairwise, top 3 (pairwise, K = 3)" in page.content
    curve = client.get(reverse("judges:pl_training_curve", args=[slug, training.pk]))
    assert curve["Content-Type"] == "image/svg+xml"
    assert curve.content.count(b"<polyline") == 2  # training and held-out loss
    judges_page = client.get(reverse("judges:run_list", args=[slug]))
    assert b"pl-page" in judges_page.content
    assert b"Order-invariant (one call per pair)" in judges_page.content


def test_bad_input_is_shown_on_the_form_and_nothing_is_queued(
    client: Client, cast: Cast, reward_dirs: Path
) -> None:
    ranked_study(cast.study, prompts=2)
    login(client, cast)
    response = client.post(
        reverse("judges:pl_training_list", args=[cast.study.slug]), {**FORM, "k": "5"}
    )
    assert response.status_code == 400
    assert b"K=5 is larger than every ranked list" in response.content
    assert not PLTraining.objects.exists()


def test_a_pending_training_can_be_cancelled_from_its_page(
    client: Client, cast: Cast, reward_dirs: Path
) -> None:
    ranked_study(cast.study, prompts=2)
    login(client, cast)
    slug = cast.study.slug
    client.post(reverse("judges:pl_training_list", args=[slug]), FORM)
    training = PLTraining.objects.get()
    client.post(reverse("judges:pl_training_cancel", args=[slug, training.pk]))
    training.refresh_from_db()
    assert training.status == PLTraining.Status.CANCELLED
    assert pl_training_execute(training_id=training.pk) == "skipped"


@pytest.mark.parametrize("who", ["outsider", "worker_one"])
def test_outsiders_and_annotators_do_not_reach_the_training_pages(
    client: Client, cast: Cast, who: str
) -> None:
    training = PLTraining.objects.create(study=cast.study, name="x", epochs=1)
    if who == "worker_one":
        annotator = cast.worker_one.user
        assert annotator is not None
        assert client.login(username=annotator.username, password=PASSWORD)
    else:
        login(client, cast, who)
    slug = cast.study.slug
    for url in (
        reverse("judges:pl_training_list", args=[slug]),
        reverse("judges:pl_training_detail", args=[slug, training.pk]),
        reverse("judges:pl_training_status", args=[slug, training.pk]),
        reverse("judges:pl_training_curve", args=[slug, training.pk]),
    ):
        assert client.get(url).status_code in (403, 404), url
    client.post(reverse("judges:pl_training_cancel", args=[slug, training.pk]))
    assert PLTraining.objects.get().status == PLTraining.Status.PENDING


def test_a_pl_judge_is_started_from_the_judge_page_and_queued_for_its_worker(
    client: Client, cast: Cast, reward_dirs: Path
) -> None:
    ranked_study(cast.study, prompts=2)
    login(client, cast)
    slug = cast.study.slug
    client.post(reverse("judges:pl_training_list", args=[slug]), FORM)
    pl_training_execute(training_id=PLTraining.objects.get().pk)
    judge = PLTraining.objects.get().judge
    assert judge is not None
    response = client.post(
        reverse("judges:run_list", args=[slug]), {"judge": judge.pk}, follow=True
    )
    run = JudgeRun.objects.get(judge=judge)
    assert run.status == JudgeRun.Status.PENDING
    assert b"scores each answer once" in response.content
