"""Gold order: accuracy on first-vs-second and first-vs-last pairs, and NDCG of each source's
ranking of a prompt's answers against the gold order (AdvisorQA, Kim et al. 2024, Table 3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from core.conventions import GOLD_KINDS
from leaderboard.plots import Series, bar_chart_svg
from leaderboard.report.base import HUMAN, Plot, RenderContext, ReportData, Section, Table
from leaderboard.report.gold import ACCURACY_COLUMNS, Accuracy, accuracy_cells, accuracy_of
from leaderboard.selectors.section_reads import GOLD_ANSWERS, LENGTHS
from rankeval.ndcg import ndcg_at_k

if TYPE_CHECKING:
    import pandas as pd

NDCG_DEPTHS: tuple[int | None, ...] = (1, 3, None)
DEFINITION = (
    "Gold order of a prompt: its answers by rank (1 = best) when two or more carry a rank, else by "
    "upvotes (more = better), as gold pairs are chosen. first_vs_second: the pair of the first and "
    "second answers in that order, first_vs_last: of the first and last, when the first is "
    "strictly better; gold pairs count by their gold kind and side, any other pair of those two "
    "answers counts too. A vote is correct when it names the better answer. Ties, two rules, both "
    "shown: the accuracy counts a tie as wrong (strict), ties_half as half correct (the rule of "
    "AdvisorQA's Table 3 and of the advisorqa_table3 section, so the two agree on the same "
    "votes). People: every vote (votes) and each pair's majority label (majority). Intervals: "
    "a bootstrap over prompts (every vote or majority of a drawn prompt; interval unit: prompt), "
    "since votes on one prompt's pairs are not independent."
)
NDCG_DEFINITION = (
    "Per prompt with a gold order: the source ranks the answers it judged by their share of "
    "pairwise wins on that prompt (a tie is half a win), or by its answer scores when the run "
    "has them (a reward model). Relevance (linear gain) = n - p + 1 with n the answers in the gold "
    "order and p an answer's gold position (1 = best; tied measures share the better position). "
    "NDCG@k = DCG@k / IDCG@k with discount 1 / log2(i + 1); answers the source scores equally "
    "share the mean discount of the positions they span (McSherry & Najork 2008). Averaged over "
    "the prompts where the source ranks two or more answers."
)


@dataclass(frozen=True)
class AccuracyCell:
    votes: Accuracy
    majority: Accuracy | None = None  # people only


@dataclass(frozen=True)
class NdcgSource:
    ranking: str
    prompts: int
    at_1: float | None
    at_3: float | None
    at_all: float | None


@dataclass(frozen=True)
class Ndcg:
    definition: str
    depths: list[str]
    sources: dict[str, NdcgSource]


@dataclass(frozen=True)
class GoldOrderResult:
    definition: str
    kinds: list[str]
    prompts_with_order: int
    pairs: dict[str, int]
    accuracy: dict[str, dict[str, AccuracyCell]]
    ndcg: Ndcg


def gold_orders(answers: pd.DataFrame) -> dict[int, pd.DataFrame]:
    """Per prompt, its answers best first with a `measure` (smaller is better) and a `position`
    (1 + answers strictly better): by rank when two or more carry one, else by upvotes."""
    orders: dict[int, pd.DataFrame] = {}
    for _, group in answers.groupby("prompt_id", sort=True):
        ranked = group[group["rank"].notna()]
        if len(ranked) >= 2:
            chosen = ranked.assign(measure=ranked["rank"])
        else:
            voted = group[group["upvotes"].notna()]
            chosen = voted.assign(measure=-voted["upvotes"])
        if len(chosen) < 2:
            continue
        chosen = chosen.sort_values(["measure", "answer_id"], kind="stable").reset_index(drop=True)
        chosen["position"] = chosen["measure"].rank(method="min").astype(int)
        orders[int(group["prompt_id"].iloc[0])] = chosen
    return orders


def gold_pair_kinds(
    *, pairs: pd.DataFrame, lengths: pd.DataFrame, orders: dict[int, pd.DataFrame]
) -> pd.DataFrame:
    """The pairs that compare the first answer with the second or the last: pair_id, kind, side
    (the better side, A or B)."""
    import pandas as pd

    answers_of = lengths.set_index("pair_id")[["answer_a_id", "answer_b_id"]]
    sides: dict[tuple[int, str], str] = {}
    # Only gold pairs and pairs of prompts with an order can compare first with second or last.
    wanted = pairs["is_gold"].astype(bool) | pairs["prompt_id"].isin(list(orders))
    for pair in pairs[wanted].to_dict("records"):
        if pair["is_gold"] and pair["gold_kind"] in GOLD_KINDS and pair["gold_side"] in ("A", "B"):
            sides[(int(pair["pair_id"]), str(pair["gold_kind"]))] = str(pair["gold_side"])
        order = orders.get(int(pair["prompt_id"]))
        if order is None or pair["pair_id"] not in answers_of.index:
            continue
        a, b = answers_of.loc[pair["pair_id"]]
        ids, measure = order["answer_id"].tolist(), order["measure"].tolist()
        for kind, other in (("first_vs_second", 1), ("first_vs_last", len(ids) - 1)):
            if measure[0] < measure[other] and {a, b} == {ids[0], ids[other]}:
                # A gold pair's own kind and side win over the ranks if the two ever differ.
                sides.setdefault((int(pair["pair_id"]), kind), "A" if a == ids[0] else "B")
    rows = sorted((pair_id, kind, side) for (pair_id, kind), side in sides.items())
    return pd.DataFrame(rows, columns=["pair_id", "kind", "side"])


def _depth_key(k: int | None) -> str:
    return "at_all" if k is None else f"at_{k}"


def _win_shares(frame: pd.DataFrame, lengths: pd.DataFrame, prompt_of: pd.Series) -> pd.Series:
    """Share of pairwise wins of each answer (a tie is half), indexed by (prompt_id, answer_id),
    over the votes on the pairs in `prompt_of`."""
    import pandas as pd

    frame = frame[frame["pair_id"].isin(prompt_of.index)]
    if frame.empty:
        return pd.Series(dtype=float, index=pd.MultiIndex.from_arrays([[], []]))
    ends = lengths.set_index("pair_id")[["answer_a_id", "answer_b_id"]]
    joined = frame[["pair_id", "label"]].join(ends, on="pair_id", how="inner")
    score_a = joined["label"].map({"A": 1.0, "B": 0.0, "tie": 0.5}).to_numpy()
    prompts = prompt_of.reindex(joined["pair_id"]).to_numpy()
    long = pd.DataFrame(
        {
            "prompt_id": np.concatenate([prompts, prompts]),
            "answer_id": np.concatenate(
                [joined["answer_a_id"].to_numpy(), joined["answer_b_id"].to_numpy()]
            ),
            "win": np.concatenate([score_a, 1.0 - score_a]),
        }
    )
    return long.groupby(["prompt_id", "answer_id"])["win"].mean()


def _ndcg_source(scores: pd.Series, orders: dict[int, pd.DataFrame], ranking: str) -> NdcgSource:
    """Mean NDCG over the prompts where `scores` (indexed by prompt_id, answer_id) rank two or
    more answers of the gold order."""
    per_depth: dict[str, list[float]] = {_depth_key(k): [] for k in NDCG_DEPTHS}
    # Keyed by each group's prompt id, the first level of its index.
    by_prompt = {
        int(group.index[0][0]): group.droplevel(0)
        for _, group in scores.groupby(level=0, sort=True)
    }
    for prompt_id, order in orders.items():
        n = len(order)
        gains = (n - order["position"] + 1).to_numpy(dtype=np.float64)
        mine = by_prompt.get(prompt_id)
        if mine is None:
            continue
        known = order["answer_id"].isin(mine.index).to_numpy()
        if known.sum() < 2:
            continue
        ranked = mine.reindex(order["answer_id"][known]).to_numpy()
        for k in NDCG_DEPTHS:
            per_depth[_depth_key(k)].append(ndcg_at_k(ranked, gains[known], k))
    prompts = len(per_depth[_depth_key(None)])
    means = {key: (float(np.mean(vals)) if vals else None) for key, vals in per_depth.items()}
    return NdcgSource(ranking, prompts, means["at_1"], means["at_3"], means["at_all"])


def gold_order_compute(data: ReportData) -> GoldOrderResult:
    """Accuracy on first-vs-second and first-vs-last pairs, and NDCG of each source's ranking of
    a prompt's answers against the gold order (AdvisorQA, Kim et al. 2024, Table 3)."""
    import pandas as pd

    votes, gold, lengths = data.votes, data.read(GOLD_ANSWERS), data.read(LENGTHS).frame
    orders = gold_orders(gold.answers)
    kinds = gold_pair_kinds(pairs=votes.pairs, lengths=lengths, orders=orders)
    frames, majority = data.frames, data.majority
    accuracy: dict[str, dict[str, AccuracyCell]] = {}
    for name, frame in frames.items():
        accuracy[name] = {}
        for kind in GOLD_KINDS:
            side_of = kinds[kinds["kind"] == kind].set_index("pair_id")["side"]
            mine = frame.iloc[:0] if side_of.empty else frame[frame["pair_id"].isin(side_of.index)]
            on_votes = accuracy_of(
                data,
                mine["label"].to_numpy(dtype=object),
                side_of.reindex(mine["pair_id"]).to_numpy(dtype=object),
                mine["pair_id"].to_numpy(dtype=np.int64),
                "vote",
            )
            on_majority = None
            if name == HUMAN:
                held = majority.index.intersection(side_of.index)
                on_majority = accuracy_of(
                    data,
                    majority.loc[held].to_numpy(dtype=object),
                    side_of.loc[held].to_numpy(dtype=object),
                    held.to_numpy(dtype=np.int64),
                    "pair majority",
                )
            accuracy[name][kind] = AccuracyCell(on_votes, on_majority)
    prompt_of = votes.pairs.set_index("pair_id")["prompt_id"]
    prompt_of = prompt_of[prompt_of.isin(list(orders))]
    answer_prompt = gold.answers.set_index("answer_id")["prompt_id"]
    ndcg: dict[str, NdcgSource] = {}
    run_of = {s.name: s.run_id for s in votes.sources}
    for name, frame in frames.items():
        own = gold.scores[gold.scores["run_id"] == run_of.get(name, -1)]
        if not own.empty:
            scores = pd.Series(
                own["score"].to_numpy(dtype=np.float64),
                index=pd.MultiIndex.from_arrays(
                    [answer_prompt.reindex(own["answer_id"]).to_numpy(), own["answer_id"]],
                    names=["prompt_id", "answer_id"],
                ),
            )
            ndcg[name] = _ndcg_source(scores, orders, "answer scores")
        else:
            shares = _win_shares(frame, lengths, prompt_of)
            ndcg[name] = _ndcg_source(shares, orders, "pairwise wins")
    return GoldOrderResult(
        definition=DEFINITION,
        kinds=list(GOLD_KINDS),
        prompts_with_order=len(orders),
        pairs={kind: int((kinds["kind"] == kind).sum()) for kind in GOLD_KINDS},
        accuracy=accuracy,
        ndcg=Ndcg(NDCG_DEFINITION, [_depth_key(k) for k in NDCG_DEPTHS], ndcg),
    )


