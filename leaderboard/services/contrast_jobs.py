"""Building a study's contrast set as a worker's task, polled from its page.

Building one from the shell took 129 s (embedding every question). Now the page's click records
a pending build of the study (core.probes: one per study queued or running at a time; a second
click gets the pending one back and queues nothing) and queues `leaderboard.contrast_set_build`;
the worker calls `contrast_set_build` with the page form's options (those of the command: the
cosine window, the seed, the best-answer rule and its system, the backbone, and whether to
create the items; kept with the pending build as its detail, so a redelivered message builds
the same) and stores the outcome for the page with the options it used: the pairs found, and
when none, the service's counts (pairs above and below the window) and the nearest cosine.
While it embeds the questions (nearly all of a build's time) the worker records how many are
embedded (core.probes.probe_progress, once per ENCODE_PROGRESS_CHUNK questions),
and the page shows it as a bar. The command `build_contrast_set` still builds in its own process.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from annotation.models import ContrastSet, Study, System
from annotation.services.contrast import ContrastSetError
from annotation.services.pairs import PairsGenerationError, pairs_generate
from core.broker import task_send
from core.errors import ApplicationError
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
from judges.reward.encoder import DEFAULT_BACKBONE, BackboneNotFound, backbone_path
from leaderboard.services.contrast import ContrastBuildError, contrast_set_build
from leaderboard.stats.consistency import DEFAULT_WINDOW

TASK_CONTRAST_BUILD = "leaderboard.contrast_set_build"
CONTRAST_PROBE = "contrast-build"
CONTRAST_SOFT_TIME_LIMIT = 1200
CONTRAST_TIME_LIMIT = 1260
CONTRAST_QUEUE_GRACE_SECONDS = 600.0
BACKBONE_REFUSED = (
    f"Backbone: give {DEFAULT_BACKBONE!r} (the shipped encoder) or the name of a "
    "sentence-transformers folder under the checkpoints root (CONCORD_PL_CHECKPOINTS_ROOT)."
)


class BackboneRefused(ApplicationError):
    """The backbone is neither the shipped encoder nor a sentence-transformers folder under the
    checkpoints root; one message for all else, so it tells nothing of the server's folders."""


@dataclass(frozen=True)
class ContrastBuildOptions:
    """What a build is asked for: the options of the command `build_contrast_set`, with its
    defaults. `system_id` and `system_label` name the system of the best-answer rule
    ``system``; `backbone` is the shipped encoder's name or a folder name under the checkpoints
    root, as the researcher gave it (resolved by :func:`contrast_backbone_resolve`)."""

    low: float = DEFAULT_WINDOW[0]
    high: float = DEFAULT_WINDOW[1]
    seed: int = 0
    best: str = ContrastSet.Best.FIRST_RANKED.value
    system_id: int | None = None
    system_label: str = ""
    backbone: str = DEFAULT_BACKBONE
    items: bool = False

    def detail(self) -> str:
        """The options as the pending build keeps them (JSON)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_detail(cls, text: str) -> ContrastBuildOptions:
        """The options a pending build was started with; the defaults when it kept none."""
        return cls(**json.loads(text)) if text else cls()

    def describe(self) -> str:
        """The options in a sentence, for the page and the build's result."""
        best = ContrastSet.Best(self.best).label.lower()
        if self.best == ContrastSet.Best.SYSTEM:
            best += f" ({self.system_label})"
        return (
            f"window [{self.low:g}, {self.high:g}], seed {self.seed}, best answer: {best}, "
            f"backbone {self.backbone}, items: {'created' if self.items else 'not created'}"
        )


def contrast_backbone_resolve(value: str) -> str:
    """The backbone a build uses for `value`: the shipped encoder's name, or the resolved path of
    a sentence-transformers folder under CONCORD_PL_CHECKPOINTS_ROOT; BackboneRefused else."""
    from judges.reward.hf import CheckpointError, checkpoint_resolve

    value = value.strip()
    if value == DEFAULT_BACKBONE:
        return value
    try:
        folder = str(checkpoint_resolve(value))
        backbone_path(folder)
    except (CheckpointError, BackboneNotFound) as exc:
        raise BackboneRefused(BACKBONE_REFUSED) from exc
    return folder


