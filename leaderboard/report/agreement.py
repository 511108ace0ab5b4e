"""Agreement: people with people, each judge with people, judges with each other (MT-Bench Table
2), and the chance-corrected statistics (Fleiss' kappa, Krippendorff's alpha, Cohen's kappa
against the people's majority, quadratic-weighted kappa of Likert scores).

Its JSON spreads over the documented top-level keys ``counts``, ``human_vs_human``, ``judges`` and
``judge_vs_judge`` (researchers' scripts read ``judges.<name>.vs_human.with_ties.agree``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from leaderboard.report.base import (
    RenderContext,
    ReportData,
    ReportParams,
    Section,
    Table,
    from_json,
    to_json,
)
from leaderboard.selectors.section_reads import PROPENSITIES
from leaderboard.stats.active import (
    agreement_strata,
    disagreement_share,
    hajek_agreement,
    poststratified_agreement,
)
from leaderboard.stats.agreement import (
    Level,
    cohen_kappa,
    fleiss_kappa_generalized_interval,
    fleiss_kappa_interval,
    krippendorff_alpha_interval,
)
from leaderboard.stats.bootstrap import BootstrapInterval
from leaderboard.stats.majority import LABELS
from leaderboard.stats.pairwise import (
    AgreementCount,
    bootstrap_agreement_ci,
    pairwise_agreement,
    pairwise_agreement_by_unit,
)

if TYPE_CHECKING:
    import pandas as pd

DEFINITION = (
    "Vote-level agreement as in MT-Bench (Zheng et al. 2023, Table 2): a unit is (prompt, "
    "unordered pair of answers, turn). A judge's single vote on a unit is compared with each human "
    "vote on it; human vs human compares every unordered pair of votes on a unit by different "
    "raters. with_ties (S1): tie is a class of its own; without_ties (S2): only comparisons where "
    "neither side voted tie. A judge judged in both orders votes its verdict when the two agree "
    "and tie when they do not. Majority level compares each source's majority label per unit (a "
    "tied majority is a tie)."
)
RELIABILITY_NOTE = (
    "Fleiss' kappa on the units with the most common number of votes (Fleiss 1971 needs the same "
    "number of ratings per unit; 'computed on' says how many of the units with two or more votes "
    "that is); Fleiss' kappa generalised to varying numbers of votes (Gwet 2014: each unit's "
    "agreement over its own r_i (r_i - 1) vote pairs, category shares averaged over units) and "
    "Krippendorff's alpha on every unit with two or more votes; "
    "Cohen's kappa of each judge against the people's majority label per unit; quadratic-weighted "
    "kappa of Likert scores, vote by vote."
)


@dataclass(frozen=True)
class Counts:
    units: int
    human_votes: int
    human_raters: int
    units_with_human_votes: int
    judge_calls: int
    human_labels: dict[str, int]


@dataclass(frozen=True)
class Interval:
    lower: float
    upper: float


@dataclass(frozen=True)
class AgreementCI:
    """Bootstrap percentile interval of the pooled agreement rate: each round draws the prompts
    (``resample = "prompt"``: all of a prompt's units together, `prompts` of them) or the units
    (``"vote"``) with replacement."""

    with_ties: Interval
    without_ties: Interval
    confidence: float
    rounds: int
    units: int
    resample: str = "vote"
    prompts: int = 0


@dataclass(frozen=True)
class TieCounts:
    with_ties: AgreementCount
    without_ties: AgreementCount


@dataclass(frozen=True)
class ReliabilityCI:
    """Bootstrap percentile interval of a reliability coefficient: each round draws the prompts
    (``resample = "prompt"``: all of a prompt's units together) or the units (``"vote"``) with
    replacement; ``drawn`` is how many prompts or units a round draws."""

    lower: float
    upper: float
    confidence: float
    rounds: int
    resample: str
    drawn: int


@dataclass(frozen=True)
class FleissResult:
    """Fleiss' kappa on the units with the most common number of votes (``votes_per_unit``):
    ``units`` of the ``rated_units`` units with two or more votes."""

    kappa: float
    units: int
    votes_per_unit: int | None
    rated_units: int = 0
    ci: ReliabilityCI | None = None


@dataclass(frozen=True)
class AlphaResult:
    nominal_preference: float
    ordinal_likert: float | None
    nominal_preference_ci: ReliabilityCI | None = None
    ordinal_likert_ci: ReliabilityCI | None = None


@dataclass(frozen=True)
class HumanVsHuman:
    with_ties: AgreementCount
    without_ties: AgreementCount
    ci: AgreementCI
    fleiss_kappa: FleissResult
    krippendorff_alpha: AlphaResult
    # Every unit with two or more votes, however many (Gwet 2014's generalised Fleiss' kappa).
    fleiss_kappa_generalized: FleissResult | None = None


@dataclass(frozen=True)
class Kappa:
    kappa: float
    units: int


@dataclass(frozen=True)
class WeightedKappa:
    kappa: float
    weights: str
    pairs: int


@dataclass(frozen=True)
class WeightedAgreement:
    """An active study's vote-level agreement with ties, each human vote weighted by one over
    the propensity of its assignment's draw (leaderboard.stats.active.hajek_agreement), with
    its bootstrap interval over prompts. ``votes``: the human votes on pairs the judge voted
    on; ``recorded``: how many of them carry a recorded propensity (the others, drawn
    uniformly, count at 1 / k over the selection's k regular pairs)."""

    estimate: float
    lower: float
    upper: float
    confidence: float
    rounds: int
    votes: int
    recorded: int
    prompts: int
    method: str = "hajek"


@dataclass(frozen=True)
class VsHuman:
    with_ties: AgreementCount
    without_ties: AgreementCount
    ci: AgreementCI
    majority: TieCounts | None
    cohen_kappa_vs_majority: Kappa
    weighted_kappa_likert: WeightedKappa
    # Active studies only (Study.selection): the propensity-weighted agreement, and the same
    # votes post-stratified by the judges' agreement strata (schema 18).
    weighted: WeightedAgreement | None = None
    poststratified: WeightedAgreement | None = None
    # The same two without ties (schema 19).
    weighted_without_ties: WeightedAgreement | None = None
    poststratified_without_ties: WeightedAgreement | None = None


@dataclass(frozen=True)
class JudgeAgreement:
    judge: str
    kind: str
    model_name: str
    run_id: int
    run_status: str
    votes: int
    labels: dict[str, int]
    vs_human: VsHuman


@dataclass(frozen=True)
class JudgePair:
    a: str
    b: str
    with_ties: AgreementCount
    without_ties: AgreementCount


@dataclass(frozen=True)
class AgreementResult:
    counts: Counts
    human_vs_human: HumanVsHuman
    judges: dict[str, JudgeAgreement]
    judge_vs_judge: list[JudgePair]


def _tie_counts(votes: pd.DataFrame, other: pd.DataFrame | None, level: str) -> TieCounts:
    result = pairwise_agreement(votes, other, level=level, key="pair_id")  # type: ignore[arg-type]
    return TieCounts(result.s1, result.s2)


def _with_ci(
    votes: pd.DataFrame, other: pd.DataFrame | None, params: ReportParams, prompt_of: pd.Series
) -> tuple[AgreementCount, AgreementCount, AgreementCI]:
    """Vote-level agreement and its bootstrap interval, from one count of the units. Resampling
    prompts bootstraps the per-prompt sums of agreeing and compared pairs (the pooled rate is
    sum agree / sum total either way)."""
    per_unit = pairwise_agreement_by_unit(votes, other, key="pair_id")
    drawn = per_unit
    if params.resample == "prompt":
        prompts = prompt_of.reindex(per_unit["key"]).to_numpy()
        drawn = per_unit.groupby(prompts, sort=True)[
            ["agree_s1", "total_s1", "agree_s2", "total_s2"]
        ].sum()
    intervals = []
    for suffix in ("s1", "s2"):
        interval = bootstrap_agreement_ci(
            drawn[f"agree_{suffix}"].to_numpy(),
            drawn[f"total_{suffix}"].to_numpy(),
            rounds=params.ci_rounds,
            confidence=params.confidence,
            seed=params.seed,
        )
        intervals.append(Interval(interval.lower, interval.upper))
    ci = AgreementCI(
        intervals[0],
        intervals[1],
        params.confidence,
        params.ci_rounds,
        len(per_unit),
        params.resample,
        len(drawn) if params.resample == "prompt" else 0,
    )
    return (
        AgreementCount.of(int(per_unit["agree_s1"].sum()), int(per_unit["total_s1"].sum())),
        AgreementCount.of(int(per_unit["agree_s2"].sum()), int(per_unit["total_s2"].sum())),
        ci,
    )


def _unit_counts(human: pd.DataFrame) -> tuple[npt.NDArray[np.int64], npt.NDArray[Any]]:
    """The units x (A, B, tie) vote counts, units in pair id order, and their pair ids."""
    import pandas as pd

    units, pair_ids = pd.factorize(human["pair_id"], sort=True)
    labels = pd.Categorical(human["label"], categories=LABELS).codes.astype(np.int64)
    known = labels >= 0
    n_units = int(units.max()) + 1 if len(units) else 0
    counts = np.bincount(
        units[known] * len(LABELS) + labels[known], minlength=n_units * len(LABELS)
    ).reshape(n_units, len(LABELS))
    return counts, np.asarray(pair_ids)


def _fleiss_generalized(
    human: pd.DataFrame, params: ReportParams, prompt_of: pd.Series
) -> FleissResult:
    """Fleiss' kappa generalised to varying numbers of votes (Gwet 2014) over every unit with
    two or more votes, with the same bootstrap as the modal-count kappa."""
    counts, pair_ids = _unit_counts(human)
    rated = counts.sum(axis=1) >= 2
    if not rated.any():
        return FleissResult(float("nan"), 0, None, 0)
    clusters = None
    if params.resample == "prompt":
        clusters = prompt_of.reindex(pair_ids[rated]).to_numpy()
    kappa = fleiss_kappa_generalized_interval(
        counts[rated],
        clusters,
        rounds=params.ci_rounds,
        confidence=params.confidence,
        seed=params.seed,
    )
    units = int(rated.sum())
    return FleissResult(kappa.estimate, units, None, units, _reliability_ci(kappa, params))


def _fleiss_table(
    human: pd.DataFrame,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[Any], int, int | None]:
    """The units x (A, B, tie) counts of the units rated by the most common number (>= 2) of
    votes, their pair ids, how many units have two or more votes, and that number (None when
    none has).

    The counts come from label codes per unit (votes without a label left out), units in pair
    id order; the most common number of votes is the smallest on a tie."""
    counts, pair_ids = _unit_counts(human)
    per_unit = counts.sum(axis=1)
    rated = per_unit[per_unit >= 2]
    if rated.size == 0:
        return counts[:0], np.asarray(pair_ids)[:0], 0, None
    modal = int(np.bincount(rated).argmax())
    chosen = per_unit == modal
    return counts[chosen], np.asarray(pair_ids)[chosen], int(rated.size), modal


def _reliability_ci(interval: BootstrapInterval, params: ReportParams) -> ReliabilityCI:
    return ReliabilityCI(
        interval.lower,
        interval.upper,
        interval.confidence,
        interval.rounds,
        params.resample,
        interval.clusters,
    )


def _reliability(
    human: pd.DataFrame, params: ReportParams, prompt_of: pd.Series
) -> tuple[FleissResult, AlphaResult]:
    """Fleiss' kappa on the units rated by the most common number (>= 2) of votes (Fleiss 1971
    needs the same number of ratings per unit; how many units that leaves out is kept) and
    Krippendorff's alpha (nominal on the preference, ordinal on the Likert scores), each with
    its bootstrap interval over prompts or units (``params.resample``), ``params.ci_rounds``
    rounds from ``params.seed``. The estimates are the intervals' own (the same functions of
    the same counts), so each statistic's counts are made once."""
    by_prompt = params.resample == "prompt"
    rounds, confidence, seed = params.ci_rounds, params.confidence, params.seed
    table, pair_ids, rated, modal = _fleiss_table(human)
    if modal is None:
        fleiss = FleissResult(float("nan"), 0, None, 0)
    else:
        clusters = prompt_of.reindex(pair_ids).to_numpy() if by_prompt else None
        kappa = fleiss_kappa_interval(
            table, clusters, rounds=rounds, confidence=confidence, seed=seed
        )
        fleiss = FleissResult(
            kappa.estimate, len(table), modal, rated, _reliability_ci(kappa, params)
        )

    def alpha_interval(frame: pd.DataFrame, values: Any, level: Level) -> BootstrapInterval:
        clusters = prompt_of.reindex(frame["pair_id"]).to_numpy() if by_prompt else None
        return krippendorff_alpha_interval(
            frame["pair_id"].to_numpy(),
            values,
            level,
            clusters,
            rounds=rounds,
            confidence=confidence,
            seed=seed,
        )

    nominal = alpha_interval(human, human["label"], "nominal")
    likert = human.dropna(subset=["likert"])
    ordinal = (
        alpha_interval(likert, likert["likert"].astype(float).to_numpy(), "ordinal")
        if not likert.empty
        else None
    )
    alpha = AlphaResult(
        nominal.estimate,
        None if ordinal is None else ordinal.estimate,
        _reliability_ci(nominal, params),
        None if ordinal is None else _reliability_ci(ordinal, params),
    )
    return fleiss, alpha


def _kappas(
    judge: pd.DataFrame, human: pd.DataFrame, people: pd.Series
) -> tuple[Kappa, WeightedKappa]:
    """Cohen's kappa of the judge against the people's majority label, unit by unit, and the
    quadratic-weighted kappa of canonical Likert scores vote by vote when both have them."""
    import pandas as pd

    # The judge's labels meet the people's majority by pair id, as label codes.
    people_ids = people.index.to_numpy(dtype=np.int64)
    judge_ids = judge["pair_id"].to_numpy(dtype=np.int64)
    at = np.minimum(np.searchsorted(people_ids, judge_ids), max(len(people_ids) - 1, 0))
    on = people_ids[at] == judge_ids if len(people_ids) else np.zeros(len(judge), dtype=bool)
    units = int(on.sum())
    kappa = (
        cohen_kappa(
            pd.Categorical(judge["label"], categories=LABELS).codes.astype(np.int64)[on],
            pd.Categorical(people.to_numpy(), categories=LABELS).codes.astype(np.int64)[at[on]],
            categories=range(len(LABELS)),
        )
        if units
        else float("nan")
    )
    judged = judge.dropna(subset=["likert"])
    rated = human.dropna(subset=["likert"])
    weighted = float("nan")
    n_weighted = 0
    if not judged.empty and not rated.empty:
        judge_pairs = judged["pair_id"].to_numpy()
        order = np.argsort(judge_pairs, kind="stable")
        sorted_pairs = judge_pairs[order]
        if (sorted_pairs[1:] == sorted_pairs[:-1]).any():
            raise ValueError("a judge source has two votes on one pair")
        # Each person's vote meets the judge's one vote on the same pair.
        human_pairs = rated["pair_id"].to_numpy()
        at = np.minimum(np.searchsorted(sorted_pairs, human_pairs), len(sorted_pairs) - 1)
        met = sorted_pairs[at] == human_pairs
        # A judge's two orders may average to a half point; its vote is rounded half up.
        judge_likert = judged["likert"].to_numpy(dtype=np.float64)[order][at[met]]
        n_weighted = int(met.sum())
        if n_weighted:
            weighted = cohen_kappa(
                np.floor(judge_likert + 0.5).astype(np.int64),
                rated["likert"].to_numpy(dtype=np.float64)[met].astype(np.int64),
                "quadratic",
                categories=list(range(1, 9)),
            )
    return Kappa(kappa, units), WeightedKappa(weighted, "quadratic", n_weighted)


def _weighted(
    judge: pd.DataFrame,
    human: pd.DataFrame,
    propensities: pd.DataFrame,
    prompt_of: pd.Series,
    regular_pairs: int,
    gold_pairs: npt.NDArray[Any],
    params: ReportParams,
    every_judge: pd.DataFrame,
) -> dict[str, WeightedAgreement | None]:
    """The Hajek-weighted agreement of a judge with people, and the same votes post-stratified,
    with ties and without (VsHuman's fields of those names; empty for a uniform study).

    Each human vote on a pair the judge voted on agrees by the share of the judge's votes there
    that name the person's label (so ``sum agree`` over the votes is the vote-level count of
    agreeing vote pairs per judge vote), weighted by 1 / its propensity; a vote without a
    recorded one by 1 / k (a uniform draw). Gold pairs are left out: the active draw never takes
    them. The post-stratified estimate (leaderboard.stats.active.poststratified_agreement) puts
    every regular pair the judge voted on into its stratum (agreement_strata: the judge's verdict
    a tie or not, and ``every_judge``'s calls on the pair disputed or not) and weighs each
    stratum's Hajek mean by its share of those pairs. Without ties (the paper's S2), a person's
    side is compared with the judge's votes on the pair that name a side, the same estimators
    taking the ratio of agreeing comparisons to comparisons made."""
    import pandas as pd

    if not len(propensities) or not len(judge) or not len(human) or regular_pairs < 1:
        return {}
    judge = judge[judge["label"].notna() & ~judge["pair_id"].isin(gold_pairs)]
    if not len(judge):
        return {}
    shares = pd.crosstab(judge["pair_id"], judge["label"].astype(str), normalize="index")
    mine = human[human["pair_id"].isin(shares.index)]
    if not len(mine):
        return {}
    labels = mine["label"].astype(str).to_numpy()
    rows = shares.index.get_indexer(pd.Index(mine["pair_id"].to_numpy()))
    columns = shares.columns.get_indexer(pd.Index(labels))
    table = shares.to_numpy()
    agree = np.where(columns >= 0, table[rows, np.maximum(columns, 0)], 0.0)
    # A worker judges a pair once (one open assignment per worker and pair): (pair, rater) keys.
    recorded = propensities.drop_duplicates(["pair_id", "rater"]).set_index(["pair_id", "rater"])
    keys = pd.MultiIndex.from_arrays([mine["pair_id"].to_numpy(), mine["rater"].astype(str)])
    propensity = pd.Series(recorded["propensity"].reindex(keys).to_numpy(), index=mine.index)
    recorded_q = propensity.notna().to_numpy()
    q = propensity.fillna(1.0 / regular_pairs).clip(upper=1.0).to_numpy(dtype=np.float64)
    prompts = prompt_of.reindex(mine["pair_id"]).to_numpy()
    calls = every_judge[every_judge["label"].notna()]
    calls = calls[calls["pair_id"].isin(shares.index)]
    counts = pd.crosstab(calls["pair_id"], calls["label"].astype(str))
    counts = counts.reindex(shares.index).fillna(0.0)
    tie_share = shares["tie"].to_numpy() if "tie" in shares.columns else np.zeros(len(shares))
    disputed = (
        disagreement_share(counts.to_numpy()) if counts.shape[1] >= 2 else np.zeros(len(shares))
    )
    strata = agreement_strata(tie_share >= 0.5, disputed)
    # Without ties: a person's tie makes no comparison; a side is compared with the judge's
    # votes on the pair that are not a tie (d), and agrees with those naming that side.
    sided = labels != "tie"
    compared = np.where(sided, 1.0 - tie_share[rows], 0.0)
    rates: dict[str, WeightedAgreement | None] = {}
    for suffix, a, d, counted in (
        ("", agree, None, np.ones(len(mine), dtype=bool)),
        ("_without_ties", np.where(sided, agree, 0.0), compared, compared > 0),
    ):
        votes, known = int(counted.sum()), int(recorded_q[counted].sum())
        if not votes:  # without ties, every vote or every judge vote may be a tie
            rates[f"weighted{suffix}"] = rates[f"poststratified{suffix}"] = None
            continue
        rounds, confidence, seed = params.ci_rounds, params.confidence, params.seed
        hajek = hajek_agreement(
            a, q, prompts, compared=d, rounds=rounds, confidence=confidence, seed=seed
        )
        post = poststratified_agreement(
            a,
            1.0 / q,
            prompts,
            strata[rows],
            pool_clusters=prompt_of.reindex(shares.index).to_numpy(),
            pool_strata=strata,
            compared=d,
            rounds=rounds,
            confidence=confidence,
            seed=seed,
        )
        rates[f"weighted{suffix}"] = _result(hajek, votes, known, "hajek")
        rates[f"poststratified{suffix}"] = _result(post, votes, known, "poststratified")
    return rates


def _weighted_row(
    name: str, ties: str, rate: WeightedAgreement
) -> tuple[str, str, float, float, float, str]:
    """A reliability-table row of an active study's weighted agreement."""
    if rate.method == "poststratified":
        what = "post-stratified by the judges' verdicts (Hajek within strata; active selection)"
        how = f"{rate.votes} human votes in 4 strata (judge tie or not, judges disputed or not)"
    else:
        what = "propensity-weighted (Hajek; active selection)"
        how = (
            f"{rate.votes} human votes, {rate.recorded} with a recorded propensity; reads high "
            "once the overlap cap has filled the disputed pairs (docs/active.md), so read the "
            "post-stratified row above"
        )
    return (
        f"{name} vs human",
        f"agreement {ties}, {what}",
        rate.estimate,
        rate.lower,
        rate.upper,
        f"{how}; bootstrap over {rate.prompts} prompts",
    )


def _result(result: BootstrapInterval, votes: int, known: int, method: str) -> WeightedAgreement:
    return WeightedAgreement(
        result.estimate,
        result.lower,
        result.upper,
        result.confidence,
        result.rounds,
        votes,
        known,
        result.clusters,
        method,
    )


def _labels(frame: pd.DataFrame) -> dict[str, int]:
    return {label: int((frame["label"] == label).sum()) for label in LABELS}


def agreement_compute(data: ReportData) -> AgreementResult:
    """Every number of the agreement section from the report's frames."""
    import pandas as pd

    votes, params = data.votes, data.params
    human = votes.human
    counts = Counts(
        units=len(votes.pairs),
        human_votes=len(human),
        human_raters=int(human["rater"].nunique()),
        units_with_human_votes=int(human["pair_id"].nunique()),
        judge_calls=len(votes.calls),
        human_labels=_labels(human),
    )
    prompt_of = votes.pairs.set_index("pair_id")["prompt_id"]
    s1, s2, ci = _with_ci(human, None, params, prompt_of)
    fleiss, alpha = _reliability(human, params, prompt_of)
    people = HumanVsHuman(s1, s2, ci, fleiss, alpha, _fleiss_generalized(human, params, prompt_of))
    gold = votes.pairs["is_gold"].astype(bool)
    regular_pairs = int((~gold).sum())
    gold_pairs = votes.pairs.loc[gold, "pair_id"].to_numpy()
    judges = {}
    # Every judge's calls, each order on its own, and their combined votes (an imported run may
    # have only these): a pair is disputed when any of them differ.
    every_judge = pd.concat(
        [
            votes.calls[["pair_id", "label"]],
            *(data.frames[source.name][["pair_id", "label"]] for source in votes.sources),
        ]
    )
    for source in votes.sources:
        mine = data.frames[source.name]
        s1, s2, ci = _with_ci(mine, human, params, prompt_of)
        rates = _weighted(
            mine,
            human,
            data.read(PROPENSITIES).frame,
            prompt_of,
            regular_pairs,
            gold_pairs,
            params,
            every_judge,
        )
        cohen, weighted_kappa = _kappas(mine, human, data.majority)
        judges[source.name] = JudgeAgreement(
            judge=source.judge_name,
            kind=source.judge_kind,
            model_name=source.model_name,
            run_id=source.run_id,
            run_status=source.status,
            votes=len(mine),
            labels=_labels(mine),
            vs_human=VsHuman(
                s1,
                s2,
                ci,
                _tie_counts(mine, human, "majority") if len(mine) else None,
                cohen,
                weighted_kappa,
                **rates,
            ),
        )
    pairs = []
    for a, b in itertools.combinations(sorted(data.judge_names), 2):
        both = _tie_counts(data.frames[a], data.frames[b], "vote")
        pairs.append(JudgePair(a, b, both.with_ties, both.without_ties))
    return AgreementResult(counts, people, judges, pairs)


def _ends(ci: ReliabilityCI | None) -> tuple[float | None, float | None]:
    return (None, None) if ci is None else (ci.lower, ci.upper)


def _drawn(ci: ReliabilityCI | None) -> str:
    """Which units a reliability coefficient used, as the table says it."""
    if ci is None:
        return ""
    unit = "prompts" if ci.resample == "prompt" else "units"
    return f"units with 2+ votes; interval over {ci.drawn} {unit}"


def _reliability_note(people: HumanVsHuman) -> str:
    """The unit and rounds of the Fleiss and alpha intervals."""
    ci = people.fleiss_kappa.ci or people.krippendorff_alpha.nominal_preference_ci
    if ci is None:
        return ""
    unit = "prompts" if ci.resample == "prompt" else "units"
    return f" Intervals ({ci.confidence:.0%}): bootstrap over {unit}, {ci.rounds} rounds."


def _cells(count: AgreementCount | None) -> tuple[Any, Any, Any]:
    if count is None:
        return (None, None, None)
    return (count.rate, count.agree, count.total)


def _pair_cells(with_ties: AgreementCount, without_ties: AgreementCount) -> tuple[Any, ...]:
    return (*_cells(with_ties), *_cells(without_ties))


def tie_share(labels: Mapping[str, int]) -> float | None:
    """Share of a source's votes that are ties: n_tie / (n_A + n_tie + n_B); None with no votes."""
    total = sum(labels.get(label, 0) for label in LABELS)
    return labels.get("tie", 0) / total if total else None


def tie_rows(result: AgreementResult) -> tuple[tuple[Any, ...], ...]:
    """People's and each judge's votes, ties and tie share (the ties table)."""
    sources = [("people", result.counts.human_votes, result.counts.human_labels)]
    sources += [
        (name, result.judges[name].votes, result.judges[name].labels)
        for name in sorted(result.judges)
    ]
    return tuple(
        (
            name,
            votes,
            labels.get("tie", 0),
            tie_share(labels),
            labels.get("A", 0),
            labels.get("B", 0),
        )
        for name, votes, labels in sources
    )


class AgreementSection(Section[AgreementResult]):
    key = "agreement"
    title = "Agreement"
    definition = (
        "How often two sources vote the same on a unit (prompt, pair of answers, turn), with and "
        "without ties, and the same corrected for chance."
    )
    result_type = AgreementResult
    reads = (PROPENSITIES,)
    json_keys = ("counts", "human_vs_human", "judges", "judge_vs_judge")

    def compute(self, data: ReportData) -> AgreementResult:
        return agreement_compute(data)

    def payload_keys(self) -> tuple[str, ...]:
        return self.json_keys

    def dump(self, result: AgreementResult) -> dict[str, Any]:
        return {key: to_json(getattr(result, key)) for key in self.json_keys}

    def load(self, payload: Mapping[str, Any]) -> AgreementResult:
        return cast(
            AgreementResult, from_json(AgreementResult, {k: payload[k] for k in self.json_keys})
        )

    def tables(self, result: AgreementResult, context: RenderContext) -> list[Table]:
        people = result.human_vs_human
        rows: list[tuple[Any, ...]] = [
            ("human vs human", "vote", *_pair_cells(people.with_ties, people.without_ties))
        ]
        for name in sorted(result.judges):
            vs = result.judges[name].vs_human
            rows.append((f"{name} vs human", "vote", *_pair_cells(vs.with_ties, vs.without_ties)))
            if vs.majority is not None:
                rows.append(
                    (
                        f"{name} vs human",
                        "majority",
                        *_pair_cells(vs.majority.with_ties, vs.majority.without_ties),
                    )
                )
        for pair in result.judge_vs_judge:
            rows.append(
                (f"{pair.a} vs {pair.b}", "vote", *_pair_cells(pair.with_ties, pair.without_ties))
            )
        agreement = Table(
            "agreement",
            "Agreement",
            (
                "comparison",
                "level",
                "with ties: rate",
                "with ties: agree",
                "with ties: total",
                "without ties: rate",
                "without ties: agree",
                "without ties: total",
            ),
            tuple(rows),
            note=context.definition,
        )
        fleiss, alpha = people.fleiss_kappa, people.krippendorff_alpha
        fleiss_on = (
            f"{fleiss.units} of {fleiss.rated_units} units with 2+ votes: those with "
            f"{fleiss.votes_per_unit} votes, the most common number"
            if fleiss.votes_per_unit is not None
            else "no overlapping human votes"
        )
        reliability: list[tuple[Any, ...]] = [
            ("human vs human", "Fleiss' kappa", fleiss.kappa, *_ends(fleiss.ci), fleiss_on),
        ]
        general = people.fleiss_kappa_generalized
        if general is not None:
            reliability.append(
                (
                    "human vs human",
                    "Fleiss' kappa, generalised (varying votes per unit)",
                    general.kappa,
                    *_ends(general.ci),
                    f"all {general.units} units with 2+ votes (Gwet 2014)",
                )
            )
        reliability += [
            (
                "human vs human",
                "Krippendorff's alpha (nominal, preference)",
                alpha.nominal_preference,
                *_ends(alpha.nominal_preference_ci),
                _drawn(alpha.nominal_preference_ci),
            ),
            (
                "human vs human",
                "Krippendorff's alpha (ordinal, Likert)",
                alpha.ordinal_likert,
                *_ends(alpha.ordinal_likert_ci),
                _drawn(alpha.ordinal_likert_ci),
            ),
        ]
        for name in sorted(result.judges):
            vs = result.judges[name].vs_human
            reliability.append(
                (
                    f"{name} vs human",
                    "Cohen's kappa vs majority",
                    vs.cohen_kappa_vs_majority.kappa,
                    None,
                    None,
                    f"{vs.cohen_kappa_vs_majority.units} units",
                )
            )
            reliability.append(
                (
                    f"{name} vs human",
                    "weighted kappa (quadratic, Likert)",
                    vs.weighted_kappa_likert.kappa,
                    None,
                    None,
                    f"{vs.weighted_kappa_likert.pairs} vote pairs",
                )
            )
            for kind, rates in (
                # The post-stratified estimate first: under a live study's capped draws it is
                # the unbiased one (docs/active.md, "What 'from the last recompute' costs").
                ("with ties", (vs.poststratified, vs.weighted)),
                ("without ties", (vs.poststratified_without_ties, vs.weighted_without_ties)),
            ):
                for rate in rates:
                    if rate is not None:
                        reliability.append(_weighted_row(name, kind, rate))
        ci = people.ci
        unit = f"{ci.prompts} prompts" if ci.resample == "prompt" else f"{ci.units} units"
        agreement = Table(
            agreement.name,
            agreement.title,
            agreement.columns,
            agreement.rows,
            note=f"{agreement.note} Intervals: bootstrap over {unit}, {ci.rounds} rounds.",
        )
        ties = Table(
            "ties",
            "How often each source votes a tie",
            ("source", "votes", "ties", "tie share", "A", "B"),
            tie_rows(result),
            note=(
                "A judge that ties far more or less often than people cannot agree with them on "
                "those votes whatever it prefers; tie share = ties / votes. A PL judge ties when "
                "its calibrated P(B better) is in [3/8, 5/8) (docs/reward-model.md)."
            ),
        )
        return [
            agreement,
            ties,
            Table(
                "reliability",
                "Chance-corrected agreement",
                ("comparison", "statistic", "value", "lower", "upper", "computed on"),
                tuple(reliability),
                note=RELIABILITY_NOTE + _reliability_note(people),
            ),
        ]


SECTION = AgreementSection()
