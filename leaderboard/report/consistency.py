"""Consistency: does a source recognise which answer belongs to which instruction (Contrast
Instructions, Shen et al. 2023), and are its verdicts stable under swapping and chaining?

The numbers come from `leaderboard.services.consistency` (computed from the report's frames and
the contrast inputs read with the extras); see docs/consistency.md for every definition.
"""

from __future__ import annotations

from leaderboard.report.base import Plot, RenderContext, ReportData, Section, Table
from leaderboard.services.consistency import (
    MISS_COLUMNS,
    TABLE_COLUMNS,
    ConsistencyResult,
    SourceInfo,
    consistency_compute,
    consistency_miss_rows,
    consistency_plot_svg,
    consistency_table_note,
    consistency_table_rows,
)


class ConsistencySection(Section[ConsistencyResult]):
    key = "consistency"
    title = "Consistency"
    definition = (
        "C_res: share of contrast items where the answer that belongs to the instruction wins; "
        "C_ins (score judges): an answer scores higher under its own instruction; swap "
        "invariance; share of intransitive triples."
    )
    result_type = ConsistencyResult

    def compute(self, data: ReportData) -> ConsistencyResult:
        inputs = data.extras.consistency
        lengths = data.extras.lengths
        answers = lengths[["pair_id", "answer_a_id", "answer_b_id"]].rename(
            columns={"answer_a_id": "answer_a", "answer_b_id": "answer_b"}
        )
        pairs = data.votes.pairs[["pair_id", "prompt_id", "turn"]].merge(
            answers.drop_duplicates("pair_id"), on="pair_id", how="inner"
        )
        return consistency_compute(
            pairs=pairs,
            calls=data.votes.calls,
            human=data.votes.human[["pair_id", "label"]],
            majority=data.majority,
            sources=[SourceInfo(s.name, s.run_id, s.judge_kind) for s in data.votes.sources],
            contrast=inputs.contrast,
            scores=inputs.scores,
            confidence=data.params.confidence,
        )

    def tables(self, result: ConsistencyResult, context: RenderContext) -> list[Table]:
        tables = [
            Table(
                "consistency",
                "Consistency per source",
                TABLE_COLUMNS,
                tuple(consistency_table_rows(result)),
                note=consistency_table_note(result),
            )
        ]
        if result.contrast_items:
            tables.append(
                Table(
                    "consistency-misses",
                    "Contrast items answered wrongly",
                    MISS_COLUMNS,
                    tuple(consistency_miss_rows(result)),
                    note=(
                        "Each row: the instruction shown with its own answer (r_A) and the answer "
                        "to the other, similar instruction (r_B), where the source did not prefer "
                        "r_A. Score judges are left out here (their C_res counts four scores). "
                        "At most 50 rows per source."
                    ),
                )
            )
        return tables

    def plots(self, result: ConsistencyResult, context: RenderContext) -> list[Plot]:
        svg = consistency_plot_svg(result)
        if svg is None:
            return []
        return [
            Plot(
                "consistency",
                "C_res and intransitive triples per source",
                svg,
                note="Bars: shares with Wilson 95% whiskers; random: C_res 50%, triples 25%.",
            )
        ]


SECTION = ConsistencySection()
