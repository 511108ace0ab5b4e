"""Top-level URLs."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from annotation.views.studies import HomeView
from core.csp import csp_report

urlpatterns = [
    path("", HomeView.as_view(), name="home"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("csp-report/", csp_report, name="csp_report"),
    path("api/v1/", include("leaderboard.api_urls")),
    path("studies/", include("leaderboard.urls")),
    path("studies/", include("annotation.urls")),
    path("studies/<slug:slug>/judges/", include("judges.urls")),
    path("work/", include("annotation.work_urls")),
]
