"""The JSON schema documented in docs/analysis.md and the report's JSON stay together: every key
the report writes is in its section's documented block, every documented section is written,
and where the block lists a key's values ("prompt"|"vote") the report writes one of them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings

from leaderboard.services.reports import agreement_report_build
from tests.leaderboard.test_report_sections import FAST, World, world  # noqa: F401

TOP_KEY = re.compile(r"^([a-z_0-9]+)[:{.]")
QUOTED_CHOICES = (
    # key:"a"|"b"  and  key ("a"|"b"), every choice quoted
    re.compile(r'(\w+):((?:"[^"]*")(?:\|"[^"]*")*)'),
    re.compile(r'(\w+) \(((?:"[^"]*")(?:\s*\|\s*"[^"]*")*)\)'),
)


def documented_sections() -> dict[str, str]:
    """The schema block of docs/analysis.md, split by top-level key."""
    docs = (Path(settings.BASE_DIR) / "docs" / "analysis.md").read_text(encoding="utf-8")
    schema = docs[docs.index("### JSON schema") :]
    block = schema[schema.index("```") + 3 :]
    block = block[: block.index("```")]
    sections: dict[str, list[str]] = {}
    current = ""
    for line in block.splitlines():
        text = line.split("#", 1)[0].rstrip()
        match = TOP_KEY.match(text)
        if match:
            current = match.group(1)
        if current and line.strip():
            # Comments name keys too ("# correlation objects: method, estimate, n, ...").
            sections.setdefault(current, []).append(line)
    return {key: "\n".join(lines) for key, lines in sections.items()}


def names(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


def choices(text: str) -> dict[str, set[str]]:
    """The documented values of each key whose block lists them all, quoted."""
    found: dict[str, set[str]] = {}
    for pattern in QUOTED_CHOICES:
        for key, options in pattern.findall(text):
            found.setdefault(key, set()).update(re.findall(r'"([^"]*)"', options))
    return found


def items(value: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, value) of every object inside ``value``."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield key, inner
            yield from items(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from items(inner)


def test_the_documented_parser_reads_keys_and_their_listed_values() -> None:
    text = 'ci{lower, resample:"prompt"|"vote"}, resampled ("prompt"|"rating"), kind ("a"|b c)'
    assert {"ci", "lower", "resample", "resampled", "kind"} <= names(text)
    assert choices(text) == {"resample": {"prompt", "vote"}, "resampled": {"prompt", "rating"}}


def test_every_key_the_report_writes_is_in_the_documented_schema(
    world: World,  # noqa: F811
) -> None:
    report = agreement_report_build(study=world.study, params=FAST)
    documented = documented_sections()
    assert set(report) == set(documented)
    # Keys that are data, not schema: source, category and model names, histogram scores.
    data_keys = set(report["metadata"]["sources"]) | {str(score) for score in range(1, 9)}
    data_keys |= {m for s in report["win_rates"]["sources"].values() for m in s["models"]}
    order = list(documented)
    for top, section in report.items():
        allowed = names(documented[top])
        if "..." in documented[top]:
            # "{...}" and "{...as above}" stand for an object shown earlier in the block.
            for earlier in order[: order.index(top) + 1]:
                allowed |= names(documented[earlier])
        written = {key for key, _ in items(section)} - data_keys
        assert written <= allowed, (top, sorted(written - allowed))
        for key, options in choices(documented[top]).items():
            for found_key, value in items(section):
                if found_key == key and isinstance(value, str):
                    assert value in options, (top, key, value, options)
    # The value the issue found documented wrongly ("vote" where the report writes "prompt").
    assert report["metadata"]["parameters"]["resample"] == "prompt"
    assert 'resample:"prompt"|"vote"' in documented["metadata"]


def test_a_key_missing_from_the_docs_would_be_found() -> None:
    documented = documented_sections()
    assert "prefers_first" in names(documented["position_bias"])
    assert "no_such_key" not in names(documented["position_bias"])
    assert "fleiss_kappa" in names(documented["human_vs_human"])


def test_the_consistency_docs_say_what_a_pl_contrast_call_compares() -> None:
    # judges/reward/scoring.py scores both answers of a contrast item under the item's own
    # question: h(I_A, r_A) against h(I_A, r_B), never against h(I_B, r_B).
    docs = (Path(settings.BASE_DIR) / "docs" / "consistency.md").read_text(encoding="utf-8")
    text = " ".join(docs.split())
    assert "comparing h(I_A, r_A) with h(I_A, r_B)" in text
    assert "h(I_A, r_A) with h(I_B, r_B)" not in text
