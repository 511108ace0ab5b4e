"""Building a study's contrast set as a worker's task, polled from its page.

Building one from the shell took 129 s (embedding every question). Now the page's click records
a pending build of the study (core.probes: one per study queued or running at a time; a second
click gets the pending one back and queues nothing) and queues `leaderboard.contrast_set_build`;
the worker calls `contrast_set_build` with the defaults and stores the outcome for the page: the
pairs found, and when none, the service's counts (pairs above and below the window) and the
nearest cosine. While it embeds the questions (nearly all of a build's time) the worker records
how many are embedded (core.probes.probe_progress, once per ENCODE_PROGRESS_CHUNK questions),
and the page shows it as a bar. The command `build_contrast_set` still builds in its own process.
"""

from __future__ import annotations

from typing import Any

from annotation.models import Study
from annotation.services.contrast import ContrastSetError
from core.broker import task_send
from core.probes import Probe, probe_finish, probe_pending, probe_progress, probe_start, probe_state
from core.queues import Queue
from core.tasks import failure_reason
from judges.reward.encoder import BackboneNotFound
from leaderboard.services.contrast import ContrastBuildError, contrast_set_build

TASK_CONTRAST_BUILD = "leaderboard.contrast_set_build"
CONTRAST_PROBE = "contrast-build"
CONTRAST_SOFT_TIME_LIMIT = 1200
CONTRAST_TIME_LIMIT = 1260
CONTRAST_QUEUE_GRACE_SECONDS = 600.0


def contrast_build_start(*, study: Study) -> Probe:
    """Queue the study's contrast set build, or return the one already queued or running (then
    nothing is queued). Raise BrokerUnavailable when the broker refuses it."""
    return probe_start(
        kind=CONTRAST_PROBE,
        subject=study.pk,
        pending_seconds=CONTRAST_TIME_LIMIT + CONTRAST_QUEUE_GRACE_SECONDS,
        send=lambda: task_send(TASK_CONTRAST_BUILD, args=[study.pk], queue=Queue.DEFAULT),
    )


def contrast_build_run(*, study_id: int) -> bool:
    """The worker's side: build the study's pending contrast set and store the outcome; False
    when none is pending."""
    probe_id = probe_pending(kind=CONTRAST_PROBE, subject=study_id)
    if probe_id is None:
        return False
    study = Study.objects.filter(pk=study_id).first()
    answer: dict[str, object]
    if study is None:
        answer = {"ok": False, "message": "Contrast set not built: the study is gone."}
    else:
        try:

            def tell(done: int, total: int) -> None:
                probe_progress(
                    kind=CONTRAST_PROBE,
                    subject=study_id,
                    probe_id=probe_id,
                    step="questions embedded",
                    done=done,
                    total=total,
                )

            built = contrast_set_build(study=study, progress=tell)
        except (ContrastBuildError, ContrastSetError, BackboneNotFound) as exc:
            answer = {"ok": False, "message": f"Contrast set not built: {exc}"}
        except Exception as exc:
            answer = {"ok": False, "message": f"Contrast set not built: {failure_reason(exc)}"}
            probe_finish(kind=CONTRAST_PROBE, subject=study_id, probe_id=probe_id, answer=answer)
            raise
        else:
            state = "stored" if built.stored.created else "already stored"
            answer = {"ok": True, "message": f"{built.message} Contrast set (seed 0): {state}."}
    probe_finish(kind=CONTRAST_PROBE, subject=study_id, probe_id=probe_id, answer=answer)
    return True


def contrast_build_pending(*, study: Study) -> str | None:
    """The id of the study's build queued or running now, if any."""
    return probe_pending(kind=CONTRAST_PROBE, subject=study.pk)


def contrast_build_state(*, study: Study, probe_id: str) -> dict[str, Any]:
    """{"state": "pending"} (with "progress": {"step", "done", "total"} while the worker embeds),
    {"state": "done", "ok", "message"} or {"state": "lost"}."""
    return probe_state(kind=CONTRAST_PROBE, subject=study.pk, probe_id=probe_id)
