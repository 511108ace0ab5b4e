"""Fixtures of the reward-model tests: a private embedding cache and artifacts folder."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import LazySettings

from annotation.models import Answer, HumanJudgment, Pair, Prompt, Study, System, Worker
from annotation.services.judgments import likert_preference
from tests.judges.integration import broker_purge, judge_queue_messages

REWARD_QUEUE = "reward_model"


@pytest.fixture
def broker(settings: LazySettings) -> Iterator[str]:
    """The real Redis broker, with the reward_model queue empty before and after the test."""
    broker_purge(settings.CELERY_BROKER_URL, REWARD_QUEUE)
    yield settings.CELERY_BROKER_URL
    broker_purge(settings.CELERY_BROKER_URL, REWARD_QUEUE)


def at_once(call: Callable[[], int], n: int = 4) -> list[int]:
    """`call` run by n threads released together (each with its own connection), its results
    sorted: what n reconcilers due at the same moment return."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    start = threading.Barrier(n)

    def one(_: int) -> int:
        try:
            start.wait()
            return call()
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=n) as pool:
        return sorted(pool.map(one, range(n)))


def queued(url: str) -> list[tuple[str, list[int]]]:
    """The reward_model queue's messages (task name, args), popped as a worker pops them."""
    return judge_queue_messages(url, REWARD_QUEUE, timeout=0.5)


@pytest.fixture(scope="session")
def embedding_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One embedding cache for the whole session: encoding is the slow part, vectors are exact."""
    return tmp_path_factory.mktemp("embeddings")


@pytest.fixture
def reward_dirs(settings: LazySettings, tmp_path: Path, embedding_cache: Path) -> Path:
    """Point the cache at the session's folder and the artifacts at this test's own folder."""
    settings.CONCORD_REWARD_CACHE_DIR = embedding_cache
    settings.CONCORD_REWARD_ARTIFACTS_DIR = tmp_path / "models"
    return tmp_path / "models"


@pytest.fixture
def checkpoints_root(settings: LazySettings, tmp_path: Path) -> Path:
    """A checkpoints root of this test's own (the only folders the checkpoint field may name)."""
    root = tmp_path / "checkpoints"
    root.mkdir()
    settings.CONCORD_PL_CHECKPOINTS_ROOT = root
    return root


TOPICS = (
    "bake sourdough bread",
    "change a flat bicycle tyre",
    "learn to swim as an adult",
    "save money on groceries",
    "fall asleep faster",
    "grow tomatoes on a balcony",
    "prepare for a job interview",
    "clean a cast iron pan",
    "start running without injury",
    "keep houseplants alive",
    "write a cover letter",
    "reduce screen time",
    "train a puppy to sit",
    "paint a bedroom wall",
    "make cold brew coffee",
    "study for a maths exam",
    "fix a leaking tap",
    "plan a road trip",
    "speak in public calmly",
    "brew green tea properly",
)

GOOD = (
    "Here is how to {t}: start with the basics, go step by step, check your progress each "
    "day and ask someone experienced to {t} with you once."
)
FAIR = "To {t}, practise a little and be patient."
POOR = "I am not sure how to {t}."
OFF = "The capital of Australia is Canberra and its largest city is Sydney."


def ranked_study(
    study: Study, *, prompts: int = 16, with_ranks: bool = True, human: bool = False
) -> list[Pair]:
    """Prompts whose four answers are ranked by how helpful they are (best first).

    With `human`, every pair of answers gets an imported person's judgment preferring the
    better-ranked answer (strongly when two ranks apart). Returns all pairs.
    """
    worker, _ = Worker.objects.get_or_create(
        study=study, panel=Worker.Panel.IMPORTED, external_id="rater-1"
    )
    pairs = []
    for number in range(prompts):
        topic = TOPICS[number % len(TOPICS)]
        prompt = Prompt.objects.create(
            study=study, external_id=f"q{number}", turns=[f"How do I {topic}?"]
        )
        answers = []
        for rank, template in enumerate((GOOD, FAIR, POOR, OFF), start=1):
            system, _ = System.objects.get_or_create(study=study, name=f"sys-{rank}")
            answers.append(
                Answer.objects.create(
                    prompt=prompt,
                    system=system,
                    turns=[template.format(t=topic)],
                    rank=rank if with_ranks else None,
                )
            )
        for i, first in enumerate(answers):
            for second in answers[i + 1 :]:
                a, b = sorted((first, second), key=lambda answer: answer.pk)
                pair = Pair.objects.create(study=study, prompt=prompt, answer_a=a, answer_b=b)
                pairs.append(pair)
                if human:
                    better_is_a = a.pk == first.pk
                    gap = abs(answers.index(first) - answers.index(second))
                    likert = (1 if gap >= 2 else 3) if better_is_a else (8 if gap >= 2 else 6)
                    HumanJudgment.objects.create(
                        study=study,
                        pair=pair,
                        worker=worker,
                        is_imported=True,
                        likert=likert,
                        preference=likert_preference(likert),
                    )
    return pairs
