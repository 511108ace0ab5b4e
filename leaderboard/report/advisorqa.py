"""AdvisorQA's Table 3: NDCG@2/3/5 and 1st-vs-2nd / 1st-vs-last accuracy of every ranker of a
prompt's answers (Kim et al. 2024), computed by :func:`rankeval.listwise.advisorqa_table`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from leaderboard.report.base import HUMAN, RenderContext, ReportData, Section, Table
from leaderboard.report.gold_order import gold_orders
from leaderboard.selectors.section_reads import GOLD_ANSWERS, LENGTHS, PL_SPLITS, PLSplit
from rankeval.listwise import TableRow, advisorqa_table

if TYPE_CHECKING:
    import pandas as pd

SHARE_OF_B = {"A": 0.0, "B": 1.0, "tie": 0.5}
DEFINITION = (
    "Gold lists: each prompt's answers by rank (1 = best), else by upvotes, when two or more have "
    "one and no two tie. Rows: the random ranker (uniform scores, the report's seed), the "
    "longer-answer ranker (characters of the judged turn), each source with answer scores (a "
    "PL reward model: its recipe and K are in its model name) ranking by score, and every other "
    "source (judges, people) ranking by wins over its verdicts within the list (a tie half a "
    "win). NDCG@k with relevance n - position (best = n), over every list, k cut to the list's "
    "length for lists shorter than k (scikit-learn's convention: NDCG@5 of a 4-answer list is "
    "its NDCG@4); accuracy = share of lists whose 1st answer ranks above the 2nd (the last), a "
    "tie counting half (the rule of AdvisorQA's table; gold_order shows ties half and strict); for "
    "sources ranking by wins, from their direct verdicts on those two pairs. Prompts: when a PL "
    "model trained on this study is in the table, only the prompts its training held out (the "
    "split by prompt with its seed; with several such models, the prompts all of them held "
    "out), so that no row is measured on training prompts; otherwise every prompt with a gold "
    "order."
)


@dataclass(frozen=True)
class AdvisorQAResult:
    definition: str
    lists: int
    rows: list[TableRow]
    # "held-out" (the PL models' held-out prompts) or "all"; the lists before that restriction.
    prompts: str = "all"
    lists_all: int = 0
    # The PL models whose held-out prompts were used, with their splits ("seed 0, share 0.2").
    held_out_of: dict[str, str] = field(default_factory=dict)
    # PL models trained on this study whose split is not known: their rows may include
    # training prompts.
    split_unknown: list[str] = field(default_factory=list)

    @property
    def prompts_note(self) -> str:
        """Which prompts the table ranks, in words."""
        if self.prompts != "held-out":
            text = f"All {self.lists} prompts with a gold order."
        else:
            models = "; ".join(f"{name}: {split}" for name, split in self.held_out_of.items())
            text = (
                f"{self.lists} held-out prompts of the {self.lists_all} with a gold order, held "
                f"out of training by {models}."
            )
        if self.split_unknown:
            text += (
                f" Training split not known for {', '.join(self.split_unknown)}: "
                "its rows may include prompts it was trained on."
            )
        return text


def _gold_lists(answers: pd.DataFrame) -> dict[int, list[int]]:
    """Each prompt's gold list (answer ids, best first), by prompt id."""
    lists = {}
    for prompt_id, order in gold_orders(answers).items():
        positions = order["position"].to_numpy()
        if len(positions) >= 2 and (np.diff(positions) > 0).all():
            lists[int(prompt_id)] = [int(a) for a in order["answer_id"]]
    return lists


def _split_text(split: PLSplit) -> str:
    share = "?" if split.holdout is None else format(split.holdout, "g")
    return f"seed {split.seed}, held-out share {share}"


def held_out_prompts(
    splits: Sequence[PLSplit], names: Mapping[int, str]
) -> tuple[set[int] | None, dict[str, str], list[str]]:
    """The prompts every PL run trained on this study held out (None: no such run with a known
    split, so no restriction), those runs' splits by source name, and the names of the runs
    trained here whose split is not known. `names` gives the report's source name of each run
    with answer scores in the table."""
    held: set[int] | None = None
    used: dict[str, str] = {}
    unknown: list[str] = []
    for split in splits:
        if split.run_id not in names or not split.trained_here:
            continue
        if split.held_out is None:
            unknown.append(names[split.run_id])
            continue
        held = set(split.held_out) if held is None else held & set(split.held_out)
        used[names[split.run_id]] = _split_text(split)
    return held, used, unknown


