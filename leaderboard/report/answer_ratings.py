"""Per-answer ratings: each system's Accept / Reject / Unsure shares and each fine-grained axis's
no / partial / yes shares with intervals over prompts, agreement among raters on each rating
(Krippendorff's alpha), and how the ratings relate to the pairwise preference (the Reward
(In-)consistency study's single-answer form; docs/analysis.md, "Per-answer ratings")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from leaderboard.plots import Series, bar_chart_svg
from leaderboard.report.agreement import ReliabilityCI
from leaderboard.report.base import Plot, RenderContext, ReportData, Section, Table
from leaderboard.selectors.ratings import RATING_LEVELS, RATINGS
from leaderboard.selectors.section_reads import ANSWER_RATINGS
from leaderboard.stats.agreement import krippendorff_alpha_interval
from leaderboard.stats.answer_ratings import LevelShares, level_shares, preferred_rated_higher

if TYPE_CHECKING:
    import pandas as pd

ACCEPTABILITY_LEVELS = RATING_LEVELS["acceptability"]
AXIS_LEVELS = RATING_LEVELS["axis"]
AXIS_ORDER = {"no": 0.0, "partial": 1.0, "yes": 2.0}
# The levels a researcher reads first, linked to the units behind them on the page.
DRILL_LEVELS = {"acceptability": ("reject", "unsure"), "axis": ("no",)}

DEFINITION = (
    "A rating is one rater's rating of one answer of a pair (a judgment rates both answers, A "
    "and B). Shares: per system, the ratings of its answers at each level over all its rated "
    "answers; intervals are percentile bootstraps that draw prompts with replacement, with all "
    "of a prompt's ratings (or single ratings, with resample = vote). Agreement: Krippendorff's "
    "alpha among the raters of each answer in a pair (unit = pair and side), nominal for "
    "acceptability, ordinal for the axes (no < partial < yes), with the same bootstrap. "
    "Preference: among the judgments that prefer one answer and rate the two differently, the "
    "share where the preferred answer is the better-rated one (for acceptability: the accepted "
    "one, the other not accepted; for an axis: the higher level); 0.5 is what a preference "
    "that ignored the rating would give."
)


def levels_of(rating: str) -> tuple[str, ...]:
    """The levels of one rating, in the order the tables show them."""
    return ACCEPTABILITY_LEVELS if rating == "acceptability" else AXIS_LEVELS


@dataclass(frozen=True)
class SystemRatings:
    """One system's answers: how many ratings they got and each rating's level shares."""

    system: str
    ratings: int
    shares: dict[str, LevelShares]


@dataclass(frozen=True)
class RatingAgreement:
    """Krippendorff's alpha of one rating among its raters; `units` are the rated answers (pair
    and side) with two or more ratings, the ones alpha pairs."""

    rating: str
    level: Literal["nominal", "ordinal"]
    ratings: int
    units: int
    alpha: float
    ci: ReliabilityCI | None


@dataclass(frozen=True)
class PreferenceLink:
    """How often the preferred answer is the better-rated one: of `preferring` judgments that
    prefer one answer and rate both, `shares` counts the ones rating the two apart, by whether
    the preferred one is rated "higher" or "lower"."""

    rating: str
    question: str
    preferring: int
    shares: LevelShares


@dataclass(frozen=True)
class AnswerRatingsResult:
    definition: str
    asked: list[str]  # the ratings the judgments hold, of acceptability and the three axes
    judgments: int  # judgments with any per-answer rating
    resample: str
    systems: list[SystemRatings]
    agreement: list[RatingAgreement]
    preference: list[PreferenceLink]


QUESTIONS = {
    "acceptability": "the preferred answer is the accepted one",
    "relevance": "the preferred answer is the more relevant one",
    "usefulness": "the preferred answer is the more useful one",
    "factuality": "the preferred answer is the more factual one",
}


def _sides(frame: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """One row per rated answer: the judgment's pair, its side (0 = A, 1 = B), the answer's
    system and prompt, and a column per rating."""
    import pandas as pd

    parts = []
    for code, side in enumerate(("a", "b")):
        part = pd.DataFrame(
            {
                "pair_id": frame["pair_id"].to_numpy(),
                "unit": frame["pair_id"].to_numpy(dtype=np.int64) * 2 + code,
                "prompt": pairs["prompt_id"].reindex(frame["pair_id"]).to_numpy(),
                "system": pairs[f"system_{side}"].reindex(frame["pair_id"]).astype(str).to_numpy(),
            }
        )
        for rating in RATINGS:
            part[rating] = frame[f"{rating}_{side}"].to_numpy(dtype=object)
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def _score(values: pd.Series, rating: str) -> np.ndarray:
    """A rating as a number on its order: accepted 1, not accepted 0; no 0, partial 1, yes 2;
    NaN where not rated."""
    if rating == "acceptability":
        return np.where(values.isna(), np.nan, (values == "accept").astype(np.float64))
    return values.map(AXIS_ORDER).to_numpy(dtype=np.float64)


def answer_ratings_compute(data: ReportData) -> AnswerRatingsResult:
    import pandas as pd

    params = data.params
    by_prompt = params.resample == "prompt"
    pairs = data.votes.pairs.set_index("pair_id")
    frame = data.read(ANSWER_RATINGS).frame
    frame = frame[frame["pair_id"].isin(pairs.index)].reset_index(drop=True)
    asked = [r for r in RATINGS if frame[f"{r}_a"].notna().any() or frame[f"{r}_b"].notna().any()]
    resampled = "prompt" if by_prompt else "rating"
    empty = AnswerRatingsResult(DEFINITION, [], 0, params.resample, [], [], [])
    if frame.empty or not asked:
        return empty
    answers = _sides(frame, pairs)

    def shares(values: Any, clusters: Any, levels: tuple[str, ...]) -> LevelShares:
        return level_shares(
            values,
            clusters if by_prompt else None,
            levels,
            resampled=resampled,
            rounds=params.ci_rounds,
            seed=params.seed,
            confidence=params.confidence,
        )

    systems = []
    for name in sorted(set(answers["system"].tolist())):
        mine = answers[answers["system"].to_numpy() == name]
        rated = mine[mine[asked].notna().any(axis=1).to_numpy()]
        systems.append(
            SystemRatings(
                system=name,
                ratings=len(rated),
                shares={r: shares(rated[r], rated["prompt"], levels_of(r)) for r in asked},
            )
        )

    agreement = []
    for rating in asked:
        rated = answers[answers[rating].notna().to_numpy()]
        level: Literal["nominal", "ordinal"] = "nominal" if rating == "acceptability" else "ordinal"
        values = rated[rating] if level == "nominal" else pd.Series(_score(rated[rating], rating))
        interval = krippendorff_alpha_interval(
            rated["unit"].to_numpy(),
            values,
            level,
            rated["prompt"].to_numpy() if by_prompt else None,
            rounds=params.ci_rounds,
            confidence=params.confidence,
            seed=params.seed,
        )
        pairable = int((rated.groupby("unit").size() >= 2).sum())
        ci = None
        if np.isfinite(interval.estimate):
            ci = ReliabilityCI(
                interval.lower,
                interval.upper,
                interval.confidence,
                interval.rounds,
                params.resample,
                interval.clusters,
            )
        agreement.append(
            RatingAgreement(rating, level, len(rated), pairable, interval.estimate, ci)
        )

    preference = []
    prompts = pairs["prompt_id"].reindex(frame["pair_id"]).to_numpy()
    for rating in asked:
        a = _score(frame[f"{rating}_a"], rating)
        b = _score(frame[f"{rating}_b"], rating)
        both = ~np.isnan(a) & ~np.isnan(b)
        preferring = int((frame["label"].isin(["A", "B"]).to_numpy() & both).sum())
        flags = preferred_rated_higher(frame["label"].to_numpy(dtype=object), a, b)
        preference.append(
            PreferenceLink(
                rating, QUESTIONS[rating], preferring, shares(flags, prompts, ("higher", "lower"))
            )
        )
    return AnswerRatingsResult(
        definition=DEFINITION,
        asked=asked,
        judgments=len(frame),
        resample=params.resample,
        systems=systems,
        agreement=agreement,
        preference=preference,
    )


def drill_levels(result: AnswerRatingsResult) -> list[tuple[str, str]]:
    """The (rating, level) pairs the page links to the units behind, per system."""
    return [
        (rating, level)
        for rating in result.asked
        for level in DRILL_LEVELS["acceptability" if rating == "acceptability" else "axis"]
    ]


class AnswerRatingsSection(Section[AnswerRatingsResult]):
    key = "answer_ratings"
    title = "Per-answer ratings"
    definition = (
        "Accept / Reject / Unsure and relevance, usefulness, factuality (no / partial / yes) of "
        "each answer: shares per system, agreement among raters, and the link to the preference."
    )
    result_type = AnswerRatingsResult
    reads = (ANSWER_RATINGS,)

    def compute(self, data: ReportData) -> AnswerRatingsResult:
        return answer_ratings_compute(data)

    def tables(self, result: AnswerRatingsResult, context: RenderContext) -> list[Table]:
        if not result.asked:
            return []
        unit = "prompts" if result.resample == "prompt" else "ratings"
        rows: list[tuple[Any, ...]] = []
        for system in result.systems:
            for rating in result.asked:
                entry = system.shares[rating]
                for share in entry.levels:
                    rows.append(
                        (
                            system.system,
                            rating,
                            share.level,
                            share.total,
                            share.count,
                            share.share,
                            share.lower,
                            share.upper,
                        )
                    )
        tables = [
            Table(
                "answer-ratings",
                "Ratings of each system's answers",
                ("system", "rating", "level", "ratings", "count", "share", "lower", "upper"),
                tuple(rows),
                note=f"Interval: bootstrap over {unit}. {result.definition}",
            ),
            Table(
                "answer-ratings-agreement",
                "Agreement among raters (Krippendorff's alpha)",
                ("rating", "metric", "ratings", "rated by 2+", "alpha", "lower", "upper"),
                tuple(
                    (
                        a.rating,
                        a.level,
                        a.ratings,
                        a.units,
                        a.alpha,
                        a.ci.lower if a.ci else None,
                        a.ci.upper if a.ci else None,
                    )
                    for a in result.agreement
                ),
                note="Unit: one answer of one pair, rated by every rater of the pair. "
                f"Interval: bootstrap over {unit}.",
            ),
        ]
        links: list[tuple[Any, ...]] = []
        for link in result.preference:
            higher = link.shares.level("higher")
            links.append(
                (
                    link.rating,
                    link.question,
                    link.preferring,
                    higher.total,
                    higher.count,
                    higher.share,
                    higher.lower,
                    higher.upper,
                )
            )
        tables.append(
            Table(
                "answer-ratings-preference",
                "Ratings and the pairwise preference",
                (
                    "rating",
                    "how often",
                    "judgments preferring one",
                    "rated apart",
                    "count",
                    "share",
                    "lower",
                    "upper",
                ),
                tuple(links),
                note="Of the judgments that prefer one answer and rate both, those that rate the "
                "two apart; share: the preferred answer is the better-rated one (0.5 if the "
                "preference ignored the rating). The same rater's preference and ratings.",
            )
        )
        return tables

    def plots(self, result: AnswerRatingsResult, context: RenderContext) -> list[Plot]:
        if not result.systems:
            return []
        names = [s.system for s in result.systems]
        plots = []
        if "acceptability" in result.asked:
            plots.append(
                _share_plot(
                    "answer-acceptability",
                    "Acceptability of each system's answers (share of ratings)",
                    names,
                    [
                        (level, [s.shares["acceptability"].level(level) for s in result.systems])
                        for level in ACCEPTABILITY_LEVELS
                    ],
                    "Whiskers: the bootstrap interval.",
                )
            )
        axes = [r for r in result.asked if r != "acceptability"]
        if axes:
            plots.append(
                _share_plot(
                    "answer-axes",
                    "Answers rated yes on each axis (share of ratings)",
                    names,
                    [
                        (f"{axis}: yes", [s.shares[axis].level("yes") for s in result.systems])
                        for axis in axes
                    ],
                    "Whiskers: the bootstrap interval; the table gives no and partial too.",
                )
            )
        return plots


def _share_plot(
    name: str, title: str, systems: list[str], series: list[tuple[str, list[Any]]], note: str
) -> Plot:
    """A bar chart of shares (0 to 1) per system, one series per (name, per-system shares with
    ``share``, ``lower`` and ``upper``), whiskers at the intervals."""
    bars = [
        Series(
            name=label,
            values=[p.share for p in picked],
            lower=[p.lower for p in picked],
            upper=[p.upper for p in picked],
        )
        for label, picked in series
    ]
    svg = bar_chart_svg(
        title=title, categories=systems, series=bars, y_label="share", y_min=0.0, y_max=1.0
    )
    return Plot(name, title, svg, note=note)


SECTION = AnswerRatingsSection()
