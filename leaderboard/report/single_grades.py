"""Single-answer grades: MT-Bench's table of each system's mean grade per category, for every
single-answer grading judge (judges.services.grading), with intervals over prompts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from judges.services.grading import TIE_RULE
from leaderboard.report.base import (
    BT_PROMPT_DRAWS_BUDGET,
    RenderContext,
    ReportData,
    Section,
    Table,
    rounds_within,
)
from leaderboard.selectors.section_reads import GRADES
from leaderboard.stats.grades import MeanGrade, mean_grade

if TYPE_CHECKING:
    import pandas as pd

ALL = "all"
DEFINITION = (
    "a system's mean grade (1-10) over its answers graded alone by the judge in the category "
    f"(and over every category, '{ALL}'), each answer once per judged turn; the interval is a "
    "percentile bootstrap over prompts"
)


@dataclass(frozen=True)
class GradeRow:
    system: str
    category: str
    grade: MeanGrade


@dataclass(frozen=True)
class SingleGradesResult:
    definition: str
    tie_rule: str
    # Per grading judge source: a row per system and category, then the system's 'all' row.
    sources: dict[str, list[GradeRow]]


def single_grades_compute(data: ReportData) -> SingleGradesResult:
    """Each grading source's mean grade per system and category (and overall)."""
    grades = data.read(GRADES).frame
    params = data.params
    by_prompt = params.resample == "prompt"
    out: dict[str, list[GradeRow]] = {}
    for source in data.votes.sources:
        mine = grades[grades["run_id"] == source.run_id]
        if not len(mine):
            continue
        rounds = rounds_within(params.ci_rounds, len(mine), BT_PROMPT_DRAWS_BUDGET)

        def row(system: str, category: str, frame: pd.DataFrame, rounds: int = rounds) -> GradeRow:
            return GradeRow(
                system,
                category,
                mean_grade(
                    frame["grade"].to_numpy(),
                    frame["prompt_id"].to_numpy(),
                    rounds=rounds,
                    seed=params.seed,
                    by_prompt=by_prompt,
                    confidence=params.confidence,
                ),
            )

        rows = []
        for system in sorted(mine["system"].unique()):
            of_system = mine[mine["system"] == system]
            for category in sorted(of_system["category"].unique()):
                rows.append(row(system, category, of_system[of_system["category"] == category]))
            rows.append(row(system, ALL, of_system))
        out[source.name] = rows
    return SingleGradesResult(DEFINITION, f"pair verdicts from two grades: {TIE_RULE}", out)


class SingleGradesSection(Section[SingleGradesResult]):
    key = "single_grades"
    title = "Single-answer grades (MT-Bench table)"
    definition = (
        "Each system's mean grade from every judge that grades one answer alone, per category, "
        "with intervals over prompts."
    )
    result_type = SingleGradesResult
    reads = (GRADES,)

    def compute(self, data: ReportData) -> SingleGradesResult:
        return single_grades_compute(data)

    def tables(self, result: SingleGradesResult, context: RenderContext) -> list[Table]:
        rows: list[tuple[Any, ...]] = []
        for source in context.sources:
            for entry in result.sources.get(source, []):
                grade = entry.grade
                rows.append(
                    (
                        source,
                        entry.system,
                        entry.category,
                        grade.mean,
                        grade.lower,
                        grade.upper,
                        grade.grades,
                        grade.prompts,
                    )
                )
        if not rows:
            return []
        return [
            Table(
                "single-grades",
                "Mean single-answer grade per system and category",
                (
                    "source",
                    "system",
                    "category",
                    "mean_grade",
                    "mean_grade_lower",
                    "mean_grade_upper",
                    "grades",
                    "prompts",
                ),
                tuple(rows),
                note=f"{result.definition}; {result.tie_rule}",
            )
        ]


SECTION = SingleGradesSection()
