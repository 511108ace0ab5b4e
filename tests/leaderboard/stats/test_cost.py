"""The held-out agreement of the crowd and the Pareto front, on hand-made examples."""

from __future__ import annotations

import numpy as np
import pandas as pd

from leaderboard.stats.cost import held_out_hits, pareto_front


def test_each_vote_is_compared_with_the_majority_of_the_other_votes() -> None:
    votes = pd.DataFrame(
        {
            # Pair 1: A, A, B -> each A sees {A, B} (a tie: no hit), B sees {A, A} (no hit).
            # Pair 2: B, B, B -> every vote sees {B, B}: hits. Pair 3: one vote, left out.
            # Pair 4: tie, A -> the tie sees {A} (no hit), A sees {tie} (no hit).
            "pair_id": [1, 1, 1, 2, 2, 2, 3, 4, 4],
            "label": ["A", "A", "B", "B", "B", "B", "A", "tie", "A"],
        }
    )
    got = held_out_hits(votes)
    assert got["pair_id"].tolist() == [1, 1, 1, 2, 2, 2, 4, 4]
    assert got["hit"].tolist() == [False, False, False, True, True, True, False, False]


def test_a_tied_majority_of_the_others_is_a_tie() -> None:
    votes = pd.DataFrame({"pair_id": [7, 7, 7], "label": ["tie", "A", "B"]})
    # The tie vote sees {A, B}: a tied count, so "tie": a hit; A sees {tie, B}: tie, no hit.
    assert held_out_hits(votes)["hit"].tolist() == [True, False, False]


def test_the_pareto_front_keeps_what_nothing_beats_on_cost_and_agreement() -> None:
    cost = [1.0, 2.0, 2.0, 5.0, np.nan, 0.5]
    agreement = [0.6, 0.7, 0.65, 0.7, 0.9, 0.4]
    # 0.5 -> 0.4 (cheapest), 1 -> 0.6, 2 -> 0.7 are on the front; 2 -> 0.65 is beaten by
    # 2 -> 0.7, 5 -> 0.7 by 2 -> 0.7; an unknown cost is on no front.
    assert pareto_front(cost, agreement).tolist() == [True, True, False, False, False, True]
