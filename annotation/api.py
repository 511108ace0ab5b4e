"""The annotator's flow as a JSON API (DRF), for custom front ends: same services, same rules.

One small class per operation with its own input and output serializers. Workers enter through
the same panel links as the pages (which bind the browser session); these endpoints then act for
the worker bound to that session.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import Study, Worker
from annotation.panels import panel_get
from annotation.selectors.work import (
    Progress,
    WorkItem,
    work_item_build,
    worker_get_in_study,
    worker_progress,
)
from annotation.services.assignments import assignment_claim
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


class ProgressSerializer(serializers.Serializer[Progress]):
    done = serializers.IntegerField()
    target = serializers.IntegerField()


class TurnSerializer(serializers.Serializer[Any]):
    number = serializers.IntegerField()
    html = serializers.CharField()


class ItemSerializer(serializers.Serializer[WorkItem]):
    id = serializers.UUIDField(source="public_id")
    prompt = TurnSerializer(source="prompt_turns", many=True)
    left = TurnSerializer(source="left_turns", many=True)
    right = TurnSerializer(source="right_turns", many=True)
    winner_side = serializers.CharField()
    expires_at = serializers.DateTimeField()


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
        except (WorkerBlocked, StudyNotOpen) as exc:
            return error_response(exc)
        # The claim counted the worker's judgments under its lock: no count of our own.
        progress = Progress(done=claimed.done, target=claimed.target)
        body: dict[str, Any] = {"progress": ProgressSerializer(progress).data}
        assignment = claimed.assignment
        if assignment is not None:
            body.update(
                status="item",
                item=ItemSerializer(work_item_build(assignment=assignment)).data,
                forms=forms_of(self.study),
            )
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


class SubmitApi(WorkerApi):
    """POST: submit the forms for one of the worker's items (idempotent on submission_id)."""

    def post(self, request: Request, slug: str, public_id: Any) -> Response:
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
                "progress": ProgressSerializer(
                    Progress(done=submitted.done, target=self.study.target_per_worker)
                ).data,
            },
            status=status.HTTP_201_CREATED,
        )


class ProgressApi(WorkerApi):
    """GET: judgments done and the target."""

    def get(self, request: Request, slug: str) -> Response:
        return Response(ProgressSerializer(worker_progress(worker=self.worker)).data)
