from __future__ import annotations

from django.urls import path

from core.lazyviews import lazy_view

app_name = "leaderboard"

urlpatterns = [
    path(
        "<slug:slug>/analysis/contrast/",
        lazy_view("leaderboard.views_contrast.StudyContrastView"),
        name="study_contrast",
    ),
    path(
        "<slug:slug>/analysis/contrast/build/<str:build_id>.json",
        lazy_view("leaderboard.views_contrast.StudyContrastStatusView"),
        name="study_contrast_status",
    ),
    path(
        "<slug:slug>/analysis/",
        lazy_view("leaderboard.views.StudyAnalysisView"),
        name="study_analysis",
    ),
    path(
        "<slug:slug>/analysis/settings/",
        lazy_view("leaderboard.views.StudyReportSettingsView"),
        name="study_report_settings",
    ),
    path(
        "<slug:slug>/analysis/report.json",
        lazy_view("leaderboard.views.StudyAnalysisReportView"),
        name="study_analysis_report",
    ),
    path(
        "<slug:slug>/analysis/report.html",
        lazy_view("leaderboard.views.StudyAnalysisReportHtmlView"),
        name="study_analysis_report_html",
    ),
    path(
        "<slug:slug>/analysis/tables/<slug:name>.csv",
        lazy_view("leaderboard.views.StudyAnalysisTableView"),
        name="study_analysis_table",
    ),
    path(
        "<slug:slug>/analysis/plots/<slug:name>.svg",
        lazy_view("leaderboard.views.StudyAnalysisPlotView"),
        name="study_analysis_plot",
    ),
    path(
        "<slug:slug>/analysis/planner/",
        lazy_view("leaderboard.views.StudyLabelPlanView"),
        name="study_label_plan",
    ),
    path(
        "<slug:slug>/analysis/units/",
        lazy_view("leaderboard.views.StudyUnitListView"),
        name="study_units",
    ),
    path(
        "<slug:slug>/analysis/followup/",
        lazy_view("leaderboard.views_followup.StudyFollowupCreateView"),
        name="study_followup_create",
    ),
    path(
        "<slug:slug>/analysis/followup/count/",
        lazy_view("leaderboard.views_followup.StudyFollowupPreviewView"),
        name="study_followup_preview",
    ),
    path(
        "<slug:slug>/analysis/units/<int:pair_id>/",
        lazy_view("leaderboard.views.StudyUnitDetailView"),
        name="study_unit",
    ),
    path(
        "<slug:slug>/analysis/exports/jobs/",
        lazy_view("leaderboard.views.StudyExportJobListView"),
        name="study_export_jobs",
    ),
    path(
        "<slug:slug>/analysis/exports/jobs/<uuid:public_id>/download",
        lazy_view("leaderboard.views.ExportJobDownloadView"),
        name="export_job_download",
    ),
    path(
        "<slug:slug>/analysis/exports/<slug:table>.<slug:fmt>",
        lazy_view("leaderboard.views.StudyExportView"),
        name="study_export",
    ),
]
