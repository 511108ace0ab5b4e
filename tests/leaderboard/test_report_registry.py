"""The registry drives the report: every registered section computes, serialises, reads back,
renders on the page and in the standalone HTML, and is documented; a new section needs one
module and one registry entry."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from annotation.models import Study
from annotation.services.roles import study_member_add
from leaderboard.models import ReportSnapshot
from leaderboard.report import document
from leaderboard.report.base import (
    RenderContext,
    ReportData,
    Section,
    Table,
    from_json,
    to_json,
)
from leaderboard.report.document import report_from_payload, report_render
from leaderboard.report.html import report_to_html
from leaderboard.report.registry import SECTIONS
from leaderboard.services.reports import ReportParams, agreement_report_build
from tests.conftest import Cast
from tests.leaderboard.conftest import get_computed, run_import
from tests.leaderboard.test_report_fast_path import random_study_files

FAST = ReportParams(ci_rounds=20, elo_rounds=5, bt_rounds=5)


@pytest.fixture
def payload(db: None, tmp_path: Path) -> dict[str, Any]:
    run_import(random_study_files(tmp_path, 3))
    return agreement_report_build(study=Study.objects.get(slug="mt-bench"), params=FAST)


def test_every_registered_section_serialises_and_reads_back_the_same(
    payload: dict[str, Any],
) -> None:
    report = report_from_payload(payload)
    for section in SECTIONS:
        result = report.results[section.key]
        assert isinstance(result, section.result_type)
        # Written again from the typed result read back, the section's JSON is unchanged.
        assert section.dump(result) == {k: payload[k] for k in section.dump(result)}
    assert document.report_to_payload(report) == payload


def test_every_registered_section_renders_its_tables_and_plots(payload: dict[str, Any]) -> None:
    rendered = report_render(report_from_payload(payload))
    assert [r.key for r in rendered] == [s.key for s in SECTIONS]
    names = [t.name for r in rendered for t in r.tables]
    assert len(names) == len(set(names)), "table names are unique across sections"
    for part in rendered:
        assert part.title and part.definition
        for table in part.tables:
            assert all(len(row) == len(table.columns) for row in table.rows), table.name
            if table.groups:
                assert sum(span for _, span in table.groups) == len(table.columns)
    plots = [p.name for r in rendered for p in r.plots]
    assert "category-correlation" in plots and "elo-human" in plots


def test_the_page_and_the_standalone_report_show_every_section_with_an_anchor(
    client: Client, cast: Cast, payload: dict[str, Any]
) -> None:
    study = Study.objects.get(slug="mt-bench")
    study_member_add(study=study, user=cast.researcher)
    client.force_login(cast.researcher)
    page = get_computed(
        client, reverse("leaderboard:study_analysis", args=[study.slug])
    ).content.decode()
    html = report_to_html(report_from_payload(payload), study=study).decode()
    for part in report_render(report_from_payload(payload)):
        for text in (page, html):
            assert f'id="{part.anchor}"' in text
            assert f'href="#{part.anchor}"' in text
    # Self-contained: styles inline, no stylesheet, script or image fetched.
    assert "<style>" in html and "--accent" in html
    assert not re.search(r"<link|<script|src=", html)


def test_the_docs_schema_names_every_section_and_the_schema_version() -> None:
    docs = (Path(settings.BASE_DIR) / "docs" / "analysis.md").read_text(encoding="utf-8")
    schema = docs[docs.index("### JSON schema") :]
    assert f"schema_version {document.SCHEMA_VERSION}" in schema
    for section in SECTIONS:
        for key in section.payload_keys():
            assert re.search(rf"^{key}[:{{.]", schema, re.MULTILINE), key


@dataclass(frozen=True)
class VoteCount:
    human_votes: int
    judges: dict[str, int]


class VoteCountSection(Section[VoteCount]):
    key = "vote_count"
    title = "Votes per source"
    definition = "How many votes each source cast."
    result_type = VoteCount

    def compute(self, data: ReportData) -> VoteCount:
        return VoteCount(
            len(data.votes.human), {name: len(data.frames[name]) for name in data.judge_names}
        )

    def tables(self, result: VoteCount, context: RenderContext) -> list[Table]:
        rows = (("human", result.human_votes), *sorted(result.judges.items()))
        return [Table("vote-count", self.title, ("source", "votes"), tuple(rows))]


def test_a_new_section_is_one_class_and_one_registry_entry(
    monkeypatch: pytest.MonkeyPatch, payload: dict[str, Any]
) -> None:
    monkeypatch.setattr(document, "SECTIONS", (*SECTIONS, VoteCountSection()))
    study = Study.objects.get(slug="mt-bench")
    ReportSnapshot.objects.all().delete()
    extended = agreement_report_build(study=study, params=FAST)
    assert extended["vote_count"]["human_votes"] == payload["counts"]["human_votes"]
    report = report_from_payload(json.loads(document.payload_to_json(extended)))
    assert report.results["vote_count"] == from_json(
        VoteCount, to_json(report.results["vote_count"])
    )
    rendered = report_render(report)
    assert rendered[-1].tables[0].rows[0] == ("human", payload["counts"]["human_votes"])
