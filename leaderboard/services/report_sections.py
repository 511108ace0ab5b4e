"""The report's later sections: length bias, rationales, the gold order (accuracy and NDCG) and
win-rate matrices, computed from the vote frames and the extra rows (no database access)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from annotation.models import SEVEN_VALUE_KEYS
from leaderboard.section_selectors import ReportExtras
from leaderboard.selectors import StudyVotes, rows_of_run
from leaderboard.stats.bias import length_bias
from leaderboard.stats.correlation import correlation
from leaderboard.stats.proportion import wilson_interval
from leaderboard.stats.rationale import SEVEN_VALUES, rationale_distribution

HUMAN = "human"
LABELS = ("A", "B", "tie")
GOLD_KINDS = ("first_vs_second", "first_vs_last")
NDCG_DEPTHS: tuple[int | None, ...] = (1, 3, None)
NO_TEXTS = "no answer texts"
LENGTH_DEFINITION = (
    "Length of an answer: characters of its text at the judged turn. prefers_longer: among votes "
    "on pairs where both answers have text and differ in length, and that are not ties, the share "
    "naming the longer answer (Wilson interval). correlation_preference: Spearman between "
    "len(B) - len(A) and the vote (A = -1, tie = 0, B = +1), ties included; correlation_likert: "
    "Spearman between len(B) - len(A) and the canonical Likert score (8 = B much better). "
    "Positive means longer answers are preferred."
)
RATIONALE_DEFINITION = (
    "Judgments that cite at least one of the seven values; count = judgments citing the value, "
    "share = count / judgments, share_of_mentions = count / all citations. Judge disagreement: "
    "for judges X and Y, the pairs where their votes differ and the people's majority (a unique "
    "most common label, A or B) equals X's vote; the values are those cited by the people who "
    "voted with the majority."
)
GOLD_DEFINITION = (
    "Gold order of a prompt: its answers by rank (1 = best) when two or more carry a rank, else by "
    "upvotes (more = better), as gold pairs are chosen. first_vs_second: the pair of the first and "
    "second answers in that order, first_vs_last: of the first and last, when the first is "
    "strictly better; gold pairs count by their gold kind and side, any other pair of those two "
    "answers counts too. A vote is correct when it names the better answer; a tie is never "
    "correct. People: every vote (votes) and each pair's majority label (majority)."
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


def _votes_by_source(votes: StudyVotes) -> dict[str, pd.DataFrame]:
    frames = {HUMAN: votes.human}
    for source in votes.sources:
        frames[source.name] = rows_of_run(votes.judges, source.run_id)
    return frames


# --- length bias ------------------------------------------------------------------------------


def _length_source(frame: pd.DataFrame, lengths: pd.DataFrame, confidence: float) -> dict[str, Any]:
    merged = frame[["pair_id", "label", "likert"]].merge(
        lengths[["pair_id", "len_a", "len_b"]], on="pair_id", how="inner"
    )
    merged = merged[(merged["len_a"] > 0) & (merged["len_b"] > 0)]
    bias = length_bias(
        merged["len_a"].to_numpy(),
        merged["len_b"].to_numpy(),
        merged["label"],
        confidence=confidence,
    )
    diff = (merged["len_b"] - merged["len_a"]).to_numpy(dtype=np.float64)
    likert = merged["likert"].astype("float64").to_numpy()
    return {
        "votes": len(merged),
        "ties": int((merged["label"] == "tie").sum()),
        "prefers_longer": bias.prefers_longer,
        "correlation_preference": bias.correlation,
        "correlation_likert": correlation(diff, likert, "spearman", confidence=confidence),
    }


def length_bias_section(
    *,
    votes: StudyVotes,
    extras: ReportExtras,
    confidence: float,
    frames: Mapping[str, pd.DataFrame] | None = None,
) -> dict[str, Any]:
    """Per source: share preferring the longer answer and correlation with the length gap."""
    lengths = extras.lengths
    with_text = lengths[(lengths["len_a"] > 0) & (lengths["len_b"] > 0)]
    has_texts = not with_text.empty
    sources: dict[str, Any] = {}
    for name, frame in (frames or _votes_by_source(votes)).items():
        sources[name] = _length_source(frame, with_text, confidence) if has_texts else None
    return {
        "has_answer_texts": has_texts,
        "status": None if has_texts else NO_TEXTS,
        "pairs_with_texts": len(with_text),
        "definition": LENGTH_DEFINITION,
        "sources": sources,
    }


# --- rationales -------------------------------------------------------------------------------


def _distribution(selections: Iterable[Sequence[str]]) -> dict[str, Any]:
    kept: list[list[str]] = []
    unknown = 0
    for selection in selections:
        known = [v for v in selection if v in SEVEN_VALUE_KEYS]
        unknown += len(set(selection)) - len(set(known))
        kept.append(known)
    table = rationale_distribution(kept)
    return {
        "judgments": len(kept),
        "unknown_mentions": unknown,
        "values": [
            {
                "value": row.value,
                "count": int(row.count),
                "share": row.share,
                "share_of_mentions": row.share_of_mentions,
            }
            for row in table.itertuples(index=False)
        ],
    }


def people_majority(human: pd.DataFrame) -> pd.Series:
    """Each pair's majority label: the unique most common of A, B, tie; a tied count is a tie.

    Indexed by pair_id (sorted); counted from label codes per pair rather than by a group-by.
    """
    if human.empty:
        return pd.Series(dtype=object)
    codes = pd.Categorical(human["label"], categories=LABELS).codes.astype(np.int64)
    pair_codes, pairs = pd.factorize(human["pair_id"], sort=True)
    known = codes >= 0
    values = np.bincount(pair_codes[known] * 3 + codes[known], minlength=3 * len(pairs)).reshape(
        len(pairs), 3
    )
    top = values.max(axis=1, keepdims=True)
    unique = (values == top).sum(axis=1) == 1
    labels = np.where(unique, np.array(LABELS, dtype=object)[values.argmax(axis=1)], "tie")
    return pd.Series(labels, index=pd.Index(pairs, name="pair_id"), dtype=object)


def rationale_section(
    *,
    votes: StudyVotes,
    extras: ReportExtras,
    frames: Mapping[str, pd.DataFrame] | None = None,
    majority: pd.Series | None = None,
) -> dict[str, Any]:
    """How often each of the seven values is cited: overall, by category, and on the pairs where
    two judges disagree and the people side with one (AdvisorQA, Kim et al. 2024, Fig. 4)."""
    values = extras.values
    category_of = votes.pairs.set_index("pair_id")["category"]
    values = values[values["pair_id"].isin(category_of.index)]
    by_category = []
    if not values.empty:
        categories = category_of.reindex(values["pair_id"]).to_numpy()
        for category in sorted(set(categories.tolist())):
            mine = values[categories == category]
            by_category.append({"category": category, **_distribution(mine["values"])})
    majority = people_majority(votes.human) if majority is None else majority
    frames = frames or _votes_by_source(votes)
    judge_votes = {s.name: frames[s.name].set_index("pair_id")["label"] for s in votes.sources}
    # A run without votes (a reward model's scores only) cannot disagree with anyone.
    judge_votes = {name: labels for name, labels in judge_votes.items() if len(labels)}
    disagreement = []
    for x, y in itertools.permutations(sorted(judge_votes), 2):
        vx, vy = judge_votes[x], judge_votes[y]
        both = vx.index.intersection(vy.index).intersection(majority.index)
        side = majority.loc[both]
        chosen = both[
            (
                (vx.loc[both] != vy.loc[both]) & (side == vx.loc[both]) & side.isin(["A", "B"])
            ).to_numpy()
        ]
        wanted = majority.loc[chosen]
        mine = values[values["pair_id"].isin(chosen)]
        mine = mine[mine["label"].to_numpy() == wanted.reindex(mine["pair_id"]).to_numpy()]
        disagreement.append(
            {"with": x, "against": y, "pairs": len(chosen), **_distribution(mine["values"])}
        )
    return {
        "definition": RATIONALE_DEFINITION,
        "value_keys": list(SEVEN_VALUES),
        "overall": _distribution(values["values"]),
        "by_category": by_category,
        "judge_disagreement": disagreement,
    }


# --- gold order -------------------------------------------------------------------------------


def gold_orders(answers: pd.DataFrame) -> dict[int, pd.DataFrame]:
    """Per prompt, its answers best first with a `measure` (smaller is better) and a `position`
    (1 + answers strictly better): by rank when two or more carry one, else by upvotes."""
    orders: dict[int, pd.DataFrame] = {}
    for prompt_id, group in answers.groupby("prompt_id", sort=True):
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
        orders[int(prompt_id)] = chosen
    return orders


def gold_pair_kinds(
    *, pairs: pd.DataFrame, lengths: pd.DataFrame, orders: dict[int, pd.DataFrame]
) -> pd.DataFrame:
    """The pairs that compare the first answer with the second or the last: pair_id, kind, side
    (the better side, A or B)."""
    answers_of = lengths.set_index("pair_id")[["answer_a_id", "answer_b_id"]]
    sides: dict[tuple[int, str], str] = {}
    # Only gold pairs and pairs of prompts with an order can compare first with second or last.
    wanted = pairs["is_gold"].astype(bool) | pairs["prompt_id"].isin(list(orders))
    for pair in pairs[wanted].itertuples(index=False):
        if pair.is_gold and pair.gold_kind in GOLD_KINDS and pair.gold_side in ("A", "B"):
            sides[(int(pair.pair_id), str(pair.gold_kind))] = str(pair.gold_side)
        order = orders.get(int(pair.prompt_id))
        if order is None or pair.pair_id not in answers_of.index:
            continue
        a, b = answers_of.loc[pair.pair_id]
        ids, measure = order["answer_id"].tolist(), order["measure"].tolist()
        for kind, other in (("first_vs_second", 1), ("first_vs_last", len(ids) - 1)):
            if measure[0] < measure[other] and {a, b} == {ids[0], ids[other]}:
                # A gold pair's own kind and side win over the ranks if the two ever differ.
                sides.setdefault((int(pair.pair_id), kind), "A" if a == ids[0] else "B")
    rows = sorted((pair_id, kind, side) for (pair_id, kind), side in sides.items())
    return pd.DataFrame(rows, columns=["pair_id", "kind", "side"])


def _accuracy(
    labels: npt.NDArray[Any], sides: npt.NDArray[Any], confidence: float
) -> dict[str, Any]:
    return {
        **vars(wilson_interval(int((labels == sides).sum()), int(labels.size), confidence)),
        "ties": int((labels == "tie").sum()),
    }


def tie_aware_ndcg(scores: Sequence[float], gains: Sequence[float], k: int | None) -> float:
    """NDCG@k with linear gains where equally scored items share the mean discount of the
    positions they span (McSherry & Najork 2008, "Computing information retrieval performance
    measures efficiently in the presence of tied scores"). NaN with no items or zero IDCG."""
    s = np.asarray(scores, dtype=np.float64)
    g = np.asarray(gains, dtype=np.float64)
    n = s.size
    if n == 0:
        return math.nan
    depth = n if k is None else min(k, n)
    discount = np.zeros(n)
    discount[:depth] = 1.0 / np.log2(np.arange(2, depth + 2))
    idcg = float((np.sort(g)[::-1] * discount).sum())
    if idcg == 0.0:
        return math.nan
    order = np.argsort(-s, kind="stable")
    sorted_scores, sorted_gains = s[order], g[order]
    dcg = 0.0
    start = 0
    while start < n:
        end = start
        while end < n and sorted_scores[end] == sorted_scores[start]:
            end += 1
        dcg += float(sorted_gains[start:end].sum() * discount[start:end].mean())
        start = end
    return dcg / idcg


def _win_shares(frame: pd.DataFrame, lengths: pd.DataFrame, prompt_of: pd.Series) -> pd.Series:
    """Share of pairwise wins of each answer (a tie is half), indexed by (prompt_id, answer_id),
    over the votes on the pairs in `prompt_of`."""
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


def _ndcg_source(
    scores: pd.Series, orders: dict[int, pd.DataFrame], ranking: str
) -> dict[str, Any]:
    """Mean NDCG over the prompts where `scores` (indexed by prompt_id, answer_id) rank two or
    more answers of the gold order."""
    per_depth: dict[str, list[float]] = {_depth_key(k): [] for k in NDCG_DEPTHS}
    by_prompt = {int(p): group.droplevel(0) for p, group in scores.groupby(level=0, sort=True)}
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
            per_depth[_depth_key(k)].append(tie_aware_ndcg(ranked, gains[known], k))
    prompts = len(per_depth[_depth_key(None)])
    return {
        "ranking": ranking,
        "prompts": prompts,
        **{key: (float(np.mean(vals)) if vals else None) for key, vals in per_depth.items()},
    }


def _depth_key(k: int | None) -> str:
    return "at_all" if k is None else f"at_{k}"


def gold_order_section(
    *,
    votes: StudyVotes,
    extras: ReportExtras,
    confidence: float,
    frames: Mapping[str, pd.DataFrame] | None = None,
    majority: pd.Series | None = None,
) -> dict[str, Any]:
    """Accuracy on first-vs-second and first-vs-last pairs, and NDCG of each source's ranking of
    a prompt's answers against the gold order (AdvisorQA, Kim et al. 2024, Table 3)."""
    orders = gold_orders(extras.answers)
    kinds = gold_pair_kinds(pairs=votes.pairs, lengths=extras.lengths, orders=orders)
    frames = frames or _votes_by_source(votes)
    accuracy: dict[str, Any] = {}
    majority = people_majority(votes.human) if majority is None else majority
    for name, frame in frames.items():
        accuracy[name] = {}
        for kind in GOLD_KINDS:
            side_of = kinds[kinds["kind"] == kind].set_index("pair_id")["side"]
            mine = frame.iloc[:0] if side_of.empty else frame[frame["pair_id"].isin(side_of.index)]
            cell: dict[str, Any] = {
                "votes": _accuracy(
                    mine["label"].to_numpy(dtype=object),
                    side_of.reindex(mine["pair_id"]).to_numpy(dtype=object),
                    confidence,
                )
            }
            if name == HUMAN:
                held = majority.index.intersection(side_of.index)
                cell["majority"] = _accuracy(
                    majority.loc[held].to_numpy(dtype=object),
                    side_of.loc[held].to_numpy(dtype=object),
                    confidence,
                )
            accuracy[name][kind] = cell
    prompt_of = votes.pairs.set_index("pair_id")["prompt_id"]
    prompt_of = prompt_of[prompt_of.isin(list(orders))]
    answer_prompt = extras.answers.set_index("answer_id")["prompt_id"]
    ndcg: dict[str, Any] = {}
    run_of = {s.name: s.run_id for s in votes.sources}
    for name, frame in frames.items():
        own = extras.scores[extras.scores["run_id"] == run_of.get(name, -1)]
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
            shares = _win_shares(frame, extras.lengths, prompt_of)
            ndcg[name] = _ndcg_source(shares, orders, "pairwise wins")
    return {
        "definition": GOLD_DEFINITION,
        "kinds": list(GOLD_KINDS),
        "prompts_with_order": len(orders),
        "pairs": {kind: int((kinds["kind"] == kind).sum()) for kind in GOLD_KINDS},
        "accuracy": accuracy,
        "ndcg": {
            "definition": NDCG_DEFINITION,
            "depths": [_depth_key(k) for k in NDCG_DEPTHS],
            "sources": ndcg,
        },
    }


# --- win rates --------------------------------------------------------------------------------


def win_rates_from_votes(frame: pd.DataFrame) -> tuple[list[str], npt.NDArray[np.float64], int]:
    """Models, win-rate matrix and battle count of one source's votes.

    The same formula as :func:`leaderboard.stats.ratings.win_rate_matrix` with ties="half"
    (``W_ij / (W_ij + W_ji)``, a tie half a win each, NaN where two models never met and on the
    diagonal), summed from the counts per (model A, model B, label), so a million votes cost one
    group-by instead of a Python step per battle. Votes of a model against itself are left out.
    """
    kept = frame[frame["system_a"] != frame["system_b"]]
    counts = kept.groupby(["system_a", "system_b", "label"], observed=True).size()
    models = sorted({str(m) for key in counts.index for m in key[:2]})
    index = {m: i for i, m in enumerate(models)}
    wins = np.zeros((len(models), len(models)))
    for (a, b, label), n in counts.items():
        i, j = index[str(a)], index[str(b)]
        if label == "A":
            wins[i, j] += n
        elif label == "B":
            wins[j, i] += n
        else:
            wins[i, j] += n / 2
            wins[j, i] += n / 2
    games = wins + wins.T
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = np.where(games > 0, wins / games, np.nan)
    return models, rates, len(kept)


def win_rates_section(
    *, votes: StudyVotes, frames: Mapping[str, pd.DataFrame] | None = None
) -> dict[str, Any]:
    """Per source, the share of battles each model won against each other (ties as half)."""
    out: dict[str, Any] = {}
    for name, frame in (frames or _votes_by_source(votes)).items():
        models, rates, battles = win_rates_from_votes(frame)
        out[name] = {
            "battles": battles,
            "models": models,
            "rates": [[None if math.isnan(v) else float(v) for v in row] for row in rates],
        }
    return {
        "definition": "row model's wins over column model / their battles; a tie is half a win",
        "sources": out,
    }


def report_sections_compute(
    *, votes: StudyVotes, extras: ReportExtras, confidence: float
) -> dict[str, Any]:
    """The later sections of the report, keyed as in the JSON."""
    frames = _votes_by_source(votes)
    majority = people_majority(votes.human)
    return {
        "length_bias": length_bias_section(
            votes=votes, extras=extras, confidence=confidence, frames=frames
        ),
        "rationale": rationale_section(
            votes=votes, extras=extras, frames=frames, majority=majority
        ),
        "gold_order": gold_order_section(
            votes=votes, extras=extras, confidence=confidence, frames=frames, majority=majority
        ),
        "win_rates": win_rates_section(votes=votes, frames=frames),
    }
