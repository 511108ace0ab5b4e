"""Agreement with people per dollar: every judge and the crowd itself, their agreement with the
people's majority beside what 1,000 pairs of their verdicts cost, and the Pareto front."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from leaderboard.report.base import HUMAN, Plot, RenderContext, ReportData, Section, Table
from leaderboard.selectors.section_reads import COST
from leaderboard.stats.bootstrap import ClusterProportion, cluster_proportion
from leaderboard.stats.cost import held_out_hits, pareto_front

DEFINITION = (
    "Agreement: a judge's votes that name the people's majority label of the pair (A, B or "
    "tie; a tied count is a tie), over pairs with people's votes; the crowd's: each person's "
    "vote against the majority of the pair's other votes (held out), over pairs with 2+ votes; "
    "95% interval by bootstrap over prompts. Cost per 1,000 pairs (USD): a judge's summed call "
    "costs on the judge ledger / pairs it judged x 1,000 (a reference-guided judge's with what "
    "writing the references of the prompts it judged cost, on the reference ledger); a PL reward "
    "model's the rate the "
    "researcher set (pl_usd_per_1000; none: not priced); a panel's the sum of its members' (their "
    "summed call costs on the selected pairs / pairs the panel judged x 1,000, and the rate for "
    "a PL member); the crowd's one vote per pair, the pay "
    "ledger's judgment pay (not rejected) / judgments paid x 1,000. Agreement per dollar: "
    "agreement / cost per 1,000 pairs. Pareto: no other source costs no more and agrees no less."
)


@dataclass(frozen=True)
class CostRow:
    source: str
    kind: str  # "people" or the judge's kind
    agreement: ClusterProportion
    cost_per_1000: float | None
    priced_by: str  # "judge ledger", "pay ledger", "rate", or "" when not priced
    agreement_per_dollar: float | None
    pareto: bool


@dataclass(frozen=True)
class AgreementCostResult:
    definition: str
    rows: list[CostRow]


def agreement_cost_compute(data: ReportData) -> AgreementCostResult:
    """Per source: agreement with people, cost per 1,000 pairs, agreement per dollar."""
    params = data.params
    prompt_of = data.votes.pairs.set_index("pair_id")["prompt_id"]
    common: dict[str, Any] = {
        "unit": "vote",
        "resampled": "prompt" if params.resample == "prompt" else "vote",
        "rounds": params.ci_rounds,
        "seed": params.seed,
        "confidence": params.confidence,
    }

    def share(pair_ids: Any, hits: Any) -> ClusterProportion:
        clusters = prompt_of.reindex(pair_ids).to_numpy() if params.resample == "prompt" else None
        return cluster_proportion(hits, clusters, **common)

    rows: list[tuple[str, str, ClusterProportion, float | None, str]] = []
    human = held_out_hits(data.votes.human)
    pay = data.read(COST).pay
    crowd_cost = (
        pay.cents / 100 / pay.judgments * 1000 if pay is not None and pay.judgments else None
    )
    rows.append(
        (
            HUMAN,
            "people",
            share(human["pair_id"], human["hit"]),
            crowd_cost,
            "pay ledger" if crowd_cost is not None else "",
        )
    )
    majority = data.majority
    costs = data.read(COST).costs.set_index("run_id")
    for source in data.votes.sources:
        frame = data.frames[source.name]
        frame = frame[frame["pair_id"].isin(majority.index)]
        hits = frame["label"].astype(object).to_numpy() == majority.reindex(
            frame["pair_id"]
        ).to_numpy(dtype=object)
        cost: float | None = None
        priced_by = ""
        if source.judge_kind == "pl":
            if params.pl_usd_per_1000 > 0:
                cost, priced_by = params.pl_usd_per_1000, "rate"
        elif source.judge_kind == "panel" and source.run_id in costs.index:
            cost, priced_by = _panel_cost(costs.loc[source.run_id], params.pl_usd_per_1000)
        elif source.run_id in costs.index:
            spent = float(costs["cost_usd"].loc[source.run_id])
            pairs = int(costs["pairs"].loc[source.run_id])
            if spent > 0 and pairs:
                cost, priced_by = spent / pairs * 1000, "judge ledger"
        rows.append(
            (source.name, source.judge_kind, share(frame["pair_id"], hits), cost, priced_by)
        )
    agreement = np.array([np.nan if r[2].share is None else r[2].share for r in rows])
    cost_array = np.array([np.nan if r[3] is None else r[3] for r in rows])
    front = pareto_front(cost_array, agreement)
    out = []
    for (name, kind, prop, cost, priced_by), on_front in zip(rows, front, strict=True):
        per_dollar = prop.share / cost if prop.share is not None and cost else None
        out.append(CostRow(name, kind, prop, cost, priced_by, per_dollar, bool(on_front)))
    return AgreementCostResult(DEFINITION, out)


def _panel_cost(row: Any, pl_rate: float) -> tuple[float | None, str]:
    """A panel's cost per 1,000 pairs: its members' summed ledger cost on the selected pairs /
    the pairs the panel judged x 1,000, plus the rate for each PL member (none: not priced)."""
    spent, pairs, pl_members = float(row["cost_usd"]), int(row["pairs"]), int(row["pl_members"])
    if not pairs or (pl_members and pl_rate <= 0):
        return None, ""
    cost = spent / pairs * 1000 + pl_members * pl_rate
    if cost <= 0:
        return None, ""
    return cost, "members' ledgers" + (" and rate" if pl_members else "")


def pareto_svg(*, title: str, points: list[tuple[str, float, float, bool]]) -> str:
    """A scatter of (cost, agreement) points, labelled, the Pareto front joined by a line."""
    width, height, left, top, right, bottom = 640, 360, 60, 40, 20, 50
    costs = [p[1] for p in points]
    shares = [p[2] for p in points]
    x_max = max(costs) * 1.1 if max(costs) > 0 else 1.0
    y_low = max(0.0, min(shares) - 0.1)
    y_high = min(1.0, max(shares) + 0.1)
    if y_high <= y_low:
        y_high = y_low + 0.1

    def x(value: float) -> float:
        return left + (width - left - right) * value / x_max

    def y(value: float) -> float:
        return top + (height - top - bottom) * (1 - (value - y_low) / (y_high - y_low))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<text x="{width / 2:.1f}" y="20" text-anchor="middle" font-size="14">'
        f"{html.escape(title)}</text>",
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" '
        'stroke="#444"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="#444"/>',
        f'<text x="{width / 2:.1f}" y="{height - 12}" text-anchor="middle">'
        "cost per 1,000 pairs (USD)</text>",
        f'<text x="14" y="{height / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {height / 2:.1f})">agreement with people</text>',
    ]
    for tick in np.linspace(y_low, y_high, 5):
        parts.append(
            f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:.2f}</text>'
        )
    for tick in np.linspace(0, x_max, 5):
        parts.append(
            f'<text x="{x(tick):.1f}" y="{height - bottom + 16}" text-anchor="middle">'
            f"{tick:.2f}</text>"
        )
    front = sorted((p for p in points if p[3]), key=lambda p: p[1])
    if len(front) > 1:
        line = " ".join(f"{x(p[1]):.1f},{y(p[2]):.1f}" for p in front)
        parts.append(f'<polyline points="{line}" fill="none" stroke="#d62728"/>')
    for name, cost, agreement, on_front in points:
        colour = "#d62728" if on_front else "#1f77b4"
        parts.append(f'<circle cx="{x(cost):.1f}" cy="{y(agreement):.1f}" r="4" fill="{colour}"/>')
        parts.append(
            f'<text x="{x(cost) + 6:.1f}" y="{y(agreement) - 6:.1f}">{html.escape(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


class AgreementCostSection(Section[AgreementCostResult]):
    key = "agreement_cost"
    title = "Agreement with people per dollar"
    definition = (
        "Each judge's and the crowd's agreement with people beside what 1,000 pairs of their "
        "verdicts cost, agreement per dollar, and which sources no other beats on both."
    )
    result_type = AgreementCostResult
    reads = (COST,)

    def compute(self, data: ReportData) -> AgreementCostResult:
        return agreement_cost_compute(data)

    def tables(self, result: AgreementCostResult, context: RenderContext) -> list[Table]:
        rows = tuple(
            (
                r.source,
                r.kind,
                r.agreement.share,
                r.agreement.lower,
                r.agreement.upper,
                r.agreement.total,
                r.cost_per_1000,
                r.priced_by or "not priced",
                r.agreement_per_dollar,
                r.pareto,
            )
            for r in result.rows
        )
        return [
            Table(
                "agreement-per-dollar",
                "Agreement with people per dollar",
                (
                    "source",
                    "kind",
                    "agreement",
                    "lower",
                    "upper",
                    "votes",
                    "cost per 1,000 pairs (USD)",
                    "priced by",
                    "agreement per dollar",
                    "pareto",
                ),
                rows,
                note=result.definition,
            )
        ]

    def plots(self, result: AgreementCostResult, context: RenderContext) -> list[Plot]:
        points = [
            (r.source, r.cost_per_1000, r.agreement.share, r.pareto)
            for r in result.rows
            if r.cost_per_1000 is not None
            and r.agreement.share is not None
            and math.isfinite(r.cost_per_1000)
        ]
        if not points:
            return []
        title = "Agreement with people against cost (Pareto front in red)"
        return [
            Plot(
                "agreement-cost",
                title,
                pareto_svg(
                    title=title,
                    points=[(n, float(c), float(a), f) for n, c, a, f in points],
                ),
            )
        ]


SECTION = AgreementCostSection()
