"""Fixtures for judge tests: the fake OpenAI server, judges, and pairs the server can recognise."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import User

from annotation.models import Answer, Pair, Prompt, Study, System
from judges.models import Judge, JudgeRun
from judges.services.judges import judge_create
from judges.services.panels import panel_run_combine
from judges.services.runs import judge_run_start
from tests.judges.fake_openai import API_KEY, FakeOpenAI

KEY_ENV = "CONCORD_JUDGE_KEY_TEST"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, API_KEY)
    return API_KEY


@pytest.fixture(autouse=True)
def _clean_rate_limits() -> Iterator[None]:
    """Each test starts with empty rate-limit windows and journal in its own Redis database."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    for pattern in ("concord:rate:*", "concord:journal:*"):
        for key in client.scan_iter(pattern):
            client.delete(key)
    yield
    client.close()


def make_llm_judge(
    fake: FakeOpenAI,
    *,
    name: str = "gpt-fake",
    template: str = "likert",
    rpm: int | None = None,
    tpm: int | None = None,
    order_policy: str = Judge.OrderPolicy.BOTH,
    price_in: str = "10",
    price_out: str = "30",
    reference_guided: bool = False,
    **options: Any,
) -> Judge:
    return judge_create(
        name=name,
        kind=Judge.Kind.LLM,
        model_name="gpt-4-fake",
        base_url=fake.base_url,
        api_key_env=KEY_ENV,
        template_name=template,
        price_input_per_mtok=Decimal(price_in),
        price_output_per_mtok=Decimal(price_out),
        requests_per_minute=rpm,
        tokens_per_minute=tpm,
        order_policy=order_policy,
        reference_guided=reference_guided,
        **options,
    )


def make_marked_pairs(study: Study, count: int) -> list[Pair]:
    """Pairs whose answers carry markers "(ref pN-A)" and "(ref pN-B)" for the fake server."""
    first, _ = System.objects.get_or_create(study=study, name="sys-one", version="1")
    second, _ = System.objects.get_or_create(study=study, name="sys-two", version="1")
    pairs = []
    for index in range(count):
        ref = f"{study.slug}.p{index}"
        prompt = Prompt.objects.create(
            study=study, external_id=ref, category="advice", turns=[f"Question {index}?"]
        )
        answer_a = Answer.objects.create(
            prompt=prompt, system=first, turns=[f"A short answer (ref {ref}-A)."]
        )
        answer_b = Answer.objects.create(
            prompt=prompt, system=second, turns=[f"A much longer answer, in detail (ref {ref}-B)."]
        )
        pairs.append(
            Pair.objects.create(study=study, prompt=prompt, answer_a=answer_a, answer_b=answer_b)
        )
    return pairs


def pair_key(pair: Pair, order: str) -> str:
    return f"{pair.prompt.external_id}:{order}"


def panel_run(*, judge: Judge, study: Study, user: User) -> JudgeRun:
    """Start a panel run and do what its worker does: combine the members' calls."""
    run = judge_run_start(judge=judge, study=study, user=user)
    assert run.status == JudgeRun.Status.RUNNING and not run.calls.exists()
    assert panel_run_combine(run_id=run.pk) == run.calls.count()
    run.refresh_from_db()
    return run
