"""AdvisorQA's Table 3: NDCG@2/3/5 and 1st-vs-2nd / 1st-vs-last accuracy of every ranker of a
prompt's answers (Kim et al. 2024), computed by :func:`leaderboard.stats.listwise.advisorqa_table`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from leaderboard.report.base import HUMAN, RenderContext, ReportData, Section, Table
from leaderboard.report.gold_order import gold_orders
from leaderboard.stats.listwise import TableRow, advisorqa_table

SHARE_OF_B = {"A": 0.0, "B": 1.0, "tie": 0.5}
DEFINITION = (
    "Gold lists: each prompt's answers by rank (1 = best), else by upvotes, when two or more have "
    "one and no two tie. Rows: the random ranker (uniform scores, the report's seed), the "
    "longer-answer ranker (characters of the judged turn), each source with answer scores (a "
    "PL reward model: its recipe and K are in its model name) ranking by score, and every other "
    "source (judges, people) ranking by wins over its verdicts within the list (a tie half a "
    "win). NDCG@k with relevance n - position (best = n), over the lists with k or more answers; "
    "accuracy = share of lists whose 1st answer ranks above the 2nd (the last), a tie half; for "
    "sources ranking by wins, from their direct verdicts on those two pairs. The lists here are "
    "all the study's prompts with a gold order, including prompts a PL model was trained on: "
    "the held-out table is on each training's page and from `manage.py evaluate_pl_model`."
)


@dataclass(frozen=True)
class AdvisorQAResult:
    definition: str
    lists: int
    rows: list[TableRow]


def _gold_lists(answers: pd.DataFrame) -> list[list[int]]:
    lists = []
    for order in gold_orders(answers).values():
        positions = order["position"].to_numpy()
        if len(positions) >= 2 and (np.diff(positions) > 0).all():
            lists.append([int(a) for a in order["answer_id"]])
    return lists


def advisorqa_compute(data: ReportData) -> AdvisorQAResult:
    """The table from the report's frames: answer scores per run, votes per source."""
    extras, votes = data.extras, data.votes
    gold = _gold_lists(extras.answers)
    lengths: dict[int, float] = {}
    for side in ("a", "b"):
        for answer_id, length in zip(
            extras.lengths[f"answer_{side}_id"], extras.lengths[f"len_{side}"], strict=True
        ):
            if np.isfinite(length):
                lengths[int(answer_id)] = float(length)
    ends = extras.lengths.set_index("pair_id")[["answer_a_id", "answer_b_id"]]
    scores: dict[str, dict[int, float]] = {}
    verdicts: dict[str, list[tuple[int, int, float]]] = {}
    runs = {s.name: s for s in votes.sources}
    for name, frame in data.frames.items():
        source = runs.get(name)
        own = extras.scores[extras.scores["run_id"] == source.run_id] if source else pd.DataFrame()
        label = name if source is None or not source.model_name else f"{name} ({source.model_name})"
        if not own.empty:
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
    rows = advisorqa_table(
        gold, scores=scores, verdicts=verdicts, lengths=lengths, seed=data.params.seed
    )
    return AdvisorQAResult(definition=DEFINITION, lists=len(gold), rows=rows)


class AdvisorQASection(Section[AdvisorQAResult]):
    key = "advisorqa_table3"
    title = "Ranking answers (AdvisorQA Table 3)"
    definition = (
        "NDCG@2/3/5 and 1st-vs-2nd / 1st-vs-last accuracy of the random and longer-answer "
        "rankers, each PL reward model, every other judge and people, against the gold order."
    )
    result_type = AdvisorQAResult

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
                "Ranking a prompt's answers against the gold order (AdvisorQA Table 3)",
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
                note=result.definition,
            )
        ]


SECTION = AdvisorQASection()
