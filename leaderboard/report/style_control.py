"""Rankings that control for style: each source's length-controlled win rates against a baseline
(AlpacaEval 2.0) and its style-controlled Bradley-Terry ratings with the style coefficients
(LMArena), beside the plain ones (leaderboard.stats.style_control)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from django.utils.text import slugify

from leaderboard.lookup import positions_of
from leaderboard.plots import Series, bar_chart_svg
from leaderboard.report.base import (
    BT_PROMPT_DRAWS_BUDGET,
    Plot,
    RenderContext,
    ReportData,
    Section,
    Table,
    rounds_within,
)
from leaderboard.selectors.section_reads import LENGTHS, STYLES
from leaderboard.stats.style_control import (
    ELO_SCALE,
    STYLE_FEATURES,
    Estimate,
    contextual_bradley_terry,
    length_controlled_win_rate,
    style_differences,
)

if TYPE_CHECKING:
    import pandas as pd

NO_TEXTS = "no answer texts"
OUTCOME = {"A": 1.0, "B": 0.0, "tie": 0.5}
DEFINITION = (
    "Length-controlled win rate (AlpacaEval 2.0, Dubois et al. 2024): per model, the votes on "
    "its pairs with the baseline fitted as P(model preferred) = sigmoid(theta + phi * "
    "tanh((len_model - len_baseline) / sd)), lengths in characters of the judged turn, sd over "
    "those votes, a tie y = 0.5; the win rate read at equal length, sigmoid(theta), beside the "
    "raw one (mean score, a tie half a win); phi > 0: longer answers preferred. Style-controlled "
    "ratings (LMArena style control): Bradley-Terry with the standardised normalised "
    "differences (a - b) / (a + b) of words, markdown headers, list items and bold spans, "
    "P(A beats B) = sigmoid(r_A - r_B + f . beta), ratings on the Elo scale (mean 1000) with the "
    "style terms at zero, beside the same fit without them on the same votes; a coefficient is "
    "logits per standard deviation of its feature (positive: more of it is preferred). "
    "Intervals (95%) over prompts: the win rates' by bootstrap (one Newton step per round), the "
    "ratings' and coefficients' by the cluster-robust sandwich."
)
NO_TEXTS_NOTE = (
    "No answer texts: the answers in this selection have no text at the judged turn (imported "
    "labels only), so lengths and markdown cannot be measured."
)


@dataclass(frozen=True)
class LengthControlledRow:
    model: str
    votes: int
    prompts: int
    win_rate: Estimate
    length_controlled: Estimate
    length_coefficient: Estimate | None


@dataclass(frozen=True)
class SourceLengthControlled:
    rounds: int
    models: list[LengthControlledRow]


@dataclass(frozen=True)
class StyleBoard:
    """One source's ratings with and without the style terms, on the same votes."""

    battles: int
    clusters: int
    plain: dict[str, Estimate]
    controlled: dict[str, Estimate]
    coefficients: dict[str, Estimate]


@dataclass(frozen=True)
class StyleControlResult:
    has_answer_texts: bool
    status: str | None
    baseline: str | None
    baseline_source: str  # "parameter", "most pairs", or "" without a baseline
    definition: str
    resample: str
    length_controlled: dict[str, SourceLengthControlled | None]
    style: dict[str, StyleBoard | None]


def baseline_pick(pairs: pd.DataFrame, asked: str) -> tuple[str | None, str, str | None]:
    """The baseline system: the one asked for, else the system in the most pairs (ties: the
    first by name). Returns (baseline, how it was chosen, a status when there is none)."""
    counts: dict[str, int] = {}
    for column in ("system_a", "system_b"):
        for name, n in pairs[column].value_counts().items():
            counts[str(name)] = counts.get(str(name), 0) + int(n)
    if asked:
        if asked not in counts:
            return None, "parameter", f"baseline {asked!r} is in no pair of this selection"
        return asked, "parameter", None
    if not counts:
        return None, "", "no pairs"
    best = max(counts.values())
    return min(str(name) for name, n in counts.items() if n == best), "most pairs", None


