"""Reads of a study's Contrast Instructions (docs/consistency.md).

- `best_answers_choose`: each prompt's best answer, which a contrast set is built from
  (`leaderboard.services.contrast.contrast_set_build`);
- `consistency_inputs_get`: what the report's consistency section reads besides the votes: the
  study's latest contrast set, its items with the texts the drill-down shows and the votes on
  them (`contrast_inputs_read`), and every PL run's four scores of each contrast pair, plain and
  after RewardFusion (`score_consistency_read`, which reads the scores and embeddings the run's
  model stored, judges.reward.contrast, and loads no model).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from annotation.models import (
    Answer,
    ContrastPair,
    ContrastSet,
    HumanJudgment,
    Pair,
    Study,
    System,
)
from annotation.services.pairs import first_ranked_answer
from judges.models import AnswerScore, JudgeCall
from judges.reward.selectors import contrast_scorings_read
from leaderboard.selectors.reads import Hasher
from leaderboard.stats.consistency import (
    DEFAULT_FUSION_DELTA,
    FusionRetrieval,
    ScoreConsistency,
    fusion_retrieval,
    reward_fusion,
    score_consistency,
)
from leaderboard.stats.majority import people_majority

if TYPE_CHECKING:
    import pandas as pd

HUMAN_ITEM_COLUMNS = ["pair_id", "label"]
CALL_ITEM_COLUMNS = ["pair_id", "run_id", "order", "label"]


def _empty_frame(columns: Sequence[str]) -> pd.DataFrame:
    """An empty frame with these columns: a default of the dataclasses below (pandas is loaded
    only when one is made, so that pages that read snapshots do not load it)."""
    import pandas as pd

    return pd.DataFrame(columns=list(columns))


# --- The best answers a contrast set is built from --------------------------------------------


def _majority_best(study: Study, answers: dict[int, list[Answer]]) -> dict[int, Answer]:
    """Each prompt's answer with the most pairwise wins under the people's majority (a majority
    tie wins nothing); None, so left out, when no answer wins or two share the most wins."""
    import pandas as pd

    rows = (
        HumanJudgment.objects.filter(study=study, excluded=False)
        .exclude(preference="")
        .exclude(pair__source=Pair.Source.CONTRAST)
        .values_list("pair_id", "preference")
    )
    frame = pd.DataFrame(list(rows), columns=["pair_id", "label"])
    majority = people_majority(frame)
    pairs = Pair.objects.filter(pk__in=majority.index.tolist()).values_list(
        "pk", "prompt_id", "answer_a_id", "answer_b_id"
    )
    wins: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for pair_id, prompt_id, answer_a_id, answer_b_id in pairs:
        label = majority[pair_id]
        if label in ("A", "B"):
            wins[prompt_id][answer_a_id if label == "A" else answer_b_id] += 1
    best: dict[int, Answer] = {}
    for prompt_id, tally in wins.items():
        ranked = sorted(tally.items(), key=lambda item: -item[1])
        if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
            continue
        by_id = {answer.pk: answer for answer in answers.get(prompt_id, [])}
        if ranked[0][0] in by_id:
            best[prompt_id] = by_id[ranked[0][0]]
    return best


def best_answers_choose(
    *, study: Study, best: ContrastSet.Best, system: System | None = None
) -> dict[int, Answer]:
    """Return each prompt's best answer by `best`, keyed by prompt id; prompts without one are
    absent. Only usable answers (no uncleared identity leak) are considered.

    - first_ranked: the answer ranked 1 (or with the most upvotes), when unique;
    - majority: the answer with the most wins under the people's majority of each of the
      prompt's pairs (contrast items left out), when unique;
    - system: the named system's answer (a ValueError without `system`).
    """
    answers: dict[int, list[Answer]] = defaultdict(list)
    for answer in Answer.objects.filter(prompt__study=study).order_by("pk"):
        if answer.usable_in_pairs:
            answers[answer.prompt_id].append(answer)
    if best == ContrastSet.Best.FIRST_RANKED:
        chosen = {pid: first_ranked_answer(answers=group) for pid, group in answers.items()}
        return {pid: answer for pid, answer in chosen.items() if answer is not None}
    if best == ContrastSet.Best.MAJORITY:
        return _majority_best(study, answers)
    if system is None:
        raise ValueError("The best answer 'system' needs a system (--system NAME).")
    return {
        pid: answer
        for pid, group in answers.items()
        for answer in group
        if answer.system_id == system.pk
    }


# --- What the consistency section reads ------------------------------------------------------


@dataclass(frozen=True)
class ContrastItemText:
    """One contrast item as the drill-down shows it: the instruction shown and the other one,
    the answer that belongs (r_A) and the other prompt's answer (r_B)."""

    pair_id: int
    contrast_pair_id: int
    expected: Literal["A", "B"]
    instruction: str
    other_instruction: str
    own_answer: str
    other_answer: str


