"""Judge run pages, mounted under studies/<slug>/judges/."""

from __future__ import annotations

from django.urls import path

from judges import views, views_judges, views_pl, views_references

app_name = "judges"

urlpatterns = [
    path("", views.RunListView.as_view(), name="run_list"),
    path("new/", views_judges.JudgeCreateView.as_view(), name="judge_create"),
    path("panels/new/", views_judges.PanelCreateView.as_view(), name="panel_create"),
    path("<int:judge_id>/", views_judges.JudgeDetailView.as_view(), name="judge_detail"),
    path("<int:judge_id>/test/", views_judges.JudgeTestView.as_view(), name="judge_test"),
    path(
        "<int:judge_id>/test/<str:test_id>.json",
        views_judges.JudgeTestStatusView.as_view(),
        name="judge_test_status",
    ),
    path(
        "<int:judge_id>/templates/",
        views_judges.JudgeTemplateView.as_view(),
        name="judge_templates",
    ),
    path("<int:judge_id>/key/", views_judges.JudgeKeyView.as_view(), name="judge_key"),
    path(
        "references/",
        views_references.StudyReferencesView.as_view(),
        name="study_references",
    ),
    path(
        "references/<str:job_id>.json",
        views_references.StudyReferencesStatusView.as_view(),
        name="study_references_status",
    ),
    path("runs/<int:run_id>/", views.RunDetailView.as_view(), name="run_detail"),
    path("runs/<int:run_id>/progress.json", views.RunProgressView.as_view(), name="run_progress"),
    path("runs/<int:run_id>/cancel/", views.RunCancelView.as_view(), name="run_cancel"),
    path("runs/<int:run_id>/resume/", views.RunResumeView.as_view(), name="run_resume"),
    path(
        "runs/<int:run_id>/calls/<int:call_id>/",
        views.CallDetailView.as_view(),
        name="call_detail",
    ),
    path("pl/", views_pl.PLTrainingListView.as_view(), name="pl_training_list"),
    path(
        "pl/<int:training_id>/",
        views_pl.PLTrainingDetailView.as_view(),
        name="pl_training_detail",
    ),
    path(
        "pl/<int:training_id>/status.json",
        views_pl.PLTrainingStatusView.as_view(),
        name="pl_training_status",
    ),
    path(
        "pl/<int:training_id>/curve.svg",
        views_pl.PLTrainingCurveView.as_view(),
        name="pl_training_curve",
    ),
    path(
        "pl/<int:training_id>/cancel/",
        views_pl.PLTrainingCancelView.as_view(),
        name="pl_training_cancel",
    ),
    path(
        "pl/<int:training_id>/retry/",
        views_pl.PLTrainingRetryView.as_view(),
        name="pl_training_retry",
    ),
]
