"""The agreement report: every number of the analysis pages, from the raw rows, reproducibly.

The report is a plain dict (JSON-ready). The same rows, parameters and seed give the same bytes
from `report_to_json`: keys are sorted, floats are written with 10 significant digits, NaN
becomes null, and nothing in the payload depends on the clock.
"""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import json
import math
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, is_dataclass
from functools import cache
from importlib import metadata
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from django.conf import settings
from django.db import transaction

from annotation.models import Study
from leaderboard.models import ReportSnapshot
from leaderboard.parallel import run_parallel
from leaderboard.section_selectors import (
    ReportExtras,
    extras_data_hash,
    report_extra_rows_get,
    report_extras_get,
    report_lengths_get,
)
from leaderboard.selectors import (
    CALL_ORDERS,
    StudyVotes,
    VoteFilters,
    report_snapshot_find,
    rows_of_run,
    study_judge_sources,
    study_raters_resolve,
    study_votes_get,
    votes_data_hash,
)
from leaderboard.services.report_sections import people_majority, report_sections_compute
from leaderboard.stats.agreement import (
    bootstrap_agreement_ci,
    cohen_kappa,
    fleiss_kappa,
    krippendorff_alpha_from_long,
    pairwise_agreement,
    pairwise_agreement_by_unit,
)
from leaderboard.stats.bias import flip_rate, position_bias
from leaderboard.stats.correlation import correlation
from leaderboard.stats.likert import preference_sign
from leaderboard.stats.proportion import wilson_interval
from leaderboard.stats.ranking import rank_correlation
from leaderboard.stats.ratings import bradley_terry, elo_bootstrap

REPORT_SCHEMA_VERSION = 1
HUMAN = "human"
LABELS = ("A", "B", "tie")
DEFINITION = (
    "Vote-level agreement as in MT-Bench (Zheng et al. 2023, Table 2): a unit is (prompt, "
    "unordered pair of answers, turn). A judge's single vote on a unit is compared with each human "
    "vote on it; human vs human compares every unordered pair of votes on a unit by different "
    "raters. with_ties (S1): tie is a class of its own; without_ties (S2): only comparisons where "
    "neither side voted tie. A judge judged in both orders votes its verdict when the two agree "
    "and tie when they do not. Majority level compares each source's majority label per unit (a "
    "tied majority is a tie)."
)
RATERS_DEFINITION = {
    "experts": "only raters whose id starts with expert_ (MT-Bench's experts; authors left out)",
    "all": "every rater",
}


@dataclass(frozen=True)
class ReportParams:
    """Statistical parameters of a report (filters are separate)."""

    seed: int = 0
    ci_rounds: int = 1000
    elo_rounds: int = 100
    bt_rounds: int = 100
    confidence: float = 0.95


@cache
def software_version() -> str:
    """Concord's version, as pyproject.toml states it."""
    with (settings.BASE_DIR / "pyproject.toml").open("rb") as handle:
        return str(tomllib.load(handle)["project"]["version"])


