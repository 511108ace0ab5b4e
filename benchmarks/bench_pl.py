"""The PL judge's speed: scoring against the bare encoder, pairs against answers, training.

Three figures, each a ratio or a time measured in one run on the same data:

1. answers scored per second by a PL run (embedding cache empty) against the bare encoder
   (SentenceTransformer.encode) on the same texts (the answers and their questions); target
   >= 0.8: the encoder is the limit;
2. a run judging P pairs drawn from the same N answers (cache emptied again, scores deleted)
   against the run that scores the N answers (one pair per two answers); target <= 1.2;
3. training time per 1,000 lists with cached embeddings (the default head, 40 epochs).

Run on demand (it builds its own database):

    BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/concord_bench_pl \\
        .venv/bin/python benchmarks/bench_pl.py [--answers 1000] [--pairs 10000]

Answers are synthetic ~150-token texts, 25 per prompt. Numbers depend on the machine (2 shared
cores here); the ratios are what to compare.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
os.environ["DATABASE_URL"] = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/concord_bench_pl"
)

import django  # noqa: E402
import torch  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from annotation.models import Answer, Pair, Prompt, Study, System  # noqa: E402
from judges.models import AnswerScore, Judge, JudgeRun, PLTraining  # noqa: E402
from judges.reward import encoder  # noqa: E402
from judges.reward.data import question_text  # noqa: E402
from judges.reward.features import head_new, head_scorer, pair_features  # noqa: E402
from judges.reward.scoring import pl_run_execute  # noqa: E402
from judges.reward.services import pl_training_execute  # noqa: E402
from judges.reward.training import Examples, TrainSettings, torch_threads, train  # noqa: E402

PER_PROMPT = 25
WORDS = [
    "water",
    "light",
    "garden",
    "budget",
    "morning",
    "habit",
    "practice",
    "patience",
    "question",
    "answer",
    "simple",
    "careful",
    "first",
    "second",
    "market",
    "travel",
    "kitchen",
    "sleep",
    "health",
    "plan",
    "study",
    "music",
    "friend",
    "city",
    "weather",
    "bicycle",
    "letter",
    "coffee",
    "tea",
    "paint",
    "dog",
    "exam",
    "interview",
    "route",
    "book",
    "window",
]


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def database_ensure() -> None:
    import psycopg

    name = connection.settings_dict["NAME"]
    params = connection.settings_dict
    user = params["USER"] or "postgres"
    host = f"{params['HOST'] or '127.0.0.1'}:{params['PORT'] or 5432}"
    admin = f"postgresql://{user}@{host}/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    call_command("migrate", verbosity=0)


def build(answers: int, seed: int) -> tuple[Study, User]:
    rng = random.Random(seed)
    study = Study.objects.create(slug="bench-pl", name="PL bench")
    user = User.objects.create_superuser("bench", password="x")
    systems = [System.objects.create(study=study, name=f"s{i}") for i in range(PER_PROMPT)]
    rows = []
    for p in range(answers // PER_PROMPT):
        prompt = Prompt.objects.create(
            study=study, external_id=f"q{p}", turns=[f"Question {p}: " + text(rng, 20) + "?"]
        )
        for rank, system in enumerate(systems, start=1):
            # ~150 tokens: about 110 words of these short English words.
            rows.append(Answer(prompt=prompt, system=system, turns=[text(rng, 110)], rank=rank))
    Answer.objects.bulk_create(rows)
    return study, user


def pairs_make(study: Study, count: int, seed: int) -> list[Pair]:
    """`count` distinct pairs within prompts, or one pair per two answers when count is 0."""
    rng = random.Random(seed)
    by_prompt: dict[int, list[int]] = {}
    for pk, prompt_id in Answer.objects.filter(prompt__study=study).values_list("pk", "prompt_id"):
        by_prompt.setdefault(prompt_id, []).append(pk)
    wanted: list[tuple[int, int, int]] = []
    if count == 0:
        for prompt_id, ids in by_prompt.items():
            wanted += [(prompt_id, ids[i], ids[i + 1]) for i in range(0, len(ids) - 1, 2)]
            if len(ids) % 2:
                wanted.append((prompt_id, ids[0], ids[-1]))
    else:
        every = [
            (prompt_id, a, b)
            for prompt_id, ids in by_prompt.items()
            for i, a in enumerate(ids)
            for b in ids[i + 1 :]
        ]
        wanted = rng.sample(every, min(count, len(every)))
    existing = {
        (a, b): pk for pk, a, b in Pair.objects.values_list("pk", "answer_a_id", "answer_b_id")
    }
    new = [
        Pair(study=study, prompt_id=p, answer_a_id=a, answer_b_id=b)
        for p, a, b in wanted
        if (a, b) not in existing
    ]
    Pair.objects.bulk_create(new, batch_size=2000)
    keys = {(a, b) for _, a, b in wanted}
    return [
        pair
        for pair in Pair.objects.filter(study=study)
        if (pair.answer_a_id, pair.answer_b_id) in keys
    ]


def timed_run(judge: Judge, study: Study, user: User, pairs: list[Pair]) -> float:
    settings.CONCORD_REWARD_CACHE_DIR = Path(tempfile.mkdtemp(prefix="bench-pl-cache-"))
    AnswerScore.objects.filter(run__judge=judge).delete()
    run = JudgeRun.objects.create(judge=judge, study=study, status="pending", created_by=user)
    run.pairs.set(pairs)
    started = time.perf_counter()
    assert pl_run_execute(run_id=run.pk) == "done"
    return time.perf_counter() - started


def training_time(study: Study, *, lists: int, epochs: int, seed: int) -> float:
    """Seconds to read the cached embeddings and train the default head on `lists` lists of five
    answers drawn within the study's prompts (the loop of every training, listwise, K=all)."""
    rng = random.Random(seed)
    rows = list(
        Answer.objects.filter(prompt__study=study)
        .order_by("pk")
        .values_list("prompt_id", "prompt__turns", "turns")
    )
    started = time.perf_counter()
    questions = [question_text(turns) for _, turns, _ in rows]
    answers = ["\n\n".join(turns) for _, _, turns in rows]
    q_vectors = encoder.embed_texts(questions)
    a_vectors = encoder.embed_texts(answers)
    features = pair_features(q_vectors, a_vectors)
    by_prompt: dict[int, list[int]] = {}
    for index, (prompt_id, _, _) in enumerate(rows):
        by_prompt.setdefault(prompt_id, []).append(index)
    groups = list(by_prompt.values())
    # Sorted: answers were created best first, so a list is in its gold order.
    drawn = tuple(tuple(sorted(rng.sample(rng.choice(groups), 5))) for _ in range(lists))
    head = head_new(in_features=features.shape[1], hidden=256, seed=seed)
    with torch_threads(1):
        train(
            model=head,
            scorer=head_scorer(head, torch.from_numpy(features)),
            train_examples=Examples(lists=drawn),
            validation=Examples(),
            settings=TrainSettings(epochs=epochs, seed=seed),
            device=torch.device("cpu"),
        )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--answers", type=int, default=1000)
    parser.add_argument("--pairs", type=int, default=10000)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--lists", type=int, default=1000, help="lists for the training figure")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    database_ensure()
    root = Path(tempfile.mkdtemp(prefix="bench-pl-"))
    settings.CONCORD_REWARD_ARTIFACTS_DIR = root / "models"
    settings.CONCORD_REWARD_CACHE_DIR = root / "train-cache"
    study, user = build(args.answers, args.seed)
    n_answers = Answer.objects.filter(prompt__study=study).count()
    print(f"{n_answers} answers in {n_answers // PER_PROMPT} prompts of {PER_PROMPT}")

    encoder.load_encoder()  # the model load is not part of any figure
    answers = list(Answer.objects.filter(prompt__study=study).values_list("turns", "prompt__turns"))
    texts = sorted({question_text(q) for _, q in answers}) + ["\n\n".join(t) for t, _ in answers]
    started = time.perf_counter()
    encoder.encode_uncached(texts)
    bare = time.perf_counter() - started
    print(f"bare encoder: {len(texts)} texts in {bare:.1f} s ({n_answers / bare:.1f} answers/s)")

    def training_new(name: str) -> PLTraining:
        return PLTraining.objects.create(
            study=study,
            name=name,
            params={
                "recipe": "listwise", "k": "all", "sources": ["ranked"], "ties": "drop",
                "likert_weights": False, "mode": "head", "backbone": encoder.DEFAULT_BACKBONE,
                "checkpoint": "", "learning_rate": 1e-3, "hidden": 256, "batch_size": 64,
                "holdout": 0.2,
            },
            epochs=args.epochs,
            seed=args.seed,
            created_by=user,
        )  # fmt: skip

    # A training encodes every text into the cache and registers the judge that runs below.
    training = training_new("bench-pl")
    assert pl_training_execute(training_id=training.pk) == "done"
    training.refresh_from_db()
    judge = training.judge
    assert judge is not None
    train_seconds = training_time(study, lists=args.lists, epochs=args.epochs, seed=args.seed)

    answer_pairs = pairs_make(study, 0, args.seed)
    t_answers = timed_run(judge, study, user, answer_pairs)
    many = pairs_make(study, args.pairs, args.seed)
    t_pairs = timed_run(judge, study, user, many)
    print(
        f"PL run scoring the answers ({len(answer_pairs)} pairs): {t_answers:.1f} s "
        f"({n_answers / t_answers:.1f} answers/s)"
    )
    print(f"PL run judging {len(many)} pairs of the same answers: {t_pairs:.1f} s")
    print(
        f"training with cached embeddings: {args.lists} lists of 5, {args.epochs} epochs, "
        f"{train_seconds:.1f} s"
    )
    print()
    print(f"1. answers/s, PL run / bare encoder: {bare / t_answers:.2f} (target >= 0.8)")
    print(
        f"2. {len(many)} pairs / {n_answers} answers, time ratio: {t_pairs / t_answers:.2f} "
        "(target <= 1.2)"
    )
    print(
        f"3. training time per 1,000 lists with cached embeddings ({args.epochs} epochs): "
        f"{train_seconds / args.lists * 1000:.1f} s"
    )


if __name__ == "__main__":
    main()
