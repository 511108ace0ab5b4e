"""Leaderboards: each source's ratings of the models (bootstrapped Elo with and without ties, as
LMSYS computes it; Bradley-Terry on the Elo scale) and the rank correlation between sources."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.utils.text import slugify

from leaderboard.plots import Series, bar_chart_svg
from leaderboard.report.base import (
    BT_PROMPT_DRAWS_BUDGET,
    ELO_UPDATES_BUDGET,
    Plot,
    RenderContext,
    ReportData,
    ReportParams,
    Section,
    Table,
    rounds_within,
)
from leaderboard.stats.bradley_terry import bradley_terry
from leaderboard.stats.correlation import FEW_ITEMS, Correlation
from leaderboard.stats.elo import elo_bootstrap, elo_bootstrap_ties_kept_and_dropped
from leaderboard.stats.majority import LABELS
from leaderboard.stats.ranking import RankCorrelation, rank_correlation

if TYPE_CHECKING:
    import pandas as pd

KINDS = (
    ("bradley_terry", "bradley-terry", "Bradley-Terry (Elo scale, bootstrap 95% interval)"),
    ("elo_with_ties", "elo-with-ties", "Elo (bootstrap median, 95% interval), ties as half a win"),
    ("elo_without_ties", "elo-without-ties", "Elo (bootstrap median, 95% interval), ties left out"),
)


@dataclass(frozen=True)
class ModelRating:
    model: str
    rating: float
    lower: float | None
    upper: float | None


@dataclass(frozen=True)
class Bootstrap:
    """How an interval was drawn: the unit resampled and the rounds run."""

    resample: str
    rounds: int


@dataclass(frozen=True)
class Board:
    battles: int
    elo_with_ties: list[ModelRating]
    elo_without_ties: list[ModelRating]
    bradley_terry: list[ModelRating]
    elo_bootstrap: Bootstrap | None = None
    bradley_terry_bootstrap: Bootstrap | None = None


@dataclass(frozen=True)
class RankPair:
    """The rank correlation of two sources' Bradley-Terry ratings over the models both rate."""

    a: str
    b: str
    spearman: Correlation
    kendall: Correlation
    models: list[str]


@dataclass(frozen=True)
class LeaderboardsResult:
    sources: dict[str, Board]
    rank_correlation: list[RankPair]


def battles_of(frame: pd.DataFrame, *, ties: bool) -> pd.DataFrame:
    """A source's votes as battles (model_a, model_b, winner), ties kept or left out."""
    import pandas as pd

    rows = frame if ties else frame[frame["label"] != "tie"]
    # A, B and tie map by their codes onto model_a, model_b and tie; a label outside A/B/tie
    # stays missing.
    labels = pd.Categorical(rows["label"], categories=LABELS)
    winner = pd.Categorical.from_codes(
        labels.codes, categories=pd.Index(["model_a", "model_b", "tie"])
    )
    return pd.DataFrame(
        {
            "model_a": rows["system_a"].reset_index(drop=True),
            "model_b": rows["system_b"].reset_index(drop=True),
            "winner": winner,
        }
    )


def _ratings(frame: pd.DataFrame) -> list[ModelRating]:
    return [
        ModelRating(str(row["model"]), row["rating"], row["lower"], row["upper"])
        for row in frame.to_dict("records")
    ]


def board_compute(frame: pd.DataFrame, params: ReportParams, prompt_of: pd.Series) -> Board:
    """One source's leaderboards from its votes.

    The Elo and Bradley-Terry intervals resample prompts (``params.resample``, the default: all
    of a prompt's battles together) or battles. Rounds are cut for a large source so that the
    report keeps its time (``rounds_within``); the board states the unit and rounds run."""
    import pandas as pd

    with_ties = battles_of(frame, ties=True)
    elo_rounds = rounds_within(params.elo_rounds, len(with_ties), ELO_UPDATES_BUDGET)
    clusters = None
    bt_rounds = params.bt_rounds
    if params.resample == "prompt":
        clusters = prompt_of.reindex(frame["pair_id"]).to_numpy()
        prompts = len(pd.unique(clusters))
        bt_rounds = rounds_within(params.bt_rounds, prompts, BT_PROMPT_DRAWS_BUDGET)

    if clusters is not None:
        # Both boards from the same resampled prompts, in one pass over the rounds.
        kept, dropped = elo_bootstrap_ties_kept_and_dropped(
            with_ties, clusters=clusters, rounds=elo_rounds, seed=params.seed
        )
    else:
        kept = elo_bootstrap(with_ties, rounds=elo_rounds, seed=params.seed)
        without_ties = battles_of(frame, ties=False)
        dropped = elo_bootstrap(without_ties, rounds=elo_rounds, seed=params.seed)

    return Board(
        battles=len(with_ties),
        elo_with_ties=_ratings(kept),
        elo_without_ties=_ratings(dropped),
        bradley_terry=_ratings(
            bradley_terry(with_ties, rounds=bt_rounds, seed=params.seed, clusters=clusters)
        ),
        elo_bootstrap=Bootstrap(params.resample, elo_rounds),
        bradley_terry_bootstrap=Bootstrap(params.resample, bt_rounds),
    )


