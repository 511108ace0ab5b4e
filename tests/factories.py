"""Small builders for test data, so each test states only what matters to it."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from annotation.models import Answer, Assignment, Pair, Prompt, Study, System, Worker


def make_prompt_with_answers(
    study: Study, external_id: str = "p1", systems: tuple[str, ...] = ("sys-a", "sys-b")
) -> tuple[Prompt, list[Answer]]:
    prompt = Prompt.objects.create(
        study=study, external_id=external_id, category="writing", turns=["Write a haiku."]
    )
    answers = []
    for name in systems:
        system, _ = System.objects.get_or_create(study=study, name=name, version="1")
        answers.append(
            Answer.objects.create(prompt=prompt, system=system, turns=[f"answer by {name}"])
        )
    return prompt, answers


def make_pair(study: Study, external_id: str = "p1") -> Pair:
    prompt, answers = make_prompt_with_answers(study, external_id)
    first, second = sorted(answers, key=lambda answer: answer.pk)
    return Pair.objects.create(study=study, prompt=prompt, answer_a=first, answer_b=second)


def make_assignment(pair: Pair, worker: Worker, *, a_left: bool = True) -> Assignment:
    now = timezone.now()
    return Assignment.objects.create(
        study=pair.study,
        pair=pair,
        worker=worker,
        a_left=a_left,
        reserved_at=now,
        expires_at=now + timedelta(seconds=pair.study.time_limit_seconds),
    )