@dataclass(frozen=True)
class ContrastInputs:
    """The study's latest contrast set (None without one), its items by pair id, and the votes
    on them: human (pair_id, label), calls (pair_id, run_id, order, label), canonical labels.
    The report's vote frames leave contrast items out
    (`leaderboard.selectors.frames.not_contrast_item`), so these are read here."""

    seed: int | None
    low: float | None
    high: float | None
    best: str
    system: str
    pairs: int
    items: Mapping[int, ContrastItemText]
    human: pd.DataFrame = field(default_factory=lambda: _empty_frame(HUMAN_ITEM_COLUMNS))
    calls: pd.DataFrame = field(default_factory=lambda: _empty_frame(CALL_ITEM_COLUMNS))


def _first_turn(turns: object) -> str:
    return str(turns[0]) if isinstance(turns, list) and turns else ""


def contrast_inputs_read(*, study: Study, run_ids: Sequence[int] = ()) -> ContrastInputs:
    """Read the study's latest contrast set, the items made from it (texts at turn 1), the
    people's votes on them and the done calls of the runs `run_ids` on them."""
    import pandas as pd

    contrast_set = (
        ContrastSet.objects.filter(study=study).select_related("system").order_by("-pk").first()
    )
    if contrast_set is None:
        return ContrastInputs(None, None, None, "", "", 0, {})
    items = Pair.objects.filter(contrast__contrast_set=contrast_set).select_related(
        "contrast__prompt_a", "contrast__prompt_b", "contrast__answer_a", "contrast__answer_b"
    )
    out: dict[int, ContrastItemText] = {}
    for item in items.order_by("pk"):
        contrast = item.contrast
        assert contrast is not None  # the query follows the item's contrast pair
        shown_a = item.prompt_id == contrast.prompt_a_id
        own, other = (
            (contrast.answer_a, contrast.answer_b)
            if shown_a
            else (contrast.answer_b, contrast.answer_a)
        )
        shown, hidden = (
            (contrast.prompt_a, contrast.prompt_b)
            if shown_a
            else (contrast.prompt_b, contrast.prompt_a)
        )
        out[item.pk] = ContrastItemText(
            pair_id=item.pk,
            contrast_pair_id=contrast.pk,
            expected="A" if own.pk == item.answer_a_id else "B",
            instruction=_first_turn(shown.turns),
            other_instruction=_first_turn(hidden.turns),
            own_answer=_first_turn(own.turns),
            other_answer=_first_turn(other.turns),
        )
    on_items = {"pair_id__in": list(out)}
    human = pd.DataFrame(
        list(
            HumanJudgment.objects.filter(excluded=False, **on_items)
            .exclude(preference="")
            .order_by("pk")
            .values_list("pair_id", "preference")
        ),
        columns=HUMAN_ITEM_COLUMNS,
    )
    calls = pd.DataFrame(
        list(
            JudgeCall.objects.filter(
                run_id__in=list(run_ids), status=JudgeCall.Status.DONE, **on_items
            )
            .exclude(preference="")
            .order_by("pk")
            .values_list("pair_id", "run_id", "order", "preference")
        ),
        columns=CALL_ITEM_COLUMNS,
    )
    return ContrastInputs(
        seed=contrast_set.seed,
        low=contrast_set.low,
        high=contrast_set.high,
        best=contrast_set.best,
        system=contrast_set.system.name if contrast_set.system else "",
        pairs=contrast_set.pairs.count(),
        items=out,
        human=human,
        calls=calls,
    )


