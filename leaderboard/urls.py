from __future__ import annotations

from django.urls import path

from leaderboard import views, views_followup

app_name = "leaderboard"

urlpatterns = [
    path("<slug:slug>/analysis/", views.StudyAnalysisView.as_view(), name="study_analysis"),
    path(
        "<slug:slug>/analysis/report.json",
        views.StudyAnalysisReportView.as_view(),
        name="study_analysis_report",
    ),
    path(
        "<slug:slug>/analysis/tables/<slug:name>.csv",
        views.StudyAnalysisTableView.as_view(),
        name="study_analysis_table",
    ),
    path(
        "<slug:slug>/analysis/plots/<slug:name>.svg",
        views.StudyAnalysisPlotView.as_view(),
        name="study_analysis_plot",
    ),
    path("<slug:slug>/analysis/units/", views.StudyUnitListView.as_view(), name="study_units"),
    path(
        "<slug:slug>/analysis/followup/",
        views_followup.StudyFollowupCreateView.as_view(),
        name="study_followup_create",
    ),
    path(
        "<slug:slug>/analysis/units/<int:pair_id>/",
        views.StudyUnitDetailView.as_view(),
        name="study_unit",
    ),
    path(
        "<slug:slug>/analysis/exports/jobs/",
        views.StudyExportJobListView.as_view(),
        name="study_export_jobs",
    ),
    path(
        "<slug:slug>/analysis/exports/jobs/<uuid:public_id>/download",
        views.ExportJobDownloadView.as_view(),
        name="export_job_download",
    ),
    path(
        "<slug:slug>/analysis/exports/<slug:table>.<slug:fmt>",
        views.StudyExportView.as_view(),
        name="study_export",
    ),
]
