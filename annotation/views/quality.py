"""Researchers' pages about workers: quality, block and unblock, returns, pay and payouts."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views import View

from annotation.access import ResearcherRequiredMixin, get_study_or_404
from annotation.models import ProlificBonusBatch, Worker
from annotation.prolific import REJECTION_CATEGORIES, RETURN_REASONS, ProlificError
from annotation.selectors.bonus import study_bonus_lines, study_reward_cents
from annotation.selectors.quality import (
    study_pay_summary,
    study_payout_rows,
    study_worker_quality,
    worker_entry_log,
)
from annotation.services.errors import AnnotationError
from annotation.services.pay import pay_entries_review, pay_gold_bonuses_grant
from annotation.services.prolific_bonus import (
    bonus_batch_create,
    bonus_batch_queue,
    bonus_batch_settle,
)
from annotation.services.prolific_review import (
    ReviewOutcome,
    submissions_approve,
    submissions_reconcile,
    submissions_reject,
    submissions_return_request,
)
from annotation.services.workers import worker_block_set, worker_exclude, worker_return
from core import csvsafe


class WorkerQualityView(ResearcherRequiredMixin, View):
    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        return render(
            request,
            "annotation/worker_quality.html",
            {
                "study": study,
                "rows": study_worker_quality(study=study),
                "pay": study_pay_summary(study=study),
                "bonus_lines": study_bonus_lines(study=study),
                "reward_cents": study_reward_cents(study=study),
                "bonus_batches": ProlificBonusBatch.objects.filter(study=study)[:20],
                "rejection_categories": REJECTION_CATEGORIES.items(),
                "return_reasons": RETURN_REASONS,
            },
        )


class WorkerActionView(ResearcherRequiredMixin, View):
    """POST one action on one worker of the study: block, unblock, return, approve, reject."""

    def post(self, request: HttpRequest, slug: str, worker_id: int) -> HttpResponse:
        study = get_study_or_404(request, slug)
        worker = Worker.objects.select_related("study").filter(study=study, pk=worker_id).first()
        if worker is None:
            raise Http404("No such worker in this study.")
        action = request.POST.get("action", "")
        reason = request.POST.get("reason", "").strip()
        label = f"{worker.panel}:{worker.external_id}"
        try:
            if action in ("block", "unblock"):
                worker_block_set(
                    worker=worker,
                    blocked=action == "block",
                    reason=reason or f"{action.capitalize()}ed by {request.user}.",
                )
                messages.success(request, f"{label}: {action}ed.")
            elif action == "return":
                worker_return(worker=worker, reason=reason or "Returned on the panel.")
                messages.success(request, f"{label}: marked returned, reservations released.")
            elif action == "exclude":
                judgments = worker_exclude(worker=worker, reason=reason)
                messages.success(
                    request,
                    f"{label}: excluded from analysis and pay ({judgments} judgments).",
                )
            elif action in ("approve", "reject"):
                changed = pay_entries_review(
                    worker=worker, approve=action == "approve", reason=reason
                )
                messages.success(
                    request,
                    f"{label}: {changed} pending pay entries {action}d in Concord (Prolific's "
                    "submission is not changed).",
                )
            else:
                messages.error(request, f"Unknown action {action!r}.")
        except AnnotationError as exc:
            messages.error(request, f"{label}: {exc.message}")
        return redirect("annotation:worker_quality", slug=study.slug)


class WorkerEntriesView(ResearcherRequiredMixin, View):
    """GET one participant's entry log: every attempt with their id, let in or refused."""

    def get(self, request: HttpRequest, slug: str, worker_id: int) -> HttpResponse:
        study = get_study_or_404(request, slug)
        worker = Worker.objects.filter(study=study, pk=worker_id).first()
        if worker is None:
            raise Http404("No such worker in this study.")
        return render(
            request,
            "annotation/worker_entries.html",
            {"study": study, "worker": worker, "entries": worker_entry_log(worker=worker)},
        )


class GoldBonusView(ResearcherRequiredMixin, View):
    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        try:
            min_accuracy = Decimal(request.POST.get("min_accuracy", ""))
            amount_cents = int(request.POST.get("amount_cents", ""))
        except (InvalidOperation, ValueError):
            messages.error(
                request, "Give the minimum accuracy (0 to 1) and the bonus in whole cents."
            )
            return redirect("annotation:worker_quality", slug=study.slug)
        try:
            granted = pay_gold_bonuses_grant(
                study=study, min_accuracy=min_accuracy, amount_cents=amount_cents
            )
        except AnnotationError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, f"{granted} gold bonuses granted (pending approval).")
        return redirect("annotation:worker_quality", slug=study.slug)


