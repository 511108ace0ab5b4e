"""The annotator's flow as a JSON API (DRF), for custom front ends: same services, same rules.

One small class per operation with its own input and output serializers. Workers enter through
the same panel links as the pages (which bind the browser session); these endpoints then act for
the worker bound to that session.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import Study, Worker
from annotation.panels import panel_get
from annotation.selectors.work import (
    Progress,
    Turn,
    WorkItem,
    work_item_build,
    worker_get_in_study,
    worker_pairs_held_elsewhere,
    worker_progress,
)
from annotation.services.assignments import assignment_claim, assignment_skip
from annotation.services.entry import worker_seen
from annotation.services.errors import (
    AnnotationError,
    AssignmentClosed,
    AssignmentExpired,
    AssignmentNotFound,
    JudgmentInvalid,
    StudyNotOpen,
    WorkerBlocked,
)
from annotation.services.judgments import judgment_submit
from annotation.services.workers import worker_completion_code, worker_finish
from annotation.views.work import secure_worker_response

ERROR_STATUS: dict[type[AnnotationError], int] = {
    JudgmentInvalid: status.HTTP_400_BAD_REQUEST,
    WorkerBlocked: status.HTTP_403_FORBIDDEN,
    AssignmentNotFound: status.HTTP_404_NOT_FOUND,
    AssignmentExpired: status.HTTP_409_CONFLICT,
    AssignmentClosed: status.HTTP_409_CONFLICT,
    StudyNotOpen: status.HTTP_409_CONFLICT,
}


def error_response(exc: AnnotationError) -> Response:
    body: dict[str, Any] = {"error": exc.code, "message": exc.message}
    if isinstance(exc, JudgmentInvalid):
        body["field"] = exc.field
    return Response(body, status=ERROR_STATUS.get(type(exc), status.HTTP_400_BAD_REQUEST))


class WorkerApi(APIView):
    """Resolve the worker bound to this session in the study named by the URL."""

    study: Study
    worker: Worker

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        # The worker and the study in one query: either missing is the same 404.
        worker = worker_get_in_study(slug=kwargs["slug"], user_id=request.user.pk)
        if worker is None:
            raise NotFound("No such study.")
        study = worker.study
        if not worker.session_key or worker.session_key != request.session.session_key:
            raise PermissionDenied("This study is open in another session.")
        if worker.consented_at is None:
            raise PermissionDenied("Read the instructions and agree before you start.")
        worker_seen(worker=worker)
        self.study, self.worker = study, worker

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        secure_worker_response(response)
        return response


# The bodies of next, submit and progress are built as plain dicts: DRF's serializers cost more
# Python time than the database took on these requests (profiled), for a fixed, flat shape.
_DATETIME = serializers.DateTimeField()  # DRF's rendering of a datetime, as the API always gave


def progress_body(progress: Progress) -> dict[str, int]:
    return {"done": progress.done, "target": progress.target}


def turns_body(turns: tuple[Turn, ...]) -> list[dict[str, Any]]:
    return [{"number": turn.number, "html": turn.html} for turn in turns]


def item_body(item: WorkItem) -> dict[str, Any]:
    """What a worker sees of an item: its opaque id, the texts by side, nothing else."""
    return {
        "id": str(item.public_id),
        "prompt": turns_body(item.prompt_turns),
        "left": turns_body(item.left_turns),
        "right": turns_body(item.right_turns),
        "winner_side": item.winner_side,
        "expires_at": _DATETIME.to_representation(item.expires_at),
    }


def forms_of(study: Study) -> dict[str, bool]:
    return {
        "likert": study.form_likert and not study.form_rationale_only,
        "values": study.form_values or study.form_rationale_only,
        # True: a preference needs at least one of the seven values; False: they are optional.
        "values_required": study.values_required,
        "rationale_only": study.form_rationale_only,
        "acceptability": study.form_acceptability,
        "axes": study.form_axes,
        "comment": study.form_comment,
    }


class NextApi(WorkerApi):
    """POST: reserve the next item (or get back the one held)."""

    def post(self, request: Request, slug: str) -> Response:
        try:
            claimed = assignment_claim(worker=self.worker)
        except WorkerBlocked as exc:
            response = error_response(exc)
            code = self.study.screened_out_code
            panel = panel_get(self.worker.panel)
            response.data["completion"] = {
                "code": code,
                "screened_out": True,
                "url": panel.completion_url(study=self.study, code=code) if panel else "",
            }
            return response
        except StudyNotOpen as exc:
            return error_response(exc)
        # The claim counted the worker's judgments under its lock: no count of our own.
        progress = Progress(done=claimed.done, target=claimed.target)
        body: dict[str, Any] = {"progress": progress_body(progress)}
        assignment = claimed.assignment
        if assignment is not None:
            body.update(
                status="item",
                # The study read with the worker: the item's read needs no study of its own.
                item=item_body(work_item_build(assignment=assignment, study=self.study)),
                forms=forms_of(self.study),
            )
            return Response(body)
        if progress.done < progress.target:
            held = worker_pairs_held_elsewhere(worker=self.worker)
            if held.pairs:
                # Items are left but other workers hold them: ask again later, no code yet.
                frees_at = held.frees_at and _DATETIME.to_representation(held.frees_at)
                body.update(status="wait", item=None, frees_at=frees_at)
                return Response(body)
        if progress.done == 0:
            body.update(status="no_work", item=None)
            return Response(body)
        worker_finish(worker=self.worker, out_of_work=True)
        code = worker_completion_code(worker=self.worker)
        panel = panel_get(self.worker.panel)
        body.update(
            status="done",
            item=None,
            completion={
                "code": code,
                "full": self.worker.finished_full,
                "url": panel.completion_url(study=self.study, code=code) if panel else "",
            },
        )
        return Response(body)


class SubmitInputSerializer(serializers.Serializer[Any]):
    submission_id = serializers.UUIDField()
    likert = serializers.IntegerField(required=False, allow_null=True, default=None)
    values = serializers.ListField(child=serializers.CharField(), required=False, default=list)
    reason = serializers.CharField(required=False, allow_blank=True, default="")
    acceptability_left = serializers.CharField(required=False, allow_blank=True, default="")
    acceptability_right = serializers.CharField(required=False, allow_blank=True, default="")
    axes_left = serializers.DictField(child=serializers.CharField(), required=False, default=None)
    axes_right = serializers.DictField(child=serializers.CharField(), required=False, default=None)
    comment = serializers.CharField(required=False, allow_blank=True, default="")


_TEXT_FIELDS = ("reason", "acceptability_left", "acceptability_right", "comment")


def _plain_text(value: Any, *, blank: bool = True) -> bool:
    return type(value) is str and "\x00" not in value and (blank or bool(value.strip()))


def submit_input_plain(data: Any) -> dict[str, Any] | None:
    """The submit's input as SubmitInputSerializer validates it, read directly when every field
    given has its plain JSON type; None otherwise (anything else, including every invalid input,
    goes through the serializer, which gives DRF's error body).

    Text is stripped as DRF's CharField strips it; a blank value or axis level, a NUL character,
    a number given as text and the like are left to the serializer to refuse or convert.
    """
    if type(data) is not dict:
        return None
    raw_id = data.get("submission_id")
    if type(raw_id) is not str:
        return None
    try:
        submission_id = UUID(raw_id)
    except ValueError:
        return None
    likert = data.get("likert")
    if likert is not None and type(likert) is not int:
        return None
    values = data.get("values", [])
    if type(values) is not list or not all(_plain_text(v, blank=False) for v in values):
        return None
    out: dict[str, Any] = {
        "submission_id": submission_id,
        "likert": likert,
        "values": [v.strip() for v in values],
    }
    for name in _TEXT_FIELDS:
        text = data.get(name, "")
        if not _plain_text(text):
            return None
        out[name] = text.strip()
    for name in ("axes_left", "axes_right"):
        axes = data.get(name)
        if axes is None:
            if name in data:
                return None  # DictField refuses an explicit null
            out[name] = None
            continue
        if type(axes) is not dict or not all(_plain_text(v, blank=False) for v in axes.values()):
            return None
        out[name] = {str(k): v.strip() for k, v in axes.items()}
    return out


class SubmitApi(WorkerApi):
    """POST: submit the forms for one of the worker's items (idempotent on submission_id)."""

    def post(self, request: Request, slug: str, public_id: Any) -> Response:
        data = submit_input_plain(request.data)
        if data is None:
            serializer = SubmitInputSerializer(data=request.data)
            serializer.is_valid(raise_exception=True)
            data = dict(serializer.validated_data)
        try:
            submitted = judgment_submit(
                assignment_public_id=public_id,
                worker=self.worker,
                submission_id=data["submission_id"],
                likert_shown=data["likert"],
                values=data["values"],
                reason=data["reason"],
                acceptability_left=data["acceptability_left"],
                acceptability_right=data["acceptability_right"],
                axes_left=data["axes_left"],
                axes_right=data["axes_right"],
                comment=data["comment"],
            )
        except AnnotationError as exc:
            return error_response(exc)
        return Response(
            {
                "saved": True,
                "submission_id": str(submitted.judgment.submission_id),
                "progress": progress_body(
                    Progress(done=submitted.done, target=self.study.target_per_worker)
                ),
            },
            status=status.HTTP_201_CREATED,
        )


class SkipApi(WorkerApi):
    """POST {"skip_reason": ...}: skip one of the worker's items; it goes to someone else and is
    not paid (a second skip of the same item answers as the first)."""

    def post(self, request: Request, slug: str, public_id: Any) -> Response:
        reason = request.data.get("skip_reason", "") if hasattr(request.data, "get") else ""
        try:
            assignment = assignment_skip(
                worker=self.worker, public_id=public_id, reason=str(reason)
            )
        except AnnotationError as exc:
            return error_response(exc)
        return Response({"skipped": True, "skip_reason": assignment.skip_reason})


class ProgressApi(WorkerApi):
    """GET: judgments done and the target."""

    def get(self, request: Request, slug: str) -> Response:
        return Response(progress_body(worker_progress(worker=self.worker)))