class GoldOrderSection(Section[GoldOrderResult]):
    key = "gold_order"
    title = "Gold order and NDCG"
    definition = (
        "Accuracy against the known order of a prompt's answers (first vs second, first vs last) "
        "and NDCG of each source's ranking of the answers."
    )
    result_type = GoldOrderResult
    reads = (
        GOLD_ANSWERS,
        LENGTHS,
    )

    def compute(self, data: ReportData) -> GoldOrderResult:
        return gold_order_compute(data)

    def tables(self, result: GoldOrderResult, context: RenderContext) -> list[Table]:
        rows: list[tuple[Any, ...]] = []
        for source in context.sources:
            for kind in result.kinds:
                cell = result.accuracy[source][kind]
                for level, acc in (("votes", cell.votes), ("majority", cell.majority)):
                    if acc is None:
                        continue
                    rows.append((source, kind, level, *accuracy_cells(acc)))
        ndcg_rows = []
        for source in context.sources:
            entry = result.ndcg.sources[source]
            if entry.prompts:
                ndcg_rows.append(
                    (source, entry.ranking, entry.prompts, entry.at_1, entry.at_3, entry.at_all)
                )
        has_pairs = any(result.pairs.values())
        return [
            Table(
                "gold-order-accuracy",
                "Accuracy against the gold order (first vs second, first vs last)",
                ("source", "pairs", "level", *ACCURACY_COLUMNS),
                tuple(rows) if has_pairs else (),
                note=result.definition,
            ),
            Table(
                "ndcg",
                "NDCG of each source's ranking of a prompt's answers against the gold order",
                ("source", "ranking from", "prompts", "NDCG@1", "NDCG@3", "NDCG@all"),
                tuple(ndcg_rows),
                note=result.ndcg.definition,
            ),
        ]

    def plots(self, result: GoldOrderResult, context: RenderContext) -> list[Plot]:
        if not any(result.pairs.values()):
            return []
        title = "Accuracy against the gold order (votes; strict: a tie is wrong)"
        series = []
        for source in context.sources:
            cells = [result.accuracy[source][k].votes for k in result.kinds]
            series.append(
                Series(
                    name=source,
                    values=[c.share for c in cells],
                    lower=[c.lower for c in cells],
                    upper=[c.upper for c in cells],
                )
            )
        return [
            Plot(
                "gold-order-accuracy",
                title,
                bar_chart_svg(
                    title=title,
                    categories=result.kinds,
                    series=series,
                    y_label="accuracy",
                    y_min=0.0,
                    y_max=1.0,
                ),
            )
        ]


SECTION = GoldOrderSection()
