"""URLs of the annotator's flow (pages and JSON API), mounted at /work/."""

from __future__ import annotations

from django.urls import path

from annotation import api
from annotation.views import work

app_name = "work"

urlpatterns = [
    path("<slug:slug>/enter/<slug:panel>/", work.EntryView.as_view(), name="enter"),
    path("<slug:slug>/consent/", work.ConsentView.as_view(), name="consent"),
    path("<slug:slug>/", work.NextView.as_view(), name="next"),
    path("<slug:slug>/item/<uuid:public_id>/", work.ItemView.as_view(), name="item"),
    path("<slug:slug>/item/<uuid:public_id>/skip/", work.SkipView.as_view(), name="skip"),
    path("<slug:slug>/pause/", work.PauseView.as_view(), name="pause"),
    path("<slug:slug>/stop/", work.StopView.as_view(), name="stop"),
    path("<slug:slug>/done/", work.DoneView.as_view(), name="done"),
    path("<slug:slug>/api/next/", api.NextApi.as_view(), name="api_next"),
    path(
        "<slug:slug>/api/items/<uuid:public_id>/submit/",
        api.SubmitApi.as_view(),
        name="api_submit",
    ),
    path(
        "<slug:slug>/api/items/<uuid:public_id>/skip/",
        api.SkipApi.as_view(),
        name="api_skip",
    ),
    path("<slug:slug>/api/progress/", api.ProgressApi.as_view(), name="api_progress"),
]