@dataclass(frozen=True)
class ScoreJudgeConsistency:
    """A score judge's four scores of each contrast pair, plain and after RewardFusion, and what
    the fusion retrieved (the section computes C_res and C_ins from them with the report's
    parameters).

    ``scores`` and ``fused_scores`` hold h(I_A, r_A), h(I_A, r_B), h(I_B, r_A), h(I_B, r_B) of
    each pair in turn (4 per pair); ``pool`` is how many scored answers the contrast queries
    could retrieve from; ``retrieval`` what they retrieved, ``answer_retrieval`` what every
    scored answer retrieved when fused over the others (``fused_answer_scores``).
    """

    scores: tuple[float, ...]
    fused_scores: tuple[float, ...]
    delta: float
    pool: int
    retrieval: FusionRetrieval | None = None
    answer_retrieval: FusionRetrieval | None = None
    answer_scores: Mapping[int, float] = field(default_factory=dict)
    fused_answer_scores: Mapping[int, float] = field(default_factory=dict)
    # The artifact's fitted temperature (1.0 when uncalibrated): the judge's verdicts, and so its
    # agreement with people, read P = sigmoid((h_B - h_A) / T).
    temperature: float = 1.0

    def plain(self, **params: Any) -> ScoreConsistency:
        """C_res and C_ins of the plain scores (``params``: :func:`score_consistency`'s)."""
        return score_consistency(np.reshape(self.scores, (-1, 2, 2)), **params)

    def fused(self, **params: Any) -> ScoreConsistency:
        """C_res and C_ins after RewardFusion."""
        return score_consistency(np.reshape(self.fused_scores, (-1, 2, 2)), **params)


