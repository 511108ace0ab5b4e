"""Writing a study's reference answers as a worker's task, polled from the references page.

The page's click checks the reference judge (judges.services.references.references_write_check:
ready, priced, categories named) and who clicks (a researcher or admin who may read the study,
as for judge runs), records a pending job of the study (core.probes: one per study queued or
running at a time, whichever judge it writes with; a second click gets the pending one back and
queues nothing) and queues `judges.references_write` on the llm_judge queue. The worker calls
`references_write` with the job's judge, records how many prompts it has asked
(core.probes.probe_progress, after each prompt) and stores the outcome for the page: how many
written, what they cost, and each failed prompt with its reason. Every request is on the
reference ledger (judges.models.ReferenceCall) whatever becomes of the job; the command
`references_write` still writes in its own process.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from annotation.models import Study
from core.broker import task_send
from core.errors import ApplicationError
from core.probes import Probe, probe_finish, probe_pending, probe_progress, probe_start, probe_state
from core.queues import Queue
from core.tasks import failure_reason
from judges.models import Judge
from judges.services.references import (
    ReferenceWriteResult,
    references_write,
    references_write_check,
)
from judges.services.runs import _check_may_run

TASK_REFERENCES_WRITE = "judges.references_write"
REFERENCES_PROBE = "references-write"
REFERENCES_SOFT_TIME_LIMIT = 3300
REFERENCES_TIME_LIMIT = 3420
REFERENCES_QUEUE_GRACE_SECONDS = 600.0
# Failed prompts named in the job's message; the page's ledger lists every one.
FAILURES_SHOWN = 5


def references_write_start(*, study: Study, judge: Judge, user: User) -> Probe:
    """Queue the writing of the study's missing references by `judge`, or return the job already
    queued or running for the study (then nothing is queued).

    Raise PermissionDenied for a user who may not run judges on the study, ApplicationError when
    the judge cannot write them (before anything is queued), BrokerUnavailable when the broker
    refuses the task.
    """
    _check_may_run(user=user, study=study)
    references_write_check(study=study, judge=judge)
    return probe_start(
        kind=REFERENCES_PROBE,
        subject=study.pk,
        pending_seconds=REFERENCES_TIME_LIMIT + REFERENCES_QUEUE_GRACE_SECONDS,
        send=lambda: task_send(
            TASK_REFERENCES_WRITE, args=[study.pk, judge.pk], queue=Queue.LLM_JUDGE
        ),
        detail=str(judge.pk),
    )


def references_write_message(result: ReferenceWriteResult) -> str:
    """What the page says of a finished job."""
    parts = [
        f"{len(result.written) + len(result.reused)} references written by {result.source} "
        f"for {', '.join(result.categories)} ({result.cost_usd} USD on the reference ledger)"
    ]
    if result.kept:
        parts.append(f"{len(result.kept)} set meanwhile by another writer and kept")
    if result.failed:
        named = "; ".join(f"{f.external_id}: {f.reason}" for f in result.failed[:FAILURES_SHOWN])
        more = len(result.failed) - FAILURES_SHOWN
        parts.append(
            f"{len(result.failed)} failed ({named}{f'; and {more} more' if more > 0 else ''}); "
            "write again to ask them again"
        )
    return ". ".join(parts) + "."


def references_write_run(*, study_id: int, judge_id: int) -> bool:
    """The worker's side: write the study's pending job's references and store the outcome;
    False when none is pending."""
    probe_id = probe_pending(kind=REFERENCES_PROBE, subject=study_id)
    if probe_id is None:
        return False
    study = Study.objects.filter(pk=study_id).first()
    judge = Judge.objects.filter(pk=judge_id).first()
    answer: dict[str, object]
    if study is None or judge is None:
        answer = {"ok": False, "message": "No references written: the study or judge is gone."}
    else:

        def tell(done: int, total: int) -> None:
            probe_progress(
                kind=REFERENCES_PROBE,
                subject=study_id,
                probe_id=probe_id,
                step="prompts asked",
                done=done,
                total=total,
            )

        try:
            result = references_write(study=study, judge=judge, progress=tell)
        except ApplicationError as exc:
            answer = {"ok": False, "message": f"No references written: {exc}"}
        except Exception as exc:
            answer = {"ok": False, "message": f"References stopped: {failure_reason(exc)}"}
            probe_finish(kind=REFERENCES_PROBE, subject=study_id, probe_id=probe_id, answer=answer)
            raise
        else:
            answer = {"ok": not result.failed, "message": references_write_message(result)}
    probe_finish(kind=REFERENCES_PROBE, subject=study_id, probe_id=probe_id, answer=answer)
    return True


def references_write_pending(*, study: Study) -> str | None:
    """The id of the study's job queued or running now, if any."""
    return probe_pending(kind=REFERENCES_PROBE, subject=study.pk)


def references_write_state(*, study: Study, probe_id: str) -> dict[str, Any]:
    """{"state": "pending"} (with "progress": {"step", "done", "total"} once the worker asks),
    {"state": "done", "ok", "message"} or {"state": "lost"}."""
    return probe_state(kind=REFERENCES_PROBE, subject=study.pk, probe_id=probe_id)
