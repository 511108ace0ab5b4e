from __future__ import annotations

from django.urls import path

from annotation.views import pairs, studies

app_name = "annotation"

urlpatterns = [
    path("", studies.StudyListView.as_view(), name="study_list"),
    path("<slug:slug>/", studies.StudyDetailView.as_view(), name="study_detail"),
    path("<slug:slug>/pairs/", pairs.StudyPairsView.as_view(), name="study_pairs"),
]