class PayoutsCsvView(ResearcherRequiredMixin, View):
    """GET the ledger as CSV; `?format=prolific` gives Prolific's bonus format."""

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        prolific = request.GET.get("format") == "prolific"
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        name = f"{study.slug}-{'prolific-bonus' if prolific else 'ledger'}.csv"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        writer = csvsafe.writer(response)
        if not prolific:
            # Prolific's bulk bonus box takes bare "participant_id,amount" lines, no header.
            writer.writerow(
                ["panel", "participant_id", "kind", "amount_cents", "status", "reason", "created"]
            )
        writer.writerows(study_payout_rows(study=study, prolific=prolific))
        return response


class BonusBatchView(ResearcherRequiredMixin, View):
    """POST: send every bonus due to Prolific as one batch (set up, then paid once)."""

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        try:
            batch = bonus_batch_create(study=study, user=request.user)
        except AnnotationError as exc:
            messages.error(request, exc.message)
        else:
            bonus_batch_queue(batch=batch)
            messages.success(
                request,
                f"Bonus batch of {batch.total_cents / 100:.2f} queued: it is set up on Prolific, "
                "then paid once.",
            )
        return redirect("annotation:worker_quality", slug=study.slug)


class BonusBatchSettleView(ResearcherRequiredMixin, View):
    """POST: after checking Prolific, mark a possibly paid batch paid or not paid."""

    def post(self, request: HttpRequest, slug: str, batch_id: int) -> HttpResponse:
        study = get_study_or_404(request, slug)
        batch = ProlificBonusBatch.objects.filter(study=study, pk=batch_id).first()
        if batch is None:
            raise Http404("No such bonus batch.")
        bonus_batch_settle(batch=batch, paid=request.POST.get("paid") == "yes")
        return redirect("annotation:worker_quality", slug=study.slug)


def _worker_ids(request: HttpRequest) -> list[int]:
    return [int(v) for v in request.POST.getlist("worker") if v.isdigit()]


def _report(request: HttpRequest, outcome: ReviewOutcome, done: str, entries: str) -> None:
    if outcome.done:
        messages.success(
            request,
            f"{len(outcome.done)} {done}: {', '.join(outcome.done)}"
            + (f" ({outcome.entries} pending pay entries {entries} here)." if entries else "."),
        )
    for label, why in outcome.failed:
        messages.error(request, f"{label}: not changed. {why}")


class ProlificReviewView(ResearcherRequiredMixin, View):
    """POST: approve, reject or ask to return the ticked participants' submissions on Prolific."""

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        action = request.POST.get("action", "")
        ids = _worker_ids(request)
        try:
            if action == "approve":
                outcome = submissions_approve(study=study, worker_ids=ids, user=request.user)
                _report(request, outcome, "approved on Prolific", "approved")
            elif action == "reject":
                outcome = submissions_reject(
                    study=study,
                    worker_ids=ids,
                    category=request.POST.get("rejection_category", ""),
                    message=request.POST.get("message", ""),
                    user=request.user,
                )
                _report(request, outcome, "rejected on Prolific", "rejected")
            elif action == "return":
                reasons = request.POST.getlist("return_reason")
                reasons.append(request.POST.get("return_other", ""))
                outcome = submissions_return_request(study=study, worker_ids=ids, reasons=reasons)
                _report(request, outcome, "asked by Prolific to return their submission", "")
            else:
                messages.error(request, f"Unknown action {action!r}.")
        except (AnnotationError, ProlificError) as exc:
            messages.error(request, exc.message)
        return redirect("annotation:worker_quality", slug=study.slug)


class ProlificReconcileView(ResearcherRequiredMixin, View):
    """POST: read every submission's status from Prolific now and bring Concord in line."""

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        try:
            done = submissions_reconcile(study=study)
        except (AnnotationError, ProlificError) as exc:
            messages.error(request, f"Prolific's statuses were not read: {exc.message}")
        else:
            messages.success(
                request,
                f"Read {done.read} submissions from Prolific: {done.changed} changed status, "
                f"{done.returned} returned here, {done.approved_entries} pending entries "
                f"approved and {done.rejected_entries} rejected as on Prolific"
                + (f"; {done.not_here} never entered Concord" if done.not_here else "")
                + ".",
            )
        return redirect("annotation:worker_quality", slug=study.slug)
