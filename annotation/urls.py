from __future__ import annotations

from django.urls import path

from annotation.views import studies

app_name = "annotation"

urlpatterns = [
    path("", studies.StudyListView.as_view(), name="study_list"),
    path("<slug:slug>/", studies.StudyDetailView.as_view(), name="study_detail"),
]
