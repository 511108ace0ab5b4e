from __future__ import annotations

from django.urls import path

from annotation.views import (
    importing,
    launch,
    members,
    pairs,
    prolific,
    quality,
    setup,
    studies,
)

app_name = "annotation"

urlpatterns = [
    path("", studies.StudyListView.as_view(), name="study_list"),
    path("new/", setup.StudyCreateView.as_view(), name="study_create"),
    path("<slug:slug>/", studies.StudyDetailView.as_view(), name="study_detail"),
    path("<slug:slug>/settings/", setup.StudySettingsView.as_view(), name="study_settings"),
    path("<slug:slug>/prolific/", prolific.StudyProlificView.as_view(), name="study_prolific"),
    path(
        "<slug:slug>/prolific/test/<str:test_id>.json",
        prolific.StudyProlificTestStatusView.as_view(),
        name="study_prolific_test_status",
    ),
    path(
        "<slug:slug>/prolific/draft/",
        prolific.StudyProlificDraftView.as_view(),
        name="study_prolific_draft",
    ),
    path(
        "<slug:slug>/prolific/transition/",
        prolific.StudyProlificTransitionView.as_view(),
        name="study_prolific_transition",
    ),
    path("<slug:slug>/status/", setup.StudyStatusView.as_view(), name="study_status"),
    path("<slug:slug>/checklist/", launch.StudyChecklistView.as_view(), name="study_checklist"),
    path("<slug:slug>/launch/", launch.StudyLaunchView.as_view(), name="study_launch"),
    path("<slug:slug>/preview/", launch.StudyPreviewView.as_view(), name="study_preview"),
    path("<slug:slug>/members/", members.StudyMembersView.as_view(), name="study_members"),
    path(
        "<slug:slug>/members/<int:user_id>/remove/",
        members.StudyMemberRemoveView.as_view(),
        name="study_member_remove",
    ),
    path("<slug:slug>/pairs/", pairs.StudyPairsView.as_view(), name="study_pairs"),
    path(
        "<slug:slug>/pairs/generation/<str:generation_id>.json",
        pairs.StudyPairsGenerationStatusView.as_view(),
        name="study_pairs_generation_status",
    ),
    path("<slug:slug>/import/", importing.StudyImportView.as_view(), name="study_import"),
    path("<slug:slug>/flagged/", importing.FlaggedAnswerListView.as_view(), name="flagged_answers"),
    path(
        "<slug:slug>/flagged/<int:answer_id>/clear/",
        importing.FlaggedAnswerClearView.as_view(),
        name="flagged_answer_clear",
    ),
    path(
        "<slug:slug>/flagged/<int:answer_id>/remedy/",
        importing.FlaggedAnswerRemedyView.as_view(),
        name="flagged_answer_remedy",
    ),
    path("<slug:slug>/workers/", quality.WorkerQualityView.as_view(), name="worker_quality"),
    path(
        "<slug:slug>/workers/<int:worker_id>/action/",
        quality.WorkerActionView.as_view(),
        name="worker_action",
    ),
    path(
        "<slug:slug>/workers/<int:worker_id>/entries/",
        quality.WorkerEntriesView.as_view(),
        name="worker_entries",
    ),
    path("<slug:slug>/workers/bonus-batch/", quality.BonusBatchView.as_view(), name="bonus_batch"),
    path(
        "<slug:slug>/workers/prolific-review/",
        quality.ProlificReviewView.as_view(),
        name="prolific_review",
    ),
    path(
        "<slug:slug>/workers/prolific-reconcile/",
        quality.ProlificReconcileView.as_view(),
        name="prolific_reconcile",
    ),
    path(
        "<slug:slug>/workers/bonus-batch/<int:batch_id>/settle/",
        quality.BonusBatchSettleView.as_view(),
        name="bonus_batch_settle",
    ),
    path("<slug:slug>/workers/gold-bonus/", quality.GoldBonusView.as_view(), name="gold_bonus"),
    path("<slug:slug>/payouts.csv", quality.PayoutsCsvView.as_view(), name="payouts_csv"),
]