def leaderboards_compute(data: ReportData) -> LeaderboardsResult:
    prompt_of = data.votes.pairs.set_index("pair_id")["prompt_id"]
    boards = {
        name: board_compute(frame, data.params, prompt_of) for name, frame in data.frames.items()
    }
    ratings = {
        name: {r.model: r.rating for r in board.bradley_terry} for name, board in boards.items()
    }
    pairs = []
    for a, b in itertools.combinations(sorted(boards), 2):
        rc: RankCorrelation = rank_correlation(ratings[a], ratings[b])
        pairs.append(RankPair(a, b, rc.spearman, rc.kendall, list(rc.models)))
    return LeaderboardsResult(boards, pairs)


def _bootstrap_note(result: LeaderboardsResult, sources: list[str], kind: str) -> str:
    """Which unit the intervals resampled and how many rounds, per source."""
    parts = []
    for source in sources:
        board = result.sources[source]
        spec = board.bradley_terry_bootstrap if kind == "bradley_terry" else board.elo_bootstrap
        if spec is not None:
            unit = "prompts" if spec.resample == "prompt" else "battles"
            parts.append(f"{source}: {spec.rounds} rounds over {unit}")
    return "Bootstrap intervals (95%), " + "; ".join(parts) + "." if parts else ""


class LeaderboardsSection(Section[LeaderboardsResult]):
    key = "leaderboards"
    title = "Leaderboards"
    definition = (
        "Each source's ratings of the models from its votes as battles: Bradley-Terry on the Elo "
        "scale, online Elo with ties as half a win and with ties left out (bootstrap median and "
        "95% interval); rank 1 is the best; the rank correlations compare sources."
    )
    result_type = LeaderboardsResult
    releases_gil = True

    def compute(self, data: ReportData) -> LeaderboardsResult:
        return leaderboards_compute(data)

    def tables(self, result: LeaderboardsResult, context: RenderContext) -> list[Table]:
        sources = [s for s in context.sources if s in result.sources]
        tables = []
        for kind, name, title in KINDS:
            by_source = {s: getattr(result.sources[s], kind) for s in sources}
            ranked = {
                s: {r.model: (i, r) for i, r in enumerate(rows, 1)} for s, rows in by_source.items()
            }
            # Models in the order of the first source that rates them (people first).
            models: list[str] = []
            for source in sources:
                models += [r.model for r in by_source[source] if r.model not in models]
            rows_out = []
            for model in models:
                row: list[Any] = [model]
                for source in sources:
                    rank, rating = ranked[source].get(model, (None, None))
                    row += (
                        [rating.rating, rating.lower, rating.upper, rank]
                        if rating is not None
                        else [None, None, None, None]
                    )
                rows_out.append(tuple(row))
            columns = ["model"]
            for source in sources:
                columns += [f"{source}: {c}" for c in ("rating", "lower", "upper", "rank")]
            tables.append(
                Table(
                    name,
                    title,
                    tuple(columns),
                    tuple(rows_out),
                    note=_bootstrap_note(result, sources, kind),
                    groups=(("", 1), *((source, 4) for source in sources)),
                )
            )
        tables.append(
            Table(
                "rank-correlation",
                "Rank correlation between leaderboards (Bradley-Terry ratings)",
                (
                    "a",
                    "b",
                    "spearman rho",
                    "lower",
                    "upper",
                    "p",
                    "kendall tau",
                    "lower",
                    "upper",
                    "p",
                    "models",
                    "interval",
                    "p-value",
                ),
                tuple(
                    (
                        r.a,
                        r.b,
                        r.spearman.estimate,
                        r.spearman.lower,
                        r.spearman.upper,
                        r.spearman.p_value,
                        r.kendall.estimate,
                        r.kendall.lower,
                        r.kendall.upper,
                        r.kendall.p_value,
                        len(r.models),
                        r.kendall.interval,
                        r.kendall.p_method,
                    )
                    for r in result.rank_correlation
                ),
                note=(
                    f"Under {FEW_ITEMS} models there is no interval (Fisher's z needs a large "
                    "sample; a perfect ranking of 6 models would read [1, 1]) and the p-value is "
                    "exact: the share of the n! orderings of one board whose |correlation| is at "
                    "least the observed one."
                ),
            )
        )
        return tables

    def plots(self, result: LeaderboardsResult, context: RenderContext) -> list[Plot]:
        plots = []
        for source in context.sources:
            board = result.sources.get(source)
            rows = board.elo_with_ties if board else []
            if not rows:
                continue
            title = f"Elo with ties: {source}"
            ratings = [r.rating for r in rows]
            lows = [r.lower for r in rows if r.lower is not None]
            highs = [r.upper for r in rows if r.upper is not None]
            plots.append(
                Plot(
                    f"elo-{slugify(source)}",
                    title,
                    bar_chart_svg(
                        title=title,
                        categories=[r.model for r in rows],
                        series=[
                            Series(
                                name=source,
                                values=ratings,
                                lower=[r.lower for r in rows],
                                upper=[r.upper for r in rows],
                            )
                        ],
                        y_label="rating",
                        y_min=min([*ratings, *lows]) - 50,
                        y_max=max([*ratings, *highs]) + 50,
                    ),
                )
            )
        return plots


SECTION = LeaderboardsSection()
