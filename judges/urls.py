"""Judge run pages, mounted under studies/<slug>/judges/."""

from __future__ import annotations

from django.urls import path

from judges.views import judges, pl, references, runs

app_name = "judges"

urlpatterns = [
    path("", runs.RunListView.as_view(), name="run_list"),
    path("new/", judges.JudgeCreateView.as_view(), name="judge_create"),
    path("panels/new/", judges.PanelCreateView.as_view(), name="panel_create"),
    path("<int:judge_id>/", judges.JudgeDetailView.as_view(), name="judge_detail"),
    path("<int:judge_id>/test/", judges.JudgeTestView.as_view(), name="judge_test"),
    path(
        "<int:judge_id>/test/<str:test_id>.json",
        judges.JudgeTestStatusView.as_view(),
        name="judge_test_status",
    ),
    path(
        "<int:judge_id>/templates/",
        judges.JudgeTemplateView.as_view(),
        name="judge_templates",
    ),
    path("<int:judge_id>/key/", judges.JudgeKeyView.as_view(), name="judge_key"),
    path(
        "references/",
        references.StudyReferencesView.as_view(),
        name="study_references",
    ),
    path(
        "references/<str:job_id>.json",
        references.StudyReferencesStatusView.as_view(),
        name="study_references_status",
    ),
    path("runs/<int:run_id>/", runs.RunDetailView.as_view(), name="run_detail"),
    path("runs/<int:run_id>/progress.json", runs.RunProgressView.as_view(), name="run_progress"),
    path("runs/<int:run_id>/cancel/", runs.RunCancelView.as_view(), name="run_cancel"),
    path("runs/<int:run_id>/resume/", runs.RunResumeView.as_view(), name="run_resume"),
    path(
        "runs/<int:run_id>/calls/<int:call_id>/",
        runs.CallDetailView.as_view(),
        name="call_detail",
    ),
    path("pl/", pl.PLTrainingListView.as_view(), name="pl_training_list"),
    path(
        "pl/<int:training_id>/",
        pl.PLTrainingDetailView.as_view(),
        name="pl_training_detail",
    ),
    path(
        "pl/<int:training_id>/status.json",
        pl.PLTrainingStatusView.as_view(),
        name="pl_training_status",
    ),
    path(
        "pl/<int:training_id>/curve.svg",
        pl.PLTrainingCurveView.as_view(),
        name="pl_training_curve",
    ),
    path(
        "pl/<int:training_id>/cancel/",
        pl.PLTrainingCancelView.as_view(),
        name="pl_training_cancel",
    ),
    path(
        "pl/<int:training_id>/retry/",
        pl.PLTrainingRetryView.as_view(),
        name="pl_training_retry",
    ),
]
