"""Builders for the annotation-flow tests: many pairs at once, workers, quick submissions."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.models import User

from annotation.models import (
    Answer,
    Assignment,
    HumanJudgment,
    Pair,
    Prompt,
    Study,
    System,
    Worker,
)
from annotation.services.judgments import judgment_submit


def make_pairs(
    study: Study,
    count: int,
    *,
    gold: int = 0,
    systems: tuple[str, str] = ("sys-a", "sys-b"),
    texts: tuple[str, str] = ("first answer", "second answer"),
    prefix: str = "p",
) -> list[Pair]:
    """Make `count` regular and `gold` gold pairs, one prompt each, with bulk inserts."""
    first, _ = System.objects.get_or_create(study=study, name=systems[0], version="1")
    second, _ = System.objects.get_or_create(study=study, name=systems[1], version="1")
    total = count + gold
    prompts = Prompt.objects.bulk_create(
        Prompt(study=study, external_id=f"{prefix}{i}", category="advice", turns=[f"Q{i}?"])
        for i in range(total)
    )
    answers = Answer.objects.bulk_create(
        Answer(prompt=prompt, system=system, turns=[text], rank=rank)
        for prompt in prompts
        for system, text, rank in ((first, texts[0], 1), (second, texts[1], 2))
    )
    pairs = []
    for i, prompt in enumerate(prompts):
        a, b = sorted(answers[2 * i : 2 * i + 2], key=lambda answer: answer.pk)
        is_gold = i >= count
        pairs.append(
            Pair(
                study=study,
                prompt=prompt,
                answer_a=a,
                answer_b=b,
                is_gold=is_gold,
                gold_side="A" if is_gold else "",
                gold_kind=Pair.GoldKind.FIRST_VS_LAST if is_gold else "",
                source=Pair.Source.GOLD if is_gold else Pair.Source.ALL_PAIRS,
            )
        )
    return Pair.objects.bulk_create(pairs)


def make_worker(study: Study, name: str) -> Worker:
    user = User.objects.create_user(username=f"{study.slug}-{name}")
    return Worker.objects.create(
        study=study, user=user, panel=Worker.Panel.PROLIFIC, external_id=name
    )


def submit(assignment: Assignment, **fields: Any) -> HumanJudgment:
    """Submit a Likert answer (left slightly better unless told) for the assignment."""
    fields.setdefault("likert_shown", 3)
    fields.setdefault("submission_id", uuid.uuid4())
    return judgment_submit(
        assignment_public_id=assignment.public_id, worker=assignment.worker, **fields
    ).judgment


def answer_gold(assignment: Assignment, *, correctly: bool) -> HumanJudgment:
    """Answer a gold pair (gold side A) on the right side or the wrong one."""
    a_shown_left = assignment.a_left
    prefers_left = a_shown_left if correctly else not a_shown_left
    return submit(assignment, likert_shown=1 if prefers_left else 8)


def prolific_url(study: Study, pid: str, *, session: str = "S1") -> str:
    """The Prolific link of a study configured with the Prolific study id STUDY1."""
    Study.objects.filter(pk=study.pk, prolific_study_id="").update(prolific_study_id="STUDY1")
    return (
        f"/work/{study.slug}/enter/prolific/"
        f"?PROLIFIC_PID={pid}&STUDY_ID=STUDY1&SESSION_ID={session}"
    )


def enter_and_consent(client: Any, study: Study, pid: str) -> Worker:
    """Arrive from Prolific with the Django test client, agree, and return the worker."""
    response = client.get(prolific_url(study, pid))
    assert response.status_code == 302, response.content
    response = client.post(f"/work/{study.slug}/consent/", {"agree": "yes"})
    assert response.status_code == 302, response.content
    return Worker.objects.get(study=study, panel=Worker.Panel.PROLIFIC, external_id=pid)


def open_item(client: Any, study: Study) -> Assignment:
    """Follow the worker's next link to an item; return its assignment."""
    response = client.get(f"/work/{study.slug}/")
    assert response.status_code == 302 and "/item/" in response["Location"], response
    public_id = response["Location"].rstrip("/").rsplit("/", 1)[-1]
    return Assignment.objects.get(public_id=public_id)