@dataclass(frozen=True)
class _Votes:
    """One source's votes as numbers: model codes (into ``models``), the score of A (1, 0.5,
    0), the pair's position in the study's pairs and its prompt's cluster code."""

    a: npt.NDArray[np.int64]
    b: npt.NDArray[np.int64]
    score_a: npt.NDArray[np.float64]
    pair_at: npt.NDArray[np.intp]
    cluster: npt.NDArray[np.int64]


def _codes(values: pd.Series, categories: list[str]) -> npt.NDArray[np.int64]:
    """Positions of the values in ``categories`` (-1 outside), without a string per row when
    the column is already categorical."""
    import pandas as pd

    return np.asarray(pd.Categorical(values, categories=categories).codes, dtype=np.int64)


@dataclass(frozen=True)
class _Pairs:
    """The study's pairs by position (sorted by id): their systems' codes and prompt codes."""

    ids: npt.NDArray[np.int64]
    a: npt.NDArray[np.int64]
    b: npt.NDArray[np.int64]
    prompt: npt.NDArray[np.int64]


def _votes(frame: pd.DataFrame, pairs: _Pairs, data: ReportData) -> _Votes:
    """A vote's systems are its pair's (the frames carry the pair's canonical A and B)."""
    label = _codes(frame["label"], list(OUTCOME))
    wanted = frame["pair_id"].to_numpy(dtype=np.int64)
    pair_at = np.minimum(np.searchsorted(pairs.ids, wanted), max(len(pairs.ids) - 1, 0))
    known = pairs.ids[pair_at] == wanted if len(pairs.ids) else np.zeros(len(wanted), bool)
    a, b = pairs.a[pair_at], pairs.b[pair_at]
    keep = known & (label >= 0) & (a >= 0) & (b >= 0) & (a != b)
    pair_at = pair_at[keep]
    if data.params.resample == "prompt":
        cluster = pairs.prompt[pair_at]
    else:
        cluster = np.arange(int(keep.sum()))
    scores = np.array(list(OUTCOME.values()))
    return _Votes(a[keep], b[keep], scores[label[keep]], pair_at, cluster)


def _length_controlled(
    votes: _Votes,
    models: list[str],
    lengths: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]],
    baseline: str,
    data: ReportData,
) -> SourceLengthControlled:
    base = models.index(baseline)
    len_a, len_b = lengths[0][votes.pair_at], lengths[1][votes.pair_at]
    keep = ((votes.a == base) ^ (votes.b == base)) & (len_a > 0) & (len_b > 0)
    model_is_a = votes.b[keep] == base
    model = np.where(model_is_a, votes.a[keep], votes.b[keep])
    score_a = votes.score_a[keep]
    outcome = np.where(model_is_a, score_a, 1.0 - score_a)
    len_model = np.where(model_is_a, len_a[keep], len_b[keep])
    len_base = np.where(model_is_a, len_b[keep], len_a[keep])
    clusters = votes.cluster[keep]
    prompts = len(np.unique(clusters))
    rounds = rounds_within(data.params.ci_rounds, prompts, BT_PROMPT_DRAWS_BUDGET)
    rows = []
    for code in np.unique(model).tolist():
        mine = model == code
        got = length_controlled_win_rate(
            outcome[mine],
            len_model[mine],
            len_base[mine],
            clusters[mine],
            rounds=rounds,
            seed=data.params.seed,
            confidence=data.params.confidence,
        )
        rows.append(
            LengthControlledRow(
                models[code],
                got.votes,
                got.prompts,
                got.win_rate,
                got.length_controlled,
                got.length_coefficient,
            )
        )
    return SourceLengthControlled(rounds, rows)


