"""The consistency part of the report: contrast items read from the database, and every row
computed from hand-made frames."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from django.conf import LazySettings
from django.test import Client
from django.urls import reverse

from annotation.models import (
    Answer,
    ContrastSet,
    HumanJudgment,
    Pair,
    Prompt,
    Study,
    System,
    Worker,
)
from annotation.services.contrast import ContrastPairSpec, contrast_set_store
from annotation.services.pairs import pairs_generate
from judges.models import AnswerScore
from judges.reward import artifacts
from judges.reward.contrast import contrast_scoring_run
from judges.reward.scoring import pl_run_execute
from judges.services.runs import judge_run_start
from leaderboard.report.consistency import (
    TABLE_COLUMNS,
    SourceInfo,
    consistency_compute,
    consistency_miss_rows,
    consistency_plot_svg,
    consistency_table_rows,
)
from leaderboard.selectors.contrast import (
    ContrastInputs,
    ContrastItemText,
    ScoreJudgeConsistency,
    contrast_inputs_read,
    score_consistency_read,
)
from leaderboard.services.reports import agreement_report_snapshot
from leaderboard.stats.consistency import score_consistency
from tests.conftest import Cast
from tests.judges.reward.conftest import ranked_study
from tests.judges.reward.test_services import train
from tests.leaderboard.conftest import get_computed


def two_prompts(study: Study) -> tuple[Prompt, Prompt, Answer, Answer]:
    system = System.objects.create(study=study, name="s")
    first = Prompt.objects.create(study=study, external_id="x", turns=["How to bake <bread>?"])
    second = Prompt.objects.create(study=study, external_id="y", turns=["How to bake cake?"])
    # The second prompt's answer is created first, so it is answer A of every item.
    answer_y = Answer.objects.create(prompt=second, system=system, turns=["Cake: sugar."])
    answer_x = Answer.objects.create(prompt=first, system=system, turns=["Bread: yeast."])
    return first, second, answer_x, answer_y


def store(study: Study, pairs: list[ContrastPairSpec], seed: int = 0) -> None:
    contrast_set_store(
        study=study,
        seed=seed,
        low=0.75,
        high=0.9,
        best=ContrastSet.Best.FIRST_RANKED,
        system=None,
        backbone="all-MiniLM-L6-v2",
        pairs=pairs,
    )


def test_each_contrast_item_knows_which_answer_belongs_to_the_instruction_shown(
    cast: Cast,
) -> None:
    first, second, answer_x, answer_y = two_prompts(cast.study)
    store(
        cast.study, [ContrastPairSpec(first.pk, second.pk, answer_x.pk, answer_y.pk, 0.8)], seed=4
    )
    pairs_generate(study=cast.study, strategy="contrast", seed=4)

    inputs = contrast_inputs_read(study=cast.study)

    assert (inputs.seed, inputs.low, inputs.high, inputs.best, inputs.pairs) == (
        4,
        0.75,
        0.9,
        "first_ranked",
        1,
    )
    by_prompt = {
        Pair.objects.get(pk=pair_id).prompt_id: item for pair_id, item in inputs.items.items()
    }
    shown_x, shown_y = by_prompt[first.pk], by_prompt[second.pk]
    assert (shown_x.expected, shown_x.own_answer, shown_x.other_answer) == (
        "B",
        "Bread: yeast.",
        "Cake: sugar.",
    )
    assert (shown_x.instruction, shown_x.other_instruction) == (
        "How to bake <bread>?",
        "How to bake cake?",
    )
    assert (shown_y.expected, shown_y.own_answer) == ("A", "Cake: sugar.")


def test_a_study_without_a_contrast_set_reads_as_none(cast: Cast) -> None:
    inputs = contrast_inputs_read(study=cast.study)
    assert inputs.seed is None and inputs.items == {}


def item(pair_id: int, expected: str) -> ContrastItemText:
    return ContrastItemText(
        pair_id=pair_id,
        contrast_pair_id=1,
        expected=expected,  # type: ignore[arg-type]
        instruction=f"I{pair_id}",
        other_instruction="other <I>",
        own_answer=f"r{pair_id}",
        other_answer="<script>alert(1)</script>",
    )


# People: on the items, 2 of 3 votes pick the right answer, one ties; item 100's two votes (A,
# tie) give no majority (a tie), item 101's one vote is right: 1 of 2 items by majority.
ITEM_VOTES = pd.DataFrame([(100, "A"), (100, "tie"), (101, "B")], columns=["pair_id", "label"])
ITEM_CALLS = pd.DataFrame(
    [(100, 1, "ab", "B"), (101, 1, "ab", "B"), (100, 2, "ab", "A"), (101, 2, "ab", "B")],
    columns=["pair_id", "run_id", "order", "label"],
)
CONTRAST = ContrastInputs(
    seed=0,
    low=0.75,
    high=0.9,
    best="first_ranked",
    system="",
    pairs=1,
    items={100: item(100, "A"), 101: item(101, "B")},
    human=ITEM_VOTES,
    calls=ITEM_CALLS,
)
# Regular pairs of one prompt with answers 1, 2, 3 (a triple), and the two contrast items.
PAIRS = pd.DataFrame(
    [
        (10, 7, 1, 1, 2),
        (11, 7, 1, 2, 3),
        (12, 7, 1, 1, 3),
        (100, 7, 1, 1, 9),
        (101, 8, 1, 1, 9),
    ],
    columns=["pair_id", "prompt_id", "turn", "answer_a", "answer_b"],
)
MAJORITY = pd.Series(["A", "A", "A", "A", "B"], index=pd.Index([10, 11, 12, 100, 101]))
CALLS = pd.DataFrame(
    [
        # Run 1 (an LLM judge): a cycle 1 > 2 > 3 > 1, one pair flips with the order.
        (10, 1, "ab", "A"),
        (10, 1, "ba", "A"),
        (11, 1, "ab", "A"),
        (11, 1, "ba", "A"),
        (12, 1, "ab", "B"),
        (12, 1, "ba", "A"),  # orders disagree: the pair's verdict is a tie
        # Run 2 (a PL model): transitive, and right on both items.
        (10, 2, "ab", "A"),
        (11, 2, "ab", "A"),
        (12, 2, "ab", "A"),
    ],
    columns=["pair_id", "run_id", "order", "label"],
).assign(likert=np.nan)  # as the vote frames carry calls (no Likert score here)
SOURCES = [SourceInfo("gpt-judge", 1, "llm"), SourceInfo("pl-model", 2, "pl")]


def test_people_and_judges_get_c_res_swap_invariance_and_transitivity() -> None:
    result = consistency_compute(
        pairs=PAIRS, calls=CALLS, majority=MAJORITY, sources=SOURCES, contrast=CONTRAST
    )
    people, llm, pl = result.rows
    assert people.c_res is not None
    assert (people.c_res.proportion.count, people.c_res.proportion.total) == (1, 2)
    assert people.c_res.ties == 1
    assert people.c_res.proportion.unit == "item (majority of its raters)"
    assert people.c_res_per_vote is not None
    assert (people.c_res_per_vote.proportion.count, people.c_res_per_vote.proportion.total) == (
        2,
        3,
    )
    # Both items belong to one contrast pair: one cluster, too few to resample.
    assert people.c_res.proportion.clusters == 1
    assert people.c_res.proportion.lower is None
    assert people.swap is None
    assert people.transitivity is not None
    assert (people.transitivity.triples, people.transitivity.intransitive) == (1, 0)

    assert llm.c_res is not None
    assert (llm.c_res.proportion.count, llm.c_res.proportion.total) == (1, 2)
    assert llm.swap is not None and llm.swap.proportion is not None
    assert (llm.swap.proportion.count, llm.swap.proportion.total) == (2, 3)
    # Pair 12's orders disagree, so its verdict is a tie and the triple is set apart.
    assert llm.transitivity is not None
    assert (llm.transitivity.triples, llm.transitivity.tied_triples) == (0, 1)

    assert pl.swap is not None and pl.swap.order_invariant and pl.swap.proportion is None
    assert pl.c_res is not None and pl.c_res.proportion.share == 1.0
    assert "1 contrast pairs (seed 0, question cosine in [0.75, 0.9]" in result.message


def test_a_judge_whose_orders_agree_shows_its_cycle() -> None:
    calls = CALLS.copy()
    calls.loc[(calls["pair_id"] == 12) & (calls["run_id"] == 1), "label"] = "B"
    result = consistency_compute(
        pairs=PAIRS, calls=calls, majority=MAJORITY, sources=SOURCES, contrast=CONTRAST
    )
    llm = result.rows[1]
    assert llm.transitivity is not None
    assert (llm.transitivity.triples, llm.transitivity.intransitive) == (1, 1)


def test_the_drill_down_lists_the_items_a_source_got_wrong_with_both_texts() -> None:
    result = consistency_compute(
        pairs=PAIRS, calls=CALLS, majority=MAJORITY, sources=SOURCES, contrast=CONTRAST
    )
    rows = consistency_miss_rows(result)
    assert rows == [
        ("human", "tie", "I100", "r100", "other <I>", "<script>alert(1)</script>"),
        ("gpt-judge", "the other answer", "I100", "r100", "other <I>", "<script>alert(1)</script>"),
    ]


def test_the_table_marks_order_invariant_judges_and_leaves_undefined_cells_empty() -> None:
    result = consistency_compute(
        pairs=PAIRS, calls=CALLS, majority=MAJORITY, sources=SOURCES, contrast=CONTRAST
    )
    people, llm, pl = (
        dict(zip(TABLE_COLUMNS, row, strict=True)) for row in consistency_table_rows(result)
    )
    assert (people["source"], people["kind"]) == ("human", "people")
    assert people["c_res"] == pytest.approx(1 / 2)
    assert people["c_res_per_vote"] == pytest.approx(2 / 3)
    assert people["c_res_interval"] == "none: 1 contrast pair(s), too few to resample"
    assert people["swap_invariance"] is None  # not defined for people
    assert people["c_ins"] is None  # not defined for pairwise verdicts
    assert llm["swap_invariance"] == pytest.approx(2 / 3)
    assert pl["swap_invariance"] == "order-invariant by construction"
    svg = consistency_plot_svg(result)
    assert svg is not None and svg.startswith("<svg") and "gpt-judge" in svg


def test_without_contrast_items_the_message_says_how_to_build_them() -> None:
    empty = ContrastInputs(None, None, None, "", "", 0, {})
    result = consistency_compute(
        pairs=PAIRS, calls=CALLS, majority=MAJORITY, sources=SOURCES, contrast=empty
    )
    assert "build_contrast_set" in result.message
    assert all(row.c_res is None for row in result.rows)


@pytest.fixture
def pl_dirs(settings: LazySettings, tmp_path: Path) -> None:
    """A private embedding cache and artifacts folder for the trained model."""
    settings.CONCORD_REWARD_CACHE_DIR = tmp_path / "embeddings"
    settings.CONCORD_REWARD_ARTIFACTS_DIR = tmp_path / "models"


@pytest.mark.django_db
@pytest.mark.usefixtures("pl_dirs")
def test_a_pl_judge_gets_c_res_and_c_ins_from_its_four_scores_with_and_without_fusion(
    cast: Cast,
) -> None:
    ranked_study(cast.study, prompts=12)
    judge = train(cast, epochs=30).judge
    assert judge is not None
    run = judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    assert pl_run_execute(run_id=run.pk) == "done"
    prompts = list(Prompt.objects.filter(study=cast.study).order_by("pk"))
    best = {a.prompt_id: a for a in Answer.objects.filter(prompt__study=cast.study, rank=1)}
    specs = [
        ContrastPairSpec(p.pk, q.pk, best[p.pk].pk, best[q.pk].pk, 0.8)
        for p, q in zip(prompts[0:8:2], prompts[1:8:2], strict=True)
    ]
    store(cast.study, specs)
    # The run was done before the set existed: the reward_model worker scores it now (queued
    # when a set is built; here at once), and the report reads what it stored.
    assert score_consistency_read(study=cast.study, run_ids=[run.pk]) == {}
    contrast_set = ContrastSet.objects.get(study=cast.study)
    assert contrast_scoring_run(run_id=run.pk, contrast_set_id=contrast_set.pk) == "done"

    found = score_consistency_read(study=cast.study, run_ids=[run.pk])[run.pk]
    stored = dict(AnswerScore.objects.filter(run=run).values_list("answer_id", "score"))
    assert found.answer_scores == stored

    # The model learnt that an answer about another topic is poor, so it beats a random judge
    # (4 comparisons, one per pair as Eq. 2 and 3; 8 in the both-direction extra).
    plain = found.plain()
    assert plain.pairs == 4
    assert plain.c_res.proportion.total == plain.c_ins.proportion.total == 4
    assert plain.c_res_both_directions is not None
    assert plain.c_res_both_directions.proportion.total == 8
    assert plain.c_res_both_directions.proportion.count > 4
    # The same four scores computed directly from the model.
    model = artifacts.artifact_load(judge.params["artifact"])
    texts = {p.pk: p.turns[0] for p in prompts}
    answers = {a.pk: a.turns[0] for a in best.values()}
    direct = [
        model.score(
            [texts[s.prompt_a_id]] * 2 + [texts[s.prompt_b_id]] * 2,
            [answers[s.answer_a_id], answers[s.answer_b_id]] * 2,
        )
        for s in specs
    ]
    assert plain == score_consistency(np.array(direct).reshape(-1, 2, 2))
    # The pool is every scored answer but the contrast pairs' own 8, and what the 16 queries
    # retrieved is kept; none of it answers the query's own two prompts.
    assert found.pool == 12 * 4 - 8
    assert found.retrieval is not None and found.answer_retrieval is not None
    assert (found.retrieval.queries, found.retrieval.pool) == (16, 40)
    assert (found.answer_retrieval.queries, found.answer_retrieval.pool) == (48, 48)
    # The ranked study's answers to one prompt sit above δ = 0.95 from each other (58 such
    # neighbours here): before, those were all that fusion retrieved; now they are left out.
    assert found.answer_retrieval.same_prompt_left_out > 0
    assert found.answer_retrieval.neighbours == 0
    # Nothing has a cosine above 1, so fusion at delta 1 changes nothing.
    at_one = score_consistency_read(study=cast.study, run_ids=[run.pk], delta=1.0)[run.pk]
    assert at_one.fused() == at_one.plain()
    assert at_one.fused_answer_scores == stored


def test_the_report_page_shows_the_consistency_of_people_and_the_items_they_got_wrong_safely(
    client: Client, cast: Cast
) -> None:
    study = cast.study
    first, second, answer_x, answer_y = two_prompts(study)
    Answer.objects.filter(pk=answer_y.pk).update(turns=["<script>alert('cake')</script>"])
    store(study, [ContrastPairSpec(first.pk, second.pk, answer_x.pk, answer_y.pk, 0.8)])
    pairs_generate(study=study, strategy="contrast")
    worker = Worker.objects.create(study=study, panel=Worker.Panel.IMPORTED, external_id="r1")
    for item in Pair.objects.filter(study=study, source=Pair.Source.CONTRAST):
        belongs_to_a = item.answer_a.prompt_id == item.prompt_id
        # Right on the bread item, wrong on the cake item.
        right = item.prompt_id == first.pk
        picks_a = belongs_to_a == right
        HumanJudgment.objects.create(
            study=study,
            pair=item,
            worker=worker,
            is_imported=True,
            likert=2 if picks_a else 7,
            preference="A" if picks_a else "B",
        )

    # The snapshot the page serves (the analysis worker computes it; here, at once).
    payload = agreement_report_snapshot(study=study).payload
    assert payload is not None

    people = payload["consistency"]["rows"][0]
    assert people["source"] == "human"
    assert (people["c_res"]["proportion"]["count"], people["c_res"]["proportion"]["total"]) == (
        1,
        2,
    )
    assert payload["consistency"]["contrast_items"] == 2
    # Contrast items compare no systems: the other sections never see them.
    assert (payload["counts"]["units"], payload["counts"]["human_votes"]) == (0, 0)
    client.force_login(cast.researcher)
    # The page queues the report for the analysis worker; get_computed plays the worker.
    analysis = reverse("leaderboard:study_analysis", args=[study.slug])
    page = get_computed(client, analysis).content.decode()
    assert 'id="consistency"' in page
    assert "Contrast items answered wrongly" in page
    assert "How to bake cake?" in page and "How to bake &lt;bread&gt;?" in page
    assert "&lt;script&gt;alert(" in page
    assert "<script>alert(" not in page


def test_a_score_judge_takes_c_res_from_scores_and_agrees_with_people_with_or_without_fusion() -> (
    None
):
    four = score_consistency(np.array([[[3.0, 1.0], [2.0, 4.0]]]))
    scored = ScoreJudgeConsistency(
        scores=(3.0, 1.0, 2.0, 4.0),
        fused_scores=(1.0, 1.0, 1.0, 1.0),
        delta=0.95,
        pool=0,
        # Plain: answer 1 > 2 > 3 by wide margins; fused: all within a tie of each other.
        answer_scores={1: 2.0, 2: 0.0, 3: -2.0},
        fused_answer_scores={1: 0.1, 2: 0.0, 3: -0.1},
    )
    # People on the regular pairs: 1 over 2, 2 over 3, and 3 over 1.
    human = pd.DataFrame([(10, "A"), (11, "A"), (12, "B")], columns=["pair_id", "label"])
    result = consistency_compute(
        pairs=PAIRS,
        calls=CALLS,
        majority=MAJORITY,
        human=human,
        sources=SOURCES,
        contrast=CONTRAST,
        scores={2: scored},
    )
    pl = result.rows[2]
    assert pl.c_res == four.c_res and pl.c_ins == four.c_ins
    assert pl.fused == scored.fused()
    assert pl.c_res_both_directions == four.c_res_both_directions
    assert pl.agreement is not None and pl.agreement_fused is not None
    assert (pl.agreement.count, pl.agreement.total) == (2, 3)
    assert (pl.agreement_fused.count, pl.agreement_fused.total) == (0, 3)
    # Its verdicts on contrast items are not its C_res, so they are no drill-down rows either.
    assert {miss.source for miss in result.misses} == {"human", "gpt-judge"}
