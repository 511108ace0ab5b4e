"""The annotator's pages: entry, consent, the work form, completion. Doors only: parse, call one
service or selector, render.

Every response here carries a strict Content-Security-Policy and is never cached, and nothing on
these pages names a system, another worker's judgment or a judge's verdict.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.contrib.auth import login
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views import View

from annotation.models import (
    FINE_GRAINED_AXES,
    Acceptability,
    Assignment,
    Study,
    Worker,
)
from annotation.panels import panel_get
from annotation.rendering import markdown_render_safe
from annotation.selectors.work import (
    HeldAssignment,
    HeldElsewhere,
    Progress,
    assignment_get_for_worker,
    work_item_build,
    worker_get_in_study,
    worker_held_until,
    worker_pairs_held_elsewhere,
    worker_progress,
)
from annotation.services.assignments import (
    BLOCKED_MESSAGE,
    Claimed,
    assignment_claim,
    assignment_skip,
)
from annotation.services.entry import (
    client_make,
    entry_admit,
    entry_user_conflict,
    worker_seen,
    worker_session_bind,
)
from annotation.services.errors import (
    AssignmentClosed,
    AssignmentExpired,
    AssignmentNotFound,
    EntryRateLimited,
    EntryRefused,
    JudgmentInvalid,
    StudyNotOpen,
    WorkerBlocked,
)
from annotation.services.judgments import judgment_submit
from annotation.services.workers import worker_completion_code, worker_consent, worker_finish
from core.conventions import SEVEN_VALUES
from core.csp import CONTENT_SECURITY_POLICY

LIKERT_CHOICES: tuple[tuple[int, str], ...] = (
    (1, "Left is much better"),
    (2, "Left is better"),
    (3, "Left is slightly better"),
    (4, "About equal, left a little better"),
    (5, "About equal, right a little better"),
    (6, "Right is slightly better"),
    (7, "Right is better"),
    (8, "Right is much better"),
)
AXIS_CHOICES: tuple[str, ...] = ("no", "partial", "yes")


def secure_worker_response(response: HttpResponseBase) -> HttpResponseBase:
    """Add the worker pages' CSP and keep them out of every cache (back button re-asks)."""
    response["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    add_never_cache_headers(response)
    return response


def refused(request: HttpRequest, message: str, *, status: int = 403) -> HttpResponse:
    return render(request, "annotation/work/refused.html", {"message": message}, status=status)


class EntryView(View):
    """Arrive from a panel link: `/work/<study>/enter/<panel>/?...`."""

    def get(self, request: HttpRequest, slug: str, panel: str) -> HttpResponseBase:
        return secure_worker_response(self._enter(request, slug, panel))

    def _enter(self, request: HttpRequest, slug: str, panel_key: str) -> HttpResponse:
        panel = panel_get(panel_key)
        study = Study.objects.filter(slug=slug).first()
        if panel is None or study is None:
            raise Http404("No such study link.")
        conflict = entry_user_conflict(user=request.user)
        if conflict:
            return refused(request, conflict, status=409)
        client = client_make(meta=request.META, session_key=request.session.session_key)
        try:
            worker = entry_admit(study=study, panel=panel, params=request.GET, client=client)
        except EntryRefused as exc:
            status = 429 if isinstance(exc, EntryRateLimited) else 403
            return refused(request, exc.message, status=status)
        except StudyNotOpen as exc:
            return render(request, "annotation/work/no_work.html", {"message": exc.message})
        assert worker.user is not None
        login(request, worker.user, backend="core.auth.AccountBackend")
        if request.session.session_key is None:
            request.session.save()  # a flushed session has its key only once saved
        session_key = request.session.session_key
        assert session_key is not None
        worker_session_bind(worker=worker, session_key=session_key)
        if worker.consented_at is None:
            return redirect("work:consent", slug=study.slug)
        return redirect("work:next", slug=study.slug)


class WorkerView(View):
    """A page of the flow for the worker bound to this browser session."""

    needs_consent = True
    study: Study
    worker: Worker

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        return secure_worker_response(self._checked_dispatch(request, *args, **kwargs))

    def _checked_dispatch(
        self, request: HttpRequest, *args: Any, **kwargs: Any
    ) -> HttpResponseBase:
        # The worker and the study in one query; the study alone only to say which is missing.
        worker = worker_get_in_study(
            slug=kwargs["slug"], user_id=request.user.pk if request.user.is_authenticated else None
        )
        if worker is None:
            if not Study.objects.filter(slug=kwargs["slug"]).exists():
                raise Http404("No such study.")
            return refused(
                request,
                "Please open this study from the link your panel gave you.",
            )
        if not worker.session_key or worker.session_key != request.session.session_key:
            return refused(
                request,
                "This study was opened in another window or device; please continue there.",
            )
        worker_seen(worker=worker)
        self.study, self.worker = worker.study, worker
        if self.needs_consent and worker.consented_at is None:
            return redirect("work:consent", slug=worker.study.slug)
        return super().dispatch(request, *args, **kwargs)


class ConsentView(WorkerView):
    needs_consent = False

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        return render(
            request,
            "annotation/work/consent.html",
            {
                "study": self.study,
                "instructions_html": markdown_render_safe(self.study.instructions),
                "progress": worker_progress(worker=self.worker),
            },
        )

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        if request.POST.get("agree") != "yes":
            return render(
                request,
                "annotation/work/consent.html",
                {
                    "study": self.study,
                    "instructions_html": markdown_render_safe(self.study.instructions),
                    "progress": worker_progress(worker=self.worker),
                    "error": "Please tick the box to say you agree before you start.",
                },
                status=400,
            )
        worker_consent(worker=self.worker)
        return redirect("work:next", slug=self.study.slug)


class NextView(WorkerView):
    """Reserve the next item and go to it, or end the session with the right page."""

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        try:
            claimed = assignment_claim(worker=self.worker)
        except WorkerBlocked as exc:
            return blocked_page(request, study=self.study, worker=self.worker, message=exc.message)
        except StudyNotOpen as exc:
            return render(request, "annotation/work/no_work.html", {"message": exc.message})
        if claimed.assignment is not None:
            return redirect("work:item", slug=slug, public_id=claimed.assignment.public_id)
        if claimed.done < claimed.target:
            held = worker_pairs_held_elsewhere(worker=self.worker)
            if held.pairs:
                return wait_page(request, study=self.study, claimed=claimed, held=held)
        if claimed.done > 0:
            worker_finish(worker=self.worker, out_of_work=True)
            return redirect("work:done", slug=slug)
        return render(
            request,
            "annotation/work/no_work.html",
            {"message": "There is no work available in this study right now."},
        )


# The waiting page checks again after the first of the others' reservations should have run out,
# within these bounds (seconds).
WAIT_RECHECK_MIN, WAIT_RECHECK_MAX = 10, 120


def wait_page(
    request: HttpRequest, *, study: Study, claimed: Claimed, held: HeldElsewhere
) -> HttpResponse:
    """Items are left but held by other workers: come back in a few minutes (no code yet)."""
    seconds = WAIT_RECHECK_MIN
    if held.frees_at is not None:
        seconds = int((held.frees_at - timezone.now()).total_seconds()) + 2
    minutes = -(-seconds // 60) if held.frees_at is not None else 0
    return render(
        request,
        "annotation/work/wait.html",
        {
            "study": study,
            "progress": Progress(done=claimed.done, target=claimed.target),
            "recheck_seconds": min(WAIT_RECHECK_MAX, max(WAIT_RECHECK_MIN, seconds)),
            "frees_in_minutes": minutes,
        },
    )


def blocked_page(
    request: HttpRequest, *, study: Study, worker: Worker, message: str
) -> HttpResponse:
    """No more items for a blocked worker: the study's screened-out code and the way back."""
    code = study.screened_out_code
    panel = panel_get(worker.panel)
    return render(
        request,
        "annotation/work/blocked.html",
        {
            "message": message,
            "screened_out_code": code,
            "completion_url": panel.completion_url(study=study, code=code) if panel else "",
        },
        status=403,
    )


def _item_context(
    view: WorkerView, held: HeldAssignment, *, posted: dict[str, Any] | None = None
) -> dict[str, Any]:
    study, assignment = view.study, held.assignment
    # Counted in the query that read the assignment (assignment_get_for_worker): no count here.
    progress = Progress(done=held.done, target=study.target_per_worker)
    return {
        "study": study,
        "item": work_item_build(assignment=assignment),
        "progress": progress,
        "submission_id": (posted or {}).get("submission_id") or uuid.uuid4(),
        "likert_choices": LIKERT_CHOICES,
        "seven_values": SEVEN_VALUES,
        "acceptability_choices": Acceptability.choices,
        "axes": FINE_GRAINED_AXES,
        "axis_choices": AXIS_CHOICES,
        "ask_values": study.form_values or study.form_rationale_only,
        "posted": posted or {},
        "warned": _gold_warning_due(view.worker, progress.done),
        "skip_reasons": Assignment.SkipReason.choices,
    }


# The gold warning shows only at every GOLD_WARNING_EVERY-th item: shown right after the gold
# judgment that caused it, it would tell the worker which item was gold.
GOLD_WARNING_EVERY = 5


def _gold_warning_due(worker: Worker, done: int) -> bool:
    return worker.state == Worker.State.WARNED and done > 0 and done % GOLD_WARNING_EVERY == 0


class ItemView(WorkerView):
    """One reserved item: GET shows the forms, POST submits them."""

    def _held(self, public_id: uuid.UUID) -> HeldAssignment:
        held = assignment_get_for_worker(worker=self.worker, public_id=public_id)
        if held is None:
            raise Http404("No such item.")
        return held

    def get(self, request: HttpRequest, slug: str, public_id: uuid.UUID) -> HttpResponse:
        held = self._held(public_id)
        assignment = held.assignment
        if assignment.status != Assignment.Status.RESERVED:
            return redirect("work:next", slug=slug)
        if assignment.expires_at <= timezone.now():
            messages.info(request, "The time for that item ran out; here is a new one.")
            return redirect("work:next", slug=slug)
        return render(request, "annotation/work/item.html", _item_context(self, held))

    def post(self, request: HttpRequest, slug: str, public_id: uuid.UUID) -> HttpResponse:
        held = self._held(public_id)
        posted = parse_judgment_post(request, study=self.study)
        try:
            judgment_submit(
                assignment_public_id=held.assignment.public_id,
                worker=self.worker,
                **posted,
            )
        except JudgmentInvalid as exc:
            # Nothing was saved: the count read with the assignment is still the worker's.
            context = _item_context(self, held, posted=posted)
            context.update(error=exc.message, error_field=exc.field)
            return render(request, "annotation/work/item.html", context, status=400)
        except (AssignmentExpired, AssignmentClosed) as exc:
            messages.warning(request, exc.message)
        except AssignmentNotFound as exc:
            raise Http404("No such item.") from exc
        return redirect("work:next", slug=slug)


class SkipView(WorkerView):
    """POST: skip the item with a reason; it goes to someone else and is not paid."""

    def post(self, request: HttpRequest, slug: str, public_id: uuid.UUID) -> HttpResponse:
        try:
            assignment_skip(
                worker=self.worker, public_id=public_id, reason=request.POST.get("skip_reason", "")
            )
        except AssignmentNotFound as exc:
            raise Http404("No such item.") from exc
        except JudgmentInvalid as exc:
            messages.warning(request, exc.message)
            return redirect("work:item", slug=slug, public_id=public_id)
        except AssignmentClosed as exc:
            messages.info(request, exc.message)
        else:
            messages.info(request, "Skipped: that item goes to someone else. Here is the next one.")
        return redirect("work:next", slug=slug)


def parse_judgment_post(request: HttpRequest, *, study: Study) -> dict[str, Any]:
    """Read the form's fields into the service's arguments; the service checks the rules."""
    data = request.POST
    try:
        submission_id = uuid.UUID(data.get("submission_id", ""))
    except ValueError:
        # A form without a valid key cannot be replayed safely; a fresh key makes it a new try.
        submission_id = uuid.uuid4()
    raw_likert = data.get("likert", "").strip()
    # Anything but a whole number reads as "no rating", which the service asks for by name.
    likert = int(raw_likert) if raw_likert.isdigit() else None
    posted: dict[str, Any] = {
        "submission_id": submission_id,
        "likert_shown": likert,
        "values": data.getlist("values"),
        "reason": data.get("reason", ""),
        "acceptability_left": data.get("acceptability_left", ""),
        "acceptability_right": data.get("acceptability_right", ""),
        "comment": data.get("comment", ""),
    }
    if study.form_axes:
        for side in ("left", "right"):
            posted[f"axes_{side}"] = {
                axis: data.get(f"axes_{side}_{axis}", "") for axis in FINE_GRAINED_AXES
            }
    return posted


class PauseView(WorkerView):
    """A break: the reserved item stays the worker's until it expires; the same link resumes."""

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        return render(
            request,
            "annotation/work/pause.html",
            {
                "study": self.study,
                "progress": worker_progress(worker=self.worker),
                "held_until": worker_held_until(worker=self.worker),
            },
        )


class StopView(WorkerView):
    """Stop for good: release the reserved item and go to the completion page."""

    needs_consent = False

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        worker_finish(worker=self.worker, out_of_work=False)
        return redirect("work:done", slug=slug)


class DoneView(WorkerView):
    """The completion page: the code only once the worker is done and has a saved judgment."""

    needs_consent = False

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        if self.worker.state not in (
            Worker.State.DONE,
            Worker.State.BLOCKED,
            Worker.State.RETURNED,
        ):
            return redirect("work:next", slug=slug)
        if self.worker.state == Worker.State.BLOCKED:
            return blocked_page(
                request, study=self.study, worker=self.worker, message=BLOCKED_MESSAGE
            )
        progress = worker_progress(worker=self.worker)
        earned = progress.done > 0 and self.worker.state == Worker.State.DONE
        code = worker_completion_code(worker=self.worker)
        panel = panel_get(self.worker.panel)
        return render(
            request,
            "annotation/work/done.html",
            {
                "study": self.study,
                "progress": progress,
                "earned": earned,
                "partial": earned and not self.worker.finished_full,
                "completion_code": code,
                "completion_url": (
                    panel.completion_url(study=self.study, code=code) if earned and panel else ""
                ),
            },
        )