def _style_board(
    votes: _Votes,
    models: list[str],
    counts: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]],
    data: ReportData,
) -> StyleBoard | None:
    first, second = counts[0][votes.pair_at], counts[1][votes.pair_at]
    keep = (first[:, 0] > 0) & (second[:, 0] > 0)  # both answers have words at the turn
    if not keep.any():
        return None
    # One row per (pair, outcome) with its count: votes on one pair share its features.
    key = votes.pair_at[keep].astype(np.int64) * 3 + np.rint(votes.score_a[keep] * 2).astype(
        np.int64
    )
    _, first_at, count = np.unique(key, return_index=True, return_counts=True)
    rows = np.flatnonzero(keep)[first_at]
    features = style_differences(first[rows], second[rows])
    clusters = votes.cluster[rows] if data.params.resample == "prompt" else None
    common: dict[str, Any] = {
        "clusters": clusters,
        "counts": count.astype(np.float64),
        "models": models,
        "confidence": data.params.confidence,
    }
    a, b, outcome = votes.a[rows], votes.b[rows], votes.score_a[rows]
    controlled = contextual_bradley_terry(
        a, b, outcome, features, feature_names=STYLE_FEATURES, **common
    )
    if all(np.isnan(c.value) for c in controlled.coefficients.values()):
        plain = controlled  # no style feature varies: the two fits are one
    else:
        plain = contextual_bradley_terry(
            a, b, outcome, np.zeros((len(rows), 0)), feature_names=(), **common
        )
    shown = set(np.unique(np.concatenate([a, b])).tolist())
    return StyleBoard(
        controlled.battles,
        controlled.clusters,
        {m: r for i, m in enumerate(models) if i in shown for r in [plain.ratings[m]]},
        {m: r for i, m in enumerate(models) if i in shown for r in [controlled.ratings[m]]},
        controlled.coefficients,
    )


def style_control_compute(data: ReportData) -> StyleControlResult:
    """Per source: length-controlled win rates against the baseline and style-controlled
    ratings with the style coefficients."""
    import pandas as pd

    pairs = data.votes.pairs.sort_values("pair_id", kind="stable")
    pair_ids = pairs["pair_id"].to_numpy(dtype=np.int64)
    models = sorted(
        {str(m) for column in ("system_a", "system_b") for m in pd.unique(pairs[column])}
    )
    coded = _Pairs(
        pair_ids,
        _codes(pairs["system_a"], models),
        _codes(pairs["system_b"], models),
        pd.factorize(pairs["prompt_id"].to_numpy())[0].astype(np.int64),
    )
    lengths = data.read(LENGTHS).frame
    has_texts = bool(((lengths["len_a"] > 0) & (lengths["len_b"] > 0)).any())
    baseline, chosen, status = baseline_pick(pairs, data.params.baseline)
    if not has_texts:
        status = NO_TEXTS
    # Each pair's lengths and style counts by its position among the pairs (0: none read).
    at = positions_of(pair_ids, lengths["pair_id"].to_numpy(dtype=np.int64), "pair")
    side_lengths = []
    for side in ("a", "b"):
        column = np.zeros(len(pair_ids))
        column[at] = np.nan_to_num(lengths[f"len_{side}"].to_numpy(dtype=np.float64))
        side_lengths.append(column)
    styles = data.read(STYLES).frame
    at = positions_of(pair_ids, styles["pair_id"].to_numpy(dtype=np.int64), "pair")
    side_counts = []
    for side in ("a", "b"):
        table = np.zeros((len(pair_ids), len(STYLE_FEATURES)))
        columns = [f"{f}_{side}" for f in STYLE_FEATURES]
        table[at] = np.nan_to_num(styles[columns].to_numpy(dtype=np.float64))
        side_counts.append(table)
    lc: dict[str, SourceLengthControlled | None] = {}
    style: dict[str, StyleBoard | None] = {}
    for name, frame in data.frames.items():
        votes = _votes(frame, coded, data) if has_texts else None
        lc[name] = (
            _length_controlled(votes, models, (side_lengths[0], side_lengths[1]), baseline, data)
            if votes is not None and baseline is not None
            else None
        )
        style[name] = (
            _style_board(votes, models, (side_counts[0], side_counts[1]), data)
            if votes is not None
            else None
        )
    return StyleControlResult(
        has_answer_texts=has_texts,
        status=status,
        baseline=baseline,
        baseline_source=chosen,
        definition=DEFINITION,
        resample=data.params.resample,
        length_controlled=lc,
        style=style,
    )


