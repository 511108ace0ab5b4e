"""Which prompts the report's AdvisorQA table ranks when PL models are in it."""

from __future__ import annotations

from leaderboard.report.advisorqa import held_out_prompts
from leaderboard.selectors.section_reads import PLSplit


def _split(run_id: int, held: tuple[int, ...] | None, *, here: bool = True) -> PLSplit:
    return PLSplit(
        run_id=run_id,
        judge=f"pl {run_id}",
        trained_here=here,
        known=held is not None or not here,
        held_out=held if here else None,
        seed=run_id,
        holdout=0.25,
    )


def test_the_table_keeps_the_prompts_every_pl_model_trained_here_held_out() -> None:
    splits = (
        _split(1, (10, 11, 12)),
        _split(2, (11, 12, 13)),
        _split(3, None, here=False),  # trained on another study: no restriction from it
        _split(4, None),  # trained here, split not known
        _split(5, (99,)),  # not in the table (no answer scores in this report)
    )
    names = {1: "pl 1 (m)", 2: "pl 2 (m)", 3: "pl 3 (m)", 4: "pl 4 (m)"}
    held, used, unknown = held_out_prompts(splits, names)
    assert held == {11, 12}
    assert used == {
        "pl 1 (m)": "seed 1, held-out share 0.25",
        "pl 2 (m)": "seed 2, held-out share 0.25",
    }
    assert unknown == ["pl 4 (m)"]


def test_without_a_pl_model_trained_here_every_prompt_is_ranked() -> None:
    assert held_out_prompts((_split(3, None, here=False),), {3: "pl 3"}) == (None, {}, [])
    assert held_out_prompts((), {}) == (None, {}, [])