@cache
def _library_versions() -> dict[str, str]:
    """The installed versions of the libraries behind the numbers, read once per process: the
    code a process runs does not change under it, and reading package metadata takes a second."""
    versions = {}
    for name in ("numpy", "pandas", "scipy", "krippendorff", "django"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "unknown"
    return versions


def _clean(value: Any) -> Any:
    """Make a value JSON-ready with a fixed float format; NaN and infinities become None."""
    if is_dataclass(value) and not isinstance(value, type):
        return _clean(asdict(value))
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        number = float(value)
        if not math.isfinite(number):
            return None
        return float(format(number, ".10g"))
    if value is None or isinstance(value, str):
        return value
    if value is pd.NA:
        return None
    raise TypeError(f"cannot put {type(value).__name__} into a report")


def _count(agree: int, total: int) -> dict[str, Any]:
    return {"agree": int(agree), "total": int(total), "rate": agree / total if total else None}


def _agreement(votes: pd.DataFrame, other: pd.DataFrame | None, level: str = "vote") -> Any:
    result = pairwise_agreement(votes, other, level=level, key="pair_id")  # type: ignore[arg-type]
    return {
        "with_ties": _count(result.s1.agree, result.s1.total),
        "without_ties": _count(result.s2.agree, result.s2.total),
    }


def _agreement_with_ci(
    votes: pd.DataFrame, other: pd.DataFrame | None, params: ReportParams
) -> dict[str, Any]:
    """Vote-level agreement and its bootstrap interval, from one count of the units."""
    per_unit = pairwise_agreement_by_unit(votes, other, key="pair_id")
    return {
        "with_ties": _count(per_unit["agree_s1"].sum(), per_unit["total_s1"].sum()),
        "without_ties": _count(per_unit["agree_s2"].sum(), per_unit["total_s2"].sum()),
        "ci": _units_ci(per_unit, params),
    }


def _agreement_ci(
    votes: pd.DataFrame, other: pd.DataFrame | None, params: ReportParams
) -> dict[str, Any]:
    return _units_ci(pairwise_agreement_by_unit(votes, other, key="pair_id"), params)


def _units_ci(per_unit: pd.DataFrame, params: ReportParams) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, suffix in (("with_ties", "s1"), ("without_ties", "s2")):
        interval = bootstrap_agreement_ci(
            per_unit[f"agree_{suffix}"].to_numpy(),
            per_unit[f"total_{suffix}"].to_numpy(),
            rounds=params.ci_rounds,
            confidence=params.confidence,
            seed=params.seed,
        )
        out[name] = {"lower": interval.lower, "upper": interval.upper}
    out["confidence"] = params.confidence
    out["rounds"] = params.ci_rounds
    out["units"] = int(len(per_unit))
    return out


def _fleiss(human: pd.DataFrame) -> dict[str, Any]:
    """Fleiss' kappa on the units rated by the most common number (>= 2) of votes.

    The units x (A, B, tie) counts come from label codes per unit (votes without a label left
    out), units in pair id order; the most common number of votes is the smallest on a tie."""
    units, _ = pd.factorize(human["pair_id"], sort=True)
    labels = pd.Categorical(human["label"], categories=LABELS).codes.astype(np.int64)
    known = labels >= 0
    n_units = int(units.max()) + 1 if len(units) else 0
    counts = np.bincount(
        units[known] * len(LABELS) + labels[known], minlength=n_units * len(LABELS)
    ).reshape(n_units, len(LABELS))
    per_unit = counts.sum(axis=1)
    rated = per_unit[per_unit >= 2]
    if rated.size == 0:
        return {"kappa": None, "units": 0, "votes_per_unit": None}
    modal = int(np.bincount(rated).argmax())
    table = counts[per_unit == modal]
    return {"kappa": fleiss_kappa(table), "units": len(table), "votes_per_unit": modal}


def _alpha(human: pd.DataFrame) -> dict[str, Any]:
    nominal = krippendorff_alpha_from_long(human["pair_id"], human["label"], "nominal")
    likert = human.dropna(subset=["likert"])
    ordinal = (
        krippendorff_alpha_from_long(
            likert["pair_id"].to_numpy(), likert["likert"].astype(float).to_numpy(), "ordinal"
        )
        if not likert.empty
        else None
    )
    return {"nominal_preference": nominal, "ordinal_likert": ordinal}


def _kappas(
    judge: pd.DataFrame, human: pd.DataFrame, majority: pd.Series | None = None
) -> dict[str, Any]:
    """Cohen's kappa of the judge against the people's majority label (`majority`, from
    :func:`people_majority`, computed here when not given), unit by unit, and the
    quadratic-weighted kappa of canonical Likert scores vote by vote when both have them."""
    people = people_majority(human) if majority is None else majority
    # The judge's labels meet the people's majority by pair id, as label codes.
    people_ids = people.index.to_numpy(dtype=np.int64)
    judge_ids = judge["pair_id"].to_numpy(dtype=np.int64)
    at = np.minimum(np.searchsorted(people_ids, judge_ids), max(len(people_ids) - 1, 0))
    on = people_ids[at] == judge_ids if len(people_ids) else np.zeros(len(judge), dtype=bool)
    units = int(on.sum())
    kappa = (
        cohen_kappa(
            pd.Categorical(judge["label"], categories=LABELS).codes.astype(np.int64)[on],
            pd.Categorical(people.to_numpy(), categories=LABELS).codes.astype(np.int64)[at[on]],
            categories=range(len(LABELS)),
        )
        if units
        else None
    )
    judged = judge.dropna(subset=["likert"])
    rated = human.dropna(subset=["likert"])
    weighted = None
    n_weighted = 0
    if not judged.empty and not rated.empty:
        judge_pairs = judged["pair_id"].to_numpy()
        order = np.argsort(judge_pairs, kind="stable")
        sorted_pairs = judge_pairs[order]
        if (sorted_pairs[1:] == sorted_pairs[:-1]).any():
            raise ValueError("a judge source has two votes on one pair")
        # Each person's vote meets the judge's one vote on the same pair.
        human_pairs = rated["pair_id"].to_numpy()
        at = np.minimum(np.searchsorted(sorted_pairs, human_pairs), len(sorted_pairs) - 1)
        met = sorted_pairs[at] == human_pairs
        # A judge's two orders may average to a half point; its vote is rounded half up.
        judge_likert = judged["likert"].to_numpy(dtype=np.float64)[order][at[met]]
        n_weighted = int(met.sum())
        if n_weighted:
            weighted = cohen_kappa(
                np.floor(judge_likert + 0.5).astype(np.int64),
                rated["likert"].to_numpy(dtype=np.float64)[met].astype(np.int64),
                "quadratic",
                categories=list(range(1, 9)),
            )
    return {
        "cohen_kappa_vs_majority": {"kappa": kappa, "units": units},
        "weighted_kappa_likert": {"kappa": weighted, "weights": "quadratic", "pairs": n_weighted},
    }


def _unit_scores(
    frame: pd.DataFrame, scale: str, pair_ids: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Each unit's mean score from the frame's votes, at the unit's position in the sorted
    `pair_ids`, and whether it has one: the mean canonical Likert score of the votes that have
    one, or the mean of A=-1, tie=0, B=+1. Sums by position (exact: the scores are halves)."""
    voted = frame["pair_id"].to_numpy(dtype=np.int64)
    if len(pair_ids) == 0:
        return np.zeros(0), np.zeros(0, dtype=bool)
    at = np.minimum(np.searchsorted(pair_ids, voted), len(pair_ids) - 1)
    known = pair_ids[at] == voted
    if scale == "likert":
        score = frame["likert"].to_numpy(dtype=np.float64)
        known &= ~np.isnan(score)
    else:
        score = preference_sign(frame["label"])
    count = np.bincount(at[known], minlength=len(pair_ids))
    total = np.bincount(at[known], weights=score[known], minlength=len(pair_ids))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / count, np.nan), count > 0


def _judge_frames(
    votes: StudyVotes, sources: list[str], frames: Mapping[str, pd.DataFrame] | None
) -> Mapping[str, pd.DataFrame]:
    """Each source's votes: the given frames, or selected from the judges' votes."""
    if frames is not None:
        return frames
    run_of = {s.name: s.run_id for s in votes.sources}
    return {s: rows_of_run(votes.judges, run_of[s]) for s in sources}


PER_CATEGORY_DEFINITION = (
    "per unit, the mean canonical Likert score (or, without Likert, the mean of A=-1, "
    "tie=0, B=+1); correlated across the category's units judged by both"
)


def _per_category(
    votes: StudyVotes, sources: list[str], frames: Mapping[str, pd.DataFrame] | None = None
) -> dict[str, Any]:
    """Per category: correlation over units between the people's mean score and each judge's.

    Unit scores are computed once per source over all units, as arrays by the unit's position
    among the pairs, then taken per category by the category's codes."""
    human, judges = votes.human, votes.judges
    has_likert = human["likert"].notna().any() and judges["likert"].notna().any()
    scale = "likert" if has_likert else "preference_sign"
    pairs = votes.pairs
    if not pairs["pair_id"].is_monotonic_increasing:
        pairs = pairs.sort_values("pair_id", kind="stable")
    pair_ids = pairs["pair_id"].to_numpy(dtype=np.int64)
    category_codes, names = pd.factorize(pairs["category"], sort=True)
    people, people_has = _unit_scores(human, scale, pair_ids)
    by_source = _judge_frames(votes, sources, frames)
    judge_all = {source: _unit_scores(by_source[source], scale, pair_ids) for source in sources}
    rows = []
    for code, category in sorted(enumerate(names.tolist()), key=lambda item: item[1]):
        mine = people_has & (category_codes == code)
        entry: dict[str, Any] = {"category": category, "units": int(mine.sum()), "judges": {}}
        for source in sources:
            judge, judge_has = judge_all[source]
            both = mine & judge_has
            xs, ys = people[both], judge[both]
            entry["judges"][source] = {
                "pearson": correlation(xs, ys, "pearson"),
                "spearman": correlation(xs, ys, "spearman"),
            }
        rows.append(entry)
    return {
        "scale": scale,
        "definition": PER_CATEGORY_DEFINITION,
        "categories": rows,
    }


def _human_position_bias(human: pd.DataFrame, confidence: float) -> dict[str, Any]:
    shown = human.dropna(subset=["likert_shown"])
    histogram = None
    if not shown.empty:
        histogram = position_bias(
            shown["likert_shown"].astype(int).to_numpy(), confidence=confidence
        ).histogram
    known = human[human["shown_first"].notna() & (human["label"] != "tie")]
    first = int((known["label"] == known["shown_first"]).sum())
    return {
        "histogram": histogram,
        "prefers_first": wilson_interval(first, len(known), confidence),
        "judgments_with_order": int(human["shown_first"].notna().sum()),
    }


def _judge_position_bias(calls: pd.DataFrame, confidence: float) -> dict[str, Any]:
    """Position bias of one judge run from its calls: the histogram of shown scores, the share
    of decisive verdicts for the answer shown first, and the flip rate over the pairs judged in
    both orders (each order's first verdict on the pair, in the calls' order). Works on the codes
    of the order and label columns rather than on their text."""
    order = pd.Categorical(calls["order"], categories=CALL_ORDERS).codes.astype(np.int64)
    label = pd.Categorical(calls["label"], categories=LABELS).codes.astype(np.int64)
    # "ab" (0) or "ba" (1): the calls that showed one answer first.
    one_order = (order == 0) | (order == 1)
    shown = calls["likert_shown"].to_numpy(dtype=np.float64)
    with_shown = one_order & ~np.isnan(shown)
    histogram = None
    if with_shown.any():
        histogram = position_bias(shown[with_shown].astype(int), confidence=confidence).histogram
    # Not a tie (a missing label counts, and never for the first answer); the first-shown answer
    # is A (code 0) in order "ab" (0) and B (1) in "ba" (1).
    decisive = one_order & (label != LABELS.index("tie"))
    first = int((decisive & (label == order)).sum())
    # Each (pair, order)'s first labelled call, in the calls' order: a stable sort by pair and
    # order (a no-op on calls in calls_sort's order), then the first row of each run of keys.
    labelled = np.flatnonzero(one_order & (label >= 0))
    key = calls["pair_id"].to_numpy(dtype=np.int64)[labelled] * 2 + order[labelled]
    if len(key) > 1 and (key[1:] < key[:-1]).any():
        resorted = np.argsort(key, kind="stable")
        labelled, key = labelled[resorted], key[resorted]
    heads = np.ones(len(key), dtype=bool)
    heads[1:] = key[1:] != key[:-1]
    key, head_label = key[heads], label[labelled[heads]]
    # A pair judged in both orders has its "ab" key right before its "ba" key.
    both = (key[:-1] % 2 == 0) & (key[1:] == key[:-1] + 1)
    flips = None
    if both.any():
        names = np.array(LABELS)
        flips = flip_rate(
            names[head_label[:-1][both]], names[head_label[1:][both]], confidence=confidence
        )
    return {
        "histogram": histogram,
        "prefers_first": wilson_interval(first, int(decisive.sum()), confidence),
        "flip_rate": flips,
        "calls_with_order": int(one_order.sum()),
    }


def _gold(
    votes: StudyVotes,
    sources: list[str],
    confidence: float,
    by_source: Mapping[str, pd.DataFrame] | None = None,
) -> dict[str, Any]:
    """Accuracy on gold pairs (the known better side), per gold kind, for people and each judge.

    A vote is correct when it names the gold side; a tie is never correct and is counted apart
    (AdvisorQA's first-vs-second and first-vs-last accuracy)."""
    gold_side = votes.pairs.set_index("pair_id")["gold_side"]
    gold_kind = votes.pairs.set_index("pair_id")["gold_kind"]
    kinds = sorted(k for k in set(votes.pairs["gold_kind"].tolist()) if k)
    frames = {HUMAN: votes.human}
    frames |= _judge_frames(votes, sources, by_source)
    out: dict[str, Any] = {}
    for source, frame in frames.items():
        on_gold = frame[frame["is_gold"]]
        side = gold_side.reindex(on_gold["pair_id"]).to_numpy()
        kind = gold_kind.reindex(on_gold["pair_id"]).to_numpy()
        labels = on_gold["label"].to_numpy()
        out[source] = {}
        for k in kinds:
            mine = kind == k
            correct = int((labels[mine] == side[mine]).sum())
            out[source][k] = {
                "accuracy": wilson_interval(correct, int(mine.sum()), confidence),
                "ties": int((labels[mine] == "tie").sum()),
            }
    return {"kinds": kinds, "sources": out}


def _battles(frame: pd.DataFrame, *, ties: bool) -> pd.DataFrame:
    rows = frame if ties else frame[frame["label"] != "tie"]
    # A, B and tie map by their codes onto model_a, model_b and tie; a label outside A/B/tie
    # stays missing.
    labels = pd.Categorical(rows["label"], categories=LABELS)
    winner = pd.Categorical.from_codes(labels.codes, categories=["model_a", "model_b", "tie"])
    return pd.DataFrame(
        {
            "model_a": rows["system_a"].reset_index(drop=True),
            "model_b": rows["system_b"].reset_index(drop=True),
            "winner": winner,
        }
    )


def _ratings_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [
        {
            "model": str(row.model),
            "rating": row.rating,
            "lower": row.lower,
            "upper": row.upper,
        }
        for row in frame.itertuples(index=False)
    ]


def _leaderboard(frame: pd.DataFrame, params: ReportParams) -> dict[str, Any]:
    with_ties, without_ties = _battles(frame, ties=True), _battles(frame, ties=False)
    return {
        "battles": len(with_ties),
        "elo_with_ties": _ratings_records(
            elo_bootstrap(with_ties, rounds=params.elo_rounds, seed=params.seed)
        ),
        "elo_without_ties": _ratings_records(
            elo_bootstrap(without_ties, rounds=params.elo_rounds, seed=params.seed)
        ),
        "bradley_terry": _ratings_records(
            bradley_terry(with_ties, rounds=params.bt_rounds, seed=params.seed)
        ),
    }


def _leaderboards(
    votes: StudyVotes,
    sources: list[str],
    params: ReportParams,
    frames: Mapping[str, pd.DataFrame] | None = None,
) -> dict[str, Any]:
    by_source = _judge_frames(votes, sources, frames)
    boards = {HUMAN: _leaderboard(votes.human, params)}
    for source in sources:
        boards[source] = _leaderboard(by_source[source], params)
    ratings = {
        name: {r["model"]: r["rating"] for r in board["bradley_terry"]}
        for name, board in boards.items()
    }
    correlations = []
    for a, b in itertools.combinations(sorted(boards), 2):
        rc = rank_correlation(ratings[a], ratings[b])
        correlations.append(
            {"a": a, "b": b, "spearman": rc.spearman, "kendall": rc.kendall, "models": rc.models}
        )
    return {"sources": boards, "rank_correlation": correlations}


def _counts(votes: StudyVotes) -> dict[str, Any]:
    return {
        "units": len(votes.pairs),
        "human_votes": len(votes.human),
        "human_raters": int(votes.human["rater"].nunique()),
        "units_with_human_votes": int(votes.human["pair_id"].nunique()),
        "judge_calls": len(votes.calls),
        "human_labels": {label: int((votes.human["label"] == label).sum()) for label in LABELS},
    }


def _agreement_sections(
    *, votes: StudyVotes, params: ReportParams, by_source: Mapping[str, pd.DataFrame]
) -> dict[str, Any]:
    """Every section of :func:`agreement_report_compute` but the leaderboards."""
    human = votes.human
    sources = [s.name for s in votes.sources]
    report: dict[str, Any] = {
        "counts": _counts(votes),
        "human_vs_human": {
            **_agreement_with_ci(human, None, params),
            "fleiss_kappa": _fleiss(human),
            "krippendorff_alpha": _alpha(human),
        },
        "judges": {},
        "judge_vs_judge": [],
        "position_bias": {HUMAN: _human_position_bias(human, params.confidence)},
    }
    majority = people_majority(human)
    for source in votes.sources:
        mine = by_source[source.name]
        calls = rows_of_run(votes.calls, source.run_id)
        report["judges"][source.name] = {
            "judge": source.judge_name,
            "kind": source.judge_kind,
            "model_name": source.model_name,
            "run_id": source.run_id,
            "run_status": source.status,
            "votes": len(mine),
            "labels": {label: int((mine["label"] == label).sum()) for label in LABELS},
            "vs_human": {
                **_agreement_with_ci(mine, human, params),
                "majority": _agreement(mine, human, "majority") if len(mine) else None,
                **_kappas(mine, human, majority),
            },
        }
        report["position_bias"][source.name] = _judge_position_bias(calls, params.confidence)
    for a, b in itertools.combinations(sorted(sources), 2):
        report["judge_vs_judge"].append(
            {
                "a": a,
                "b": b,
                **_agreement(by_source[a], by_source[b]),
            }
        )
    report["per_category"] = _per_category(votes, sources, by_source)
    report["gold"] = _gold(votes, sources, params.confidence, by_source)
    return report


def agreement_report_compute(*, votes: StudyVotes, params: ReportParams) -> dict[str, Any]:
    """Compute the report's statistics from gathered votes (no database access).

    The leaderboards (mostly the compiled Elo kernel, which releases Python's lock) are computed
    in a thread of their own while the other sections are computed here.
    """
    sources = [s.name for s in votes.sources]
    by_source = _judge_frames(votes, sources, None)
    report, boards = run_parallel(
        lambda: _agreement_sections(votes=votes, params=params, by_source=by_source),
        lambda: _leaderboards(votes, sources, params, by_source),
        uses_database=False,
    )
    report["leaderboards"] = boards
    return dict(report)


def _params_dict(filters: VoteFilters, params: ReportParams) -> dict[str, Any]:
    return {"filters": filters.as_params(), **asdict(params)}


def params_hash(*, filters: VoteFilters, params: ReportParams) -> str:
    """SHA-256 of the canonical parameters, the key a snapshot is found by."""
    text = json.dumps(_clean(_params_dict(filters, params)), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def agreement_report_build(
    *, study: Study, filters: VoteFilters | None = None, params: ReportParams | None = None
) -> dict[str, Any]:
    """Gather the study's votes and compute its agreement report, with metadata."""
    filters = filters or VoteFilters()
    params = params or ReportParams()
    votes, extras = _votes_and_extras_get(study=study, filters=filters)
    return _with_metadata(study=study, votes=votes, filters=filters, params=params, extras=extras)


def _votes_and_extras_get(*, study: Study, filters: VoteFilters) -> tuple[StudyVotes, ReportExtras]:
    """The votes and the extra rows; the answer lengths and the other extra rows (which need
    only the filters, the rater set and the runs) are read beside the votes, by PostgreSQL in
    processes of their own."""
    raters = study_raters_resolve(study=study, raters=filters.raters)
    run_ids = [s.run_id for s in study_judge_sources(study=study, filters=filters)]
    votes, lengths, rows = run_parallel(
        lambda: study_votes_get(study=study, filters=filters),
        lambda: report_lengths_get(study=study, filters=filters),
        lambda: report_extra_rows_get(study=study, filters=filters, raters=raters, run_ids=run_ids),
        uses_database=True,
    )
    return votes, report_extras_get(study=study, votes=votes, lengths=lengths, rows=rows)


def report_data_hash(*, votes: StudyVotes, extras: ReportExtras) -> str:
    """SHA-256 over the votes' hash and the extra rows' hash (answer lengths, values, ranks)."""
    both = votes_data_hash(votes=votes) + extras_data_hash(extras=extras)
    return hashlib.sha256(both.encode()).hexdigest()


def _with_metadata(
    *,
    study: Study,
    votes: StudyVotes,
    filters: VoteFilters,
    params: ReportParams,
    extras: ReportExtras | None = None,
) -> dict[str, Any]:

    def later_part() -> tuple[ReportExtras, dict[str, Any], str]:
        read = extras or report_extras_get(study=study, votes=votes)
        sections = report_sections_compute(votes=votes, extras=read, confidence=params.confidence)
        return read, sections, report_data_hash(votes=votes, extras=read)

    # The extra rows are read (by PostgreSQL, in a process of its own), the later sections and
    # the data hash computed, beside the agreement statistics and the leaderboards.
    (extras, sections, data_hash), body = run_parallel(
        later_part,
        lambda: agreement_report_compute(votes=votes, params=params),
        uses_database=extras is None,
    )
    body |= sections
    params_out = _params_dict(filters, params)
    params_out["filters"]["raters"] = votes.raters
    metadata_out = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "software_version": software_version(),
        "libraries": dict(_library_versions()),
        "study": {"slug": study.slug, "name": study.name},
        "seed": params.seed,
        "parameters": params_out,
        "data_hash": data_hash,
        "definition": DEFINITION,
        "raters": {"set": votes.raters, "definition": RATERS_DEFINITION[votes.raters]},
    }
    report: dict[str, Any] = _clean({"metadata": metadata_out, **body})
    return report


def agreement_report_snapshot(
    *, study: Study, filters: VoteFilters | None = None, params: ReportParams | None = None
) -> ReportSnapshot:
    """Return the stored report for these parameters and the study's current rows, computing
    and storing it first when the rows changed or it was never computed."""
    filters = filters or VoteFilters()
    params = params or ReportParams()
    votes, extras = _votes_and_extras_get(study=study, filters=filters)
    data_hash = report_data_hash(votes=votes, extras=extras)
    key = params_hash(filters=filters, params=params)
    found = report_snapshot_find(study=study, params_hash=key, data_hash=data_hash)
    if found is not None:
        return found
    payload = _with_metadata(
        study=study, votes=votes, filters=filters, params=params, extras=extras
    )
    with transaction.atomic():
        return ReportSnapshot.objects.create(
            study=study,
            params=payload["metadata"]["parameters"],
            params_hash=key,
            seed=params.seed,
            data_hash=data_hash,
            software_version=software_version(),
            payload=payload,
        )


def report_to_json(report: Mapping[str, Any]) -> bytes:
    """The report as deterministic JSON bytes: sorted keys, two-space indent, UTF-8."""
    text = json.dumps(report, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


def _flatten(value: Any, prefix: str) -> list[tuple[str, Any]]:
    if isinstance(value, Mapping):
        rows: list[tuple[str, Any]] = []
        for key in sorted(value):
            rows += _flatten(value[key], f"{prefix}.{key}" if prefix else str(key))
        return rows
    if isinstance(value, list):
        rows = []
        for i, item in enumerate(value):
            rows += _flatten(item, f"{prefix}[{i}]")
        return rows
    return [(prefix, value)]


def report_flatten(report: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The report's leaves as (path, value) pairs, paths as in the JSON, in sorted order."""
    return _flatten(report, "")


def report_to_csv(report: Mapping[str, Any]) -> bytes:
    """The report as CSV bytes: one line per leaf, `path,value` (paths as in the JSON)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["path", "value"])
    for path, value in _flatten(report, ""):
        writer.writerow([path, "" if value is None else json.dumps(value)])
    return out.getvalue().encode("utf-8")