def _ends(value: Estimate | None) -> list[Any]:
    if value is None:
        return [None, None, None]
    return [value.value, value.lower, value.upper]


def _ranks(ratings: dict[str, Estimate]) -> dict[str, int]:
    order = sorted(ratings, key=lambda m: (-ratings[m].value, m))
    return {m: i for i, m in enumerate(order, 1)}


class StyleControlSection(Section[StyleControlResult]):
    key = "style_control"
    title = "Rankings that control for style"
    definition = (
        "Each source's win rates against a baseline with the length difference controlled "
        "(AlpacaEval 2.0) and its Bradley-Terry ratings with length and markdown controlled "
        "(LMArena style control), beside the plain ones, with how strongly each style feature "
        "sways the source."
    )
    result_type = StyleControlResult
    reads = (
        LENGTHS,
        STYLES,
    )
    # Mostly numpy's sorts and BLAS, which release Python's lock: computed beside the
    # leaderboards' Elo kernel rather than after the other sections.
    releases_gil = True

    def compute(self, data: ReportData) -> StyleControlResult:
        return style_control_compute(data)

    def tables(self, result: StyleControlResult, context: RenderContext) -> list[Table]:
        note = result.definition if result.has_answer_texts else NO_TEXTS_NOTE
        unit = "prompts" if result.resample == "prompt" else "votes"
        lc_rows: list[tuple[Any, ...]] = []
        for source in context.sources:
            entry = result.length_controlled.get(source)
            if entry is None:
                lc_rows.append((source, result.status or "no votes", *([None] * 12)))
                continue
            for row in entry.models:
                lc_rows.append(
                    (
                        source,
                        "",
                        row.model,
                        row.votes,
                        row.prompts,
                        *_ends(row.win_rate),
                        *_ends(row.length_controlled),
                        *_ends(row.length_coefficient),
                    )
                )
        baseline = (
            f"Baseline: {result.baseline} ({result.baseline_source}). " if result.baseline else ""
        )
        rounds = {
            s: e.rounds for s, e in result.length_controlled.items() if e is not None and e.rounds
        }
        boot = (
            "Win-rate intervals: "
            + "; ".join(f"{s}: {n} rounds over {unit}" for s, n in rounds.items())
            + ". "
            if rounds
            else ""
        )
        tables = [
            Table(
                "length-controlled",
                "Length-controlled win rates against the baseline",
                (
                    "source",
                    "status",
                    "model",
                    "votes",
                    "prompts",
                    "win rate",
                    "lower",
                    "upper",
                    "length-controlled win rate",
                    "lc lower",
                    "lc upper",
                    "length weight phi",
                    "phi lower",
                    "phi upper",
                ),
                tuple(lc_rows),
                note=baseline + boot + note,
            )
        ]
        board_rows: list[tuple[Any, ...]] = []
        coefficient_rows: list[tuple[Any, ...]] = []
        human = result.style.get("human")
        for source in context.sources:
            board = result.style.get(source)
            if board is None:
                continue
            plain_rank, styled_rank = _ranks(board.plain), _ranks(board.controlled)
            for model in sorted(board.controlled, key=lambda m: styled_rank[m]):
                board_rows.append(
                    (
                        source,
                        model,
                        *_ends(board.plain.get(model)),
                        plain_rank.get(model),
                        *_ends(board.controlled[model]),
                        styled_rank[model],
                    )
                )
            for feature in STYLE_FEATURES:
                coefficient = board.coefficients[feature]
                people = human.coefficients.get(feature) if human is not None else None
                ratio = (
                    coefficient.value / people.value
                    if people is not None and people.value != 0
                    else None
                )
                coefficient_rows.append(
                    (
                        source,
                        feature,
                        *_ends(coefficient),
                        coefficient.value * ELO_SCALE,
                        ratio,
                        board.battles,
                        board.clusters,
                    )
                )
        clusters = "prompts" if result.resample == "prompt" else "votes"
        tables.append(
            Table(
                "style-controlled",
                "Style-controlled Bradley-Terry ratings beside the plain ones",
                (
                    "source",
                    "model",
                    "plain rating",
                    "plain lower",
                    "plain upper",
                    "plain rank",
                    "style-controlled rating",
                    "lower",
                    "upper",
                    "style-controlled rank",
                ),
                tuple(board_rows),
                note=(
                    "Both fits on the same votes (those on pairs whose answers have text); "
                    f"95% intervals from the sandwich summed over {clusters}. " + note
                    if board_rows
                    else note
                ),
            )
        )
        tables.append(
            Table(
                "style-coefficients",
                "How much each style feature sways each source",
                (
                    "source",
                    "feature",
                    "coefficient",
                    "lower",
                    "upper",
                    "Elo points per SD",
                    "over people's",
                    "votes",
                    "clusters",
                ),
                tuple(coefficient_rows),
                note=(
                    "Coefficient: logits per standard deviation of the feature's normalised "
                    "difference (a - b) / (a + b); 'over people's' divides it by the people's "
                    "coefficient of the same feature (how much of the judge's preference is "
                    "that feature, compared with people's). Features: words, markdown headers, "
                    "list items, bold spans."
                ),
            )
        )
        return tables

    def plots(self, result: StyleControlResult, context: RenderContext) -> list[Plot]:
        plots = []
        for source in context.sources:
            entry = result.length_controlled.get(source)
            if entry is None or not entry.models:
                continue
            title = f"Win rate against {result.baseline}, raw and length-controlled: {source}"
            plots.append(
                Plot(
                    f"length-controlled-{slugify(source)}",
                    title,
                    bar_chart_svg(
                        title=title,
                        categories=[r.model for r in entry.models],
                        series=[
                            Series(
                                name="win rate",
                                values=[r.win_rate.value for r in entry.models],
                                lower=[r.win_rate.lower for r in entry.models],
                                upper=[r.win_rate.upper for r in entry.models],
                            ),
                            Series(
                                name="length-controlled",
                                values=[r.length_controlled.value for r in entry.models],
                                lower=[r.length_controlled.lower for r in entry.models],
                                upper=[r.length_controlled.upper for r in entry.models],
                            ),
                        ],
                        y_label="win rate",
                        y_min=0.0,
                        y_max=1.0,
                    ),
                )
            )
        boards = [(s, result.style.get(s)) for s in context.sources]
        shown = [(s, b) for s, b in boards if b is not None]
        if shown:
            title = "Style coefficients (logits per SD), people and judges"
            plots.append(
                Plot(
                    "style-coefficients",
                    title,
                    bar_chart_svg(
                        title=title,
                        categories=list(STYLE_FEATURES),
                        series=[
                            Series(
                                name=source,
                                values=[board.coefficients[f].value for f in STYLE_FEATURES],
                                lower=[board.coefficients[f].lower for f in STYLE_FEATURES],
                                upper=[board.coefficients[f].upper for f in STYLE_FEATURES],
                            )
                            for source, board in shown
                        ],
                        y_label="coefficient",
                    ),
                )
            )
        return plots


SECTION = StyleControlSection()
