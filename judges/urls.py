"""Judge run pages, mounted under studies/<slug>/judges/."""

from __future__ import annotations

from django.urls import path

from judges import views

app_name = "judges"

urlpatterns = [
    path("", views.RunListView.as_view(), name="run_list"),
    path("runs/<int:run_id>/", views.RunDetailView.as_view(), name="run_detail"),
    path("runs/<int:run_id>/progress.json", views.RunProgressView.as_view(), name="run_progress"),
    path("runs/<int:run_id>/cancel/", views.RunCancelView.as_view(), name="run_cancel"),
    path("runs/<int:run_id>/resume/", views.RunResumeView.as_view(), name="run_resume"),
    path(
        "runs/<int:run_id>/calls/<int:call_id>/",
        views.CallDetailView.as_view(),
        name="call_detail",
    ),
]