def contrast_build_start(*, study: Study, options: ContrastBuildOptions | None = None) -> Probe:
    """Queue the study's contrast set build with `options` (the defaults when None), or return
    the one already queued or running (then nothing is queued, and its own options hold).
    Raise BrokerUnavailable when the broker refuses it. The caller validated the options
    (leaderboard.forms.ContrastBuildForm)."""
    return probe_start(
        kind=CONTRAST_PROBE,
        subject=study.pk,
        pending_seconds=CONTRAST_TIME_LIMIT + CONTRAST_QUEUE_GRACE_SECONDS,
        send=lambda: task_send(TASK_CONTRAST_BUILD, args=[study.pk], queue=Queue.DEFAULT),
        detail=(options or ContrastBuildOptions()).detail(),
    )


def _build(study: Study, options: ContrastBuildOptions, probe_id: str) -> str:
    """Build the study's contrast set as `options` say (and its items when asked); return what
    it found. Raise the build's errors (ContrastBuildError, ...) with their message."""
    system = None
    if options.system_id is not None:
        system = System.objects.filter(pk=options.system_id, study=study).first()
        if system is None:
            raise ContrastBuildError(f"the system {options.system_label!r} is gone")

    def tell(done: int, total: int) -> None:
        probe_progress(
            kind=CONTRAST_PROBE,
            subject=study.pk,
            probe_id=probe_id,
            step="questions embedded",
            done=done,
            total=total,
        )

    built = contrast_set_build(
        study=study,
        seed=options.seed,
        low=options.low,
        high=options.high,
        best=ContrastSet.Best(options.best),
        system=system,
        backbone=contrast_backbone_resolve(options.backbone),
        progress=tell,
    )
    state = "stored" if built.stored.created else "already stored"
    message = f"{built.message} Contrast set (seed {options.seed}): {state}."
    if options.items:
        try:
            items = pairs_generate(study=study, strategy="contrast", seed=options.seed)
        except PairsGenerationError as exc:
            return f"{message} Contrast items not created: {exc}"
        message += (
            f" Contrast items: {items.created} created, {items.already_present} already "
            f"present, {items.skipped_answers} pairs skipped for identity leaks."
        )
    return message


def contrast_build_run(*, study_id: int) -> bool:
    """The worker's side: build the study's pending contrast set and store the outcome; False
    when none is pending."""
    probe_id = probe_pending(kind=CONTRAST_PROBE, subject=study_id)
    if probe_id is None:
        return False
    options = ContrastBuildOptions.from_detail(
        probe_detail(kind=CONTRAST_PROBE, subject=study_id, probe_id=probe_id)
    )
    study = Study.objects.filter(pk=study_id).first()
    answer: dict[str, object] = {"options": options.describe()}
    if study is None:
        answer |= {"ok": False, "message": "Contrast set not built: the study is gone."}
    else:
        try:
            message = _build(study, options, probe_id)
        except (ContrastBuildError, ContrastSetError, BackboneNotFound, BackboneRefused) as exc:
            answer |= {"ok": False, "message": f"Contrast set not built: {exc}"}
        except Exception as exc:
            answer |= {"ok": False, "message": f"Contrast set not built: {failure_reason(exc)}"}
            probe_finish(kind=CONTRAST_PROBE, subject=study_id, probe_id=probe_id, answer=answer)
            raise
        else:
            answer |= {"ok": True, "message": message}
    probe_finish(kind=CONTRAST_PROBE, subject=study_id, probe_id=probe_id, answer=answer)
    return True


def contrast_build_pending(*, study: Study) -> str | None:
    """The id of the study's build queued or running now, if any."""
    return probe_pending(kind=CONTRAST_PROBE, subject=study.pk)


def contrast_build_state(*, study: Study, probe_id: str) -> dict[str, Any]:
    """{"state": "pending"} (with "progress": {"step", "done", "total"} while the worker embeds),
    {"state": "done", "ok", "message", "options"} or {"state": "lost"}; "options" is the
    build's options in a sentence (ContrastBuildOptions.describe)."""
    return probe_state(kind=CONTRAST_PROBE, subject=study.pk, probe_id=probe_id)


def contrast_build_options(*, study: Study, probe_id: str) -> str:
    """The options a build was started with, in a sentence ("" once its detail expired)."""
    detail = probe_detail(kind=CONTRAST_PROBE, subject=study.pk, probe_id=probe_id)
    return ContrastBuildOptions.from_detail(detail).describe() if detail else ""
