"""Pair generation as a worker's task, polled from the pairs page.

An "all pairs" request for 130,500 pairs ran two minutes inside one web request, past
gunicorn's timeout. Now the click records a pending generation of the study (core.probes: the
cache's atomic add, so one per study is queued or running at a time; a second click gets the
pending one back and queues nothing) with what the form asked, and queues
`annotation.pairs_generate`; the worker runs the regular and the gold pairs in one transaction
(all or nothing) and stores the outcome, which the page polls. While it writes, the worker
records how many of the step's new pairs are written (core.probes.probe_progress, once per batch
of PAIRS_WRITE_BATCH rows), and the page shows it as a bar. The management command
`generate_pairs` still calls the services directly, in its own process.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import transaction

from annotation.models import Study, System
from annotation.services.pairs import (
    PairsGenerationError,
    PairsResult,
    Progress,
    gold_pairs_generate,
    pairs_generate,
)
from core.broker import task_send
from core.probes import (
    Probe,
    probe_detail,
    probe_finish,
    probe_pending,
    probe_progress,
    probe_start,
    probe_state,
)
from core.queues import Queue
from core.tasks import failure_reason

TASK_PAIRS_GENERATE = "annotation.pairs_generate"
PAIRS_PROBE = "pairs-generate"
# The task's time limits (annotation.tasks), and how long a queued generation may wait for a
# worker beyond them before the study is free for another (a lost message or a dead worker).
PAIRS_SOFT_TIME_LIMIT = 1200
PAIRS_TIME_LIMIT = 1260
PAIRS_QUEUE_GRACE_SECONDS = 600.0


def result_line(what: str, result: PairsResult) -> str:
    """One sentence of what a generation made, for the page."""
    line = (
        f"{what}: {result.created} created, {result.already_present} already present, "
        f"{result.skipped_answers} flagged answers left out"
    )
    if result.marked_gold:
        line += f", {result.marked_gold} existing pairs marked gold"
    if result.prompts_without_baseline:
        line += f", {result.prompts_without_baseline} prompts without a baseline answer"
    return line + "."


def pairs_generation_start(
    *,
    study: Study,
    strategy: str,
    baseline: System | None,
    k: int | None,
    turns: str,
    seed: int,
    gold: str,
) -> Probe:
    """Queue the study's pair generation for a worker, or return the one already queued or
    running (then nothing is queued). Raise BrokerUnavailable when the broker refuses it."""
    detail = json.dumps(
        {
            "strategy": strategy,
            "baseline": baseline.pk if baseline is not None else None,
            "k": k,
            "turns": turns,
            "seed": seed,
            "gold": gold,
        }
    )
    return probe_start(
        kind=PAIRS_PROBE,
        subject=study.pk,
        pending_seconds=PAIRS_TIME_LIMIT + PAIRS_QUEUE_GRACE_SECONDS,
        send=lambda: task_send(TASK_PAIRS_GENERATE, args=[study.pk], queue=Queue.DEFAULT),
        detail=detail,
    )


def _progress(study: Study, probe_id: str, step: str) -> Progress:
    def tell(done: int, total: int) -> None:
        probe_progress(
            kind=PAIRS_PROBE, subject=study.pk, probe_id=probe_id, step=step, done=done, total=total
        )

    return tell


def _generate(study: Study, probe_id: str, asked: dict[str, Any]) -> list[str]:
    lines = []
    with transaction.atomic():
        if asked["strategy"]:
            baseline = (
                System.objects.filter(pk=asked["baseline"], study=study).first()
                if asked["baseline"] is not None
                else None
            )
            result = pairs_generate(
                study=study,
                strategy=asked["strategy"],
                baseline_system=baseline,
                k=asked["k"],
                turns=asked["turns"],
                seed=asked["seed"],
                progress=_progress(study, probe_id, f"{asked['strategy']} pairs written"),
            )
            lines.append(result_line(f"{asked['strategy']} pairs", result))
        if asked["gold"]:
            gold = gold_pairs_generate(
                study=study,
                kind=asked["gold"],
                seed=asked["seed"],
                progress=_progress(study, probe_id, "gold pairs written"),
            )
            lines.append(result_line(f"Gold pairs ({asked['gold']})", gold))
    return lines


def pairs_generation_run(*, study_id: int) -> bool:
    """The worker's side: make the study's pending generation (one transaction) and store its
    outcome; False when none is pending."""
    probe_id = probe_pending(kind=PAIRS_PROBE, subject=study_id)
    if probe_id is None:
        return False
    raw = probe_detail(kind=PAIRS_PROBE, subject=study_id, probe_id=probe_id)
    study = Study.objects.filter(pk=study_id).first()
    answer: dict[str, object]
    if study is None or not raw:
        answer = {"ok": False, "message": "Pairs not generated: the request was lost."}
    else:
        try:
            lines = _generate(study, probe_id, json.loads(raw))
        except PairsGenerationError as exc:
            answer = {"ok": False, "message": f"Pairs not generated: {exc}"}
        except Exception as exc:
            answer = {"ok": False, "message": f"Pairs not generated: {failure_reason(exc)}"}
            probe_finish(kind=PAIRS_PROBE, subject=study_id, probe_id=probe_id, answer=answer)
            raise
        else:
            answer = {"ok": True, "message": " ".join(lines) or "Nothing was asked."}
    probe_finish(kind=PAIRS_PROBE, subject=study_id, probe_id=probe_id, answer=answer)
    return True


def pairs_generation_pending(*, study: Study) -> str | None:
    """The id of the study's generation queued or running now, if any."""
    return probe_pending(kind=PAIRS_PROBE, subject=study.pk)


def pairs_generation_state(*, study: Study, probe_id: str) -> dict[str, Any]:
    """{"state": "pending"} (with "progress": {"step", "done", "total"} once the worker writes),
    {"state": "done", "ok", "message"} or {"state": "lost"}."""
    return probe_state(kind=PAIRS_PROBE, subject=study.pk, probe_id=probe_id)
