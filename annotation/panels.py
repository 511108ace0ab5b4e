"""Where workers come from and where they go back to: one small class per panel.

A panel reads the participant out of the entry URL and says where a finished worker is sent.
Adding a panel that passes a participant id and expects a completion redirect is one subclass
here plus its key in `Worker.Panel`.
"""

from __future__ import annotations

import re
import secrets
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar
from urllib.parse import urlencode

from django.conf import settings
from django.core import signing

from annotation.models import Study, Worker
from annotation.services.errors import EntryRefused

_PANEL_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
INVITE_SALT = "concord.annotation.invite"


@dataclass(frozen=True)
class Participant:
    """Who arrived: their id on the panel and, where the panel has one, its session id."""

    external_id: str
    panel_session_id: str = ""


class Panel(ABC):
    """Base class: parse the entry parameters, and build the completion redirect."""

    key: ClassVar[str]
    # An invite is single-use: once bound to a browser session it never moves to another one.
    single_use: ClassVar[bool] = False

    @abstractmethod
    def participant(self, *, study: Study, params: Mapping[str, str]) -> Participant:
        """Return the participant named by the entry URL, or raise EntryRefused."""

    def completion_url(self, *, study: Study, code: str) -> str:
        """Where to send a worker who finished with `code`; empty to show the code on the page."""
        return study.completion_url


class ProlificPanel(Panel):
    """Prolific appends PROLIFIC_PID, STUDY_ID and SESSION_ID to the study URL.

    STUDY_ID must be the study's configured Prolific study id: a link made up for another (or
    no) Prolific study is refused before anything of the study is shown.
    """

    key = Worker.Panel.PROLIFIC

    def participant(self, *, study: Study, params: Mapping[str, str]) -> Participant:
        values = {}
        for name in ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID"):
            value = params.get(name, "")
            if not _PANEL_ID.match(value):
                raise EntryRefused(
                    f"The link is missing a valid {name}. Please open the study again from "
                    "Prolific."
                )
            values[name] = value
        if not study.prolific_study_id:
            raise EntryRefused("This study is not open to Prolific participants.")
        if values["STUDY_ID"] != study.prolific_study_id:
            raise EntryRefused(
                "This link is not for this study. Please open the study again from Prolific."
            )
        return Participant(
            external_id=values["PROLIFIC_PID"], panel_session_id=values["SESSION_ID"]
        )

    def completion_url(self, *, study: Study, code: str) -> str:
        if study.completion_url and code == study.completion_code:
            return study.completion_url
        if not code:
            return ""
        return "https://app.prolific.com/submissions/complete?" + urlencode({"cc": code})


class InvitePanel(Panel):
    """A signed, single-use invite link made by a researcher: `?token=...`.

    The token carries its creation time; it expires after the study's `invite_valid_days`.
    """

    key = Worker.Panel.INVITE
    single_use = True

    def participant(self, *, study: Study, params: Mapping[str, str]) -> Participant:
        try:
            payload = signing.loads(
                params.get("token", ""),
                salt=INVITE_SALT,
                max_age=timedelta(days=study.invite_valid_days),
            )
        except signing.SignatureExpired as exc:
            raise EntryRefused("This invite link has expired. Please ask for a new one.") from exc
        except signing.BadSignature as exc:
            raise EntryRefused("This invite link is not valid. Please ask for a new one.") from exc
        if not isinstance(payload, dict) or payload.get("study") != study.pk:
            raise EntryRefused("This invite link is for another study.")
        nonce = payload.get("invite")
        if not isinstance(nonce, str) or not _PANEL_ID.match(nonce):
            raise EntryRefused("This invite link is not valid. Please ask for a new one.")
        return Participant(external_id=nonce)


class DemoPanel(Panel):
    """The demo's open door: anyone may enter, as `?participant=NAME` or a fresh random id.

    Refused unless the settings opt in with CONCORD_DEMO_PANEL = True (the demo settings do).
    """

    key = Worker.Panel.DEMO

    def participant(self, *, study: Study, params: Mapping[str, str]) -> Participant:
        if not getattr(settings, "CONCORD_DEMO_PANEL", False):
            raise EntryRefused("This link works only in the demo.")
        name = params.get("participant") or secrets.token_hex(6)
        if not _PANEL_ID.match(name):
            raise EntryRefused("A participant name uses letters, digits, - and _ only.")
        return Participant(external_id=name)


def invite_token_make(*, study: Study) -> str:
    """Make a new invite token for a study (each token admits one person)."""
    return signing.dumps({"study": study.pk, "invite": secrets.token_hex(12)}, salt=INVITE_SALT)


PANELS: dict[str, Panel] = {
    panel.key: panel for panel in (ProlificPanel(), InvitePanel(), DemoPanel())
}


def panel_get(key: str) -> Panel | None:
    return PANELS.get(key)