def advisorqa_compute(data: ReportData) -> AdvisorQAResult:
    """The table from the report's frames: answer scores per run, votes per source.

    Only the answers of gold lists can count (a verdict counts when both its answers are in one
    list; a ranker's value is read for a list's answers only), so lengths, scores and verdicts
    are narrowed to those answers first: a study without ranked lists costs next to nothing."""
    import pandas as pd

    votes, gold, pair_lengths = data.votes, data.read(GOLD_ANSWERS), data.read(LENGTHS).frame
    by_prompt = _gold_lists(gold.answers)
    in_lists = np.array(sorted({a for ids in by_prompt.values() for a in ids}), dtype=np.int64)
    lengths: dict[int, float] = {}
    for side in ("a", "b"):
        ids = pair_lengths[f"answer_{side}_id"].to_numpy()
        values = pair_lengths[f"len_{side}"].to_numpy(dtype=float)
        keep = np.isin(ids, in_lists) & np.isfinite(values)
        lengths.update(zip(ids[keep].astype(int).tolist(), values[keep].tolist(), strict=True))
    ends = pair_lengths.set_index("pair_id")[["answer_a_id", "answer_b_id"]]
    ends = ends[ends["answer_a_id"].isin(in_lists) & ends["answer_b_id"].isin(in_lists)]
    scores: dict[str, dict[int, float]] = {}
    verdicts: dict[str, list[tuple[int, int, float]]] = {}
    runs = {s.name: s for s in votes.sources}
    scored: dict[int, str] = {}  # the runs ranking by answer scores: their rows' names
    for name, frame in data.frames.items():
        source = runs.get(name)
        own = gold.scores[gold.scores["run_id"] == source.run_id] if source else pd.DataFrame()
        label = name if source is None or not source.model_name else f"{name} ({source.model_name})"
        if source is not None and not own.empty:
            scored[source.run_id] = label
            own = own[own["answer_id"].isin(in_lists)]
            scores[label] = dict(
                zip(own["answer_id"].astype(int), own["score"].astype(float), strict=True)
            )
            continue
        joined = frame[["pair_id", "label"]].join(ends, on="pair_id", how="inner")
        verdicts["people" if name == HUMAN else label] = [
            (int(a), int(b), SHARE_OF_B[str(lab)])
            for a, b, lab in zip(
                joined["answer_a_id"], joined["answer_b_id"], joined["label"], strict=True
            )
            if str(lab) in SHARE_OF_B
        ]
    held, used, unknown = held_out_prompts(data.read(PL_SPLITS).splits, scored)
    chosen = by_prompt if held is None else {p: ids for p, ids in by_prompt.items() if p in held}
    lists = [chosen[p] for p in sorted(chosen)]
    rows = advisorqa_table(
        lists, scores=scores, verdicts=verdicts, lengths=lengths, seed=data.params.seed
    )
    return AdvisorQAResult(
        definition=DEFINITION,
        lists=len(lists),
        rows=rows,
        prompts="all" if held is None else "held-out",
        lists_all=len(by_prompt),
        held_out_of=used,
        split_unknown=unknown,
    )


class AdvisorQASection(Section[AdvisorQAResult]):
    key = "advisorqa_table3"
    title = "Ranking answers (AdvisorQA Table 3)"
    definition = (
        "NDCG@2/3/5 and 1st-vs-2nd / 1st-vs-last accuracy of the random and longer-answer "
        "rankers, each PL reward model, every other judge and people, against the gold order."
    )
    result_type = AdvisorQAResult
    reads = (
        GOLD_ANSWERS,
        LENGTHS,
        PL_SPLITS,
    )

    def compute(self, data: ReportData) -> AdvisorQAResult:
        return advisorqa_compute(data)

    def tables(self, result: AdvisorQAResult, context: RenderContext) -> list[Table]:
        rows = tuple(
            (
                row.source,
                row.ranking,
                row.lists,
                row.ndcg_2,
                row.ndcg_3,
                row.ndcg_5,
                row.first_vs_second,
                row.second_pairs,
                row.first_vs_last,
                row.last_pairs,
            )
            for row in result.rows
            if row.lists
        )
        return [
            Table(
                "advisorqa-table3",
                "Ranking a prompt's answers against the gold order (AdvisorQA Table 3): "
                + (
                    f"{result.lists} held-out prompts of {result.lists_all}"
                    if result.prompts == "held-out"
                    else f"all {result.lists} prompts"
                ),
                (
                    "ranker",
                    "ranking from",
                    "lists",
                    "NDCG@2",
                    "NDCG@3",
                    "NDCG@5",
                    "1st vs 2nd accuracy",
                    "1st vs 2nd pairs",
                    "1st vs last accuracy",
                    "1st vs last pairs",
                ),
                rows if result.lists else (),
                note=f"{result.prompts_note} {result.definition}",
            )
        ]


SECTION = AdvisorQASection()
