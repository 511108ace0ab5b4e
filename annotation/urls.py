from __future__ import annotations

from django.urls import path

from annotation.views import quality, studies

app_name = "annotation"

urlpatterns = [
    path("", studies.StudyListView.as_view(), name="study_list"),
    path("<slug:slug>/", studies.StudyDetailView.as_view(), name="study_detail"),
    path("<slug:slug>/workers/", quality.WorkerQualityView.as_view(), name="worker_quality"),
    path(
        "<slug:slug>/workers/<int:worker_id>/action/",
        quality.WorkerActionView.as_view(),
        name="worker_action",
    ),
    path("<slug:slug>/workers/gold-bonus/", quality.GoldBonusView.as_view(), name="gold_bonus"),
    path("<slug:slug>/payouts.csv", quality.PayoutsCsvView.as_view(), name="payouts_csv"),
]