def score_consistency_read(
    *, study: Study, run_ids: Sequence[int], delta: float = DEFAULT_FUSION_DELTA
) -> dict[int, ScoreJudgeConsistency]:
    """Read every PL run's stored scores of the latest contrast set and fuse them.

    The four scores h(I_A, r_A), h(I_A, r_B), h(I_B, r_A), h(I_B, r_B) of each contrast pair and
    the embeddings the fusion needs were computed by the run's model on the reward_model worker
    and stored (judges.reward.contrast, `ContrastScoring`); no model is loaded here. RewardFusion
    (Eq. 4) retrieves, as the paper intends, from other instructions' examples: the pool is the
    run's scored answers of the study (each under its own prompt, with its stored score) minus
    the contrast pairs' own answers, and a query of contrast pair (I_A, I_B) never retrieves an
    answer to I_A or I_B (other answers to the same prompt sit at cosines near 1 and would pull
    the four scores towards each other). Every scored answer is also fused over the answers to
    other prompts, for the agreement with people with and without fusion. What was retrieved
    (counts, cosines, the same-prompt examples left out) is kept. Runs without a done scoring of
    the latest set (not a PL run, not scored yet, or failed: its artifact missing, say) are
    left out.
    """
    contrast_set = ContrastSet.objects.filter(study=study).order_by("-pk").first()
    if contrast_set is None:
        return {}
    pairs = list(
        ContrastPair.objects.filter(contrast_set=contrast_set)
        .order_by("pk")
        .values_list("prompt_a_id", "prompt_b_id", "answer_a_id", "answer_b_id")
    )
    pair_of_prompt: dict[int, int] = {}
    for k, (prompt_a_id, prompt_b_id, _, _) in enumerate(pairs):
        pair_of_prompt[prompt_a_id] = pair_of_prompt[prompt_b_id] = k
    query_groups = np.repeat(np.arange(len(pairs), dtype=np.int64), 4)
    own = {x for _, _, answer_a_id, answer_b_id in pairs for x in (answer_a_id, answer_b_id)}
    out: dict[int, ScoreJudgeConsistency] = {}
    stored = contrast_scorings_read(contrast_set_id=contrast_set.pk, run_ids=run_ids)
    for run_id, scoring in sorted(stored.items()):
        if scoring.scores.shape != (4 * len(pairs),):
            continue
        scores, queries = scoring.scores, scoring.query_vectors
        row_of = {int(answer_id): k for k, answer_id in enumerate(scoring.answer_ids.tolist())}
        # The run's scored answers that were embedded (all of them: a run's scores are complete
        # once it is done, before it scores a contrast set).
        scored = [
            (answer_id, prompt_id, score)
            for answer_id, prompt_id, score in AnswerScore.objects.filter(run_id=run_id)
            .order_by("answer_id")
            .values_list("answer_id", "answer__prompt_id", "score")
            if answer_id in row_of
        ]
        vectors = (
            scoring.answer_vectors[[row_of[answer_id] for answer_id, _, _ in scored]]
            if scored
            else np.empty((0, queries.shape[1]))
        )
        all_scores = np.array([score for *_, score in scored], dtype=np.float64)
        prompt_ids = np.array([prompt_id for _, prompt_id, _ in scored], dtype=np.int64)
        # A pool example's group: its prompt's contrast pair, else a group of its own prompt.
        train_groups = np.array(
            [pair_of_prompt.get(int(p), len(pairs) + int(p)) for p in prompt_ids], dtype=np.int64
        )
        in_pool = np.array([answer_id not in own for answer_id, *_ in scored], dtype=bool)
        pool = int(in_pool.sum())
        fused = reward_fusion(
            queries,
            scores,
            vectors[in_pool],
            all_scores[in_pool],
            delta=delta,
            query_groups=query_groups,
            train_groups=train_groups[in_pool],
        )
        answer_ids = [answer_id for answer_id, *_ in scored]
        fused_all = (
            reward_fusion(
                vectors,
                all_scores,
                vectors,
                all_scores,
                delta=delta,
                query_groups=prompt_ids,
                train_groups=prompt_ids,
            )
            if scored
            else None
        )
        out[run_id] = ScoreJudgeConsistency(
            scores=tuple(scores.tolist()),
            fused_scores=tuple(fused.scores.tolist()),
            delta=delta,
            pool=pool,
            retrieval=fusion_retrieval(fused, pool=pool),
            answer_retrieval=fusion_retrieval(fused_all, pool=len(scored))
            if fused_all is not None
            else None,
            temperature=scoring.temperature,
            answer_scores=dict(zip(answer_ids, all_scores.tolist(), strict=True)),
            fused_answer_scores=dict(
                zip(
                    answer_ids,
                    (fused_all.scores if fused_all is not None else all_scores).tolist(),
                    strict=True,
                )
            ),
        )
    return out


@dataclass(frozen=True)
class ConsistencyInputs:
    """What the consistency section reads besides the votes: the contrast items and the score
    judges' C_res and C_ins (by run id)."""

    contrast: ContrastInputs
    scores: Mapping[int, ScoreJudgeConsistency]

    def digest(self) -> str:
        """A text naming everything the section's numbers depend on, for the report's data hash."""
        items = sorted(
            (i.pair_id, i.contrast_pair_id, i.expected) for i in self.contrast.items.values()
        )
        scores = sorted((run, repr(s)) for run, s in self.scores.items())
        c = self.contrast
        votes = (c.human.to_json(orient="values"), c.calls.to_json(orient="values"))
        return repr((c.seed, c.low, c.high, c.best, c.system, c.pairs, items, votes, scores))

    def hash_update(self, digest: Hasher) -> None:
        """Feed the report's data hash :meth:`digest` (a read of the report,
        leaderboard.selectors.section_reads.CONSISTENCY)."""
        digest.update(self.digest().encode())


def consistency_inputs_get(*, study: Study, run_ids: Sequence[int]) -> ConsistencyInputs:
    """Read the contrast items and the stored scores of the contrast pairs by the PL runs among
    `run_ids`."""
    return ConsistencyInputs(
        contrast=contrast_inputs_read(study=study, run_ids=run_ids),
        scores=score_consistency_read(study=study, run_ids=run_ids),
    )
