"""Multi-turn judging: which turns a run's calls judge, and what a later turn's call shows.

A pair is at one turn (annotation's Pair.turn, the agreement unit's turn): people who judge it
read every turn up to that one and judge the last, as MT-Bench's experts did, whose published
votes are imported one pair per (question, model pair, turn). A judge's call on a pair judges
the pair's turn by default (Judge.turns ``pair``), so a study whose pairs were made at every turn
gets one call per turn already. A judge whose option is ``each`` also judges the pair at every
other turn of its prompt: a 2-turn prompt's pair is judged at turn 1 and at turn 2, as MT-Bench
judges each question. A turn that the run holds the pair's sibling for (the same prompt and
answers at that turn) is judged on the sibling only, so no (answers, turn) is judged twice in a
run; a turn the run holds no sibling for is judged on the lowest-turn pair of the group.

Every call records its turn (JudgeCall.turn). The report compares people's votes on a pair with
the judge's calls at the pair's turn only (leaderboard.selectors.frames), since that is the turn
people judged; the calls at the other turns are in the calls export and API and on the run and
call pages, and a grading judge's grades at every turn are in the single-grade table.

A call at turn 2 or later of a judge with a multi-turn template (Judge.multi_turn_template) is
rendered from that template, whose ``{conversation}`` holds the whole conversation up to the
judged turn: the user's message of each turn, then each assistant's reply of that turn, in the
order the call shows them (judges.llm.prompts.conversation_block).
"""

from __future__ import annotations

from collections.abc import Sequence

from annotation.models import Pair, Prompt
from judges.models import Turns


def prompt_turn_counts(*, pairs: Sequence[Pair]) -> dict[int, int]:
    """Each of the pairs' prompts' number of user turns (at least 1), in one query."""
    prompt_ids = {pair.prompt_id for pair in pairs}
    return {
        pk: max(1, len(turns or []))
        for pk, turns in Prompt.objects.filter(pk__in=prompt_ids).values_list("pk", "turns")
    }


def pair_call_turns(
    *, turns: str, pairs: Sequence[Pair], turn_counts: dict[int, int] | None = None
) -> dict[int, list[int]]:
    """The turns each pair of a run is judged at, by pair id.

    ``pair``: its own turn. ``each``: its own turn, and for the lowest-turn pair among the run's
    pairs of the same prompt and answers, every turn of the prompt that none of them is at.
    `turn_counts` (prompt id -> its turns) is read when not given.
    """
    if turns != Turns.EACH:
        return {pair.pk: [pair.turn] for pair in pairs}
    counts = turn_counts if turn_counts is not None else prompt_turn_counts(pairs=pairs)
    groups: dict[tuple[int, int, int], list[Pair]] = {}
    for pair in pairs:
        groups.setdefault((pair.prompt_id, pair.answer_a_id, pair.answer_b_id), []).append(pair)
    out: dict[int, list[int]] = {}
    for (prompt_id, _, _), members in groups.items():
        members.sort(key=lambda pair: (pair.turn, pair.pk))
        held = {pair.turn for pair in members}
        for pair in members:
            out[pair.pk] = [pair.turn]
        owner = members[0]
        if owner.contrast_id is not None:
            # A contrast item's answers answer two prompts: it is judged at its own turn only.
            continue
        count = max(counts.get(prompt_id, 1), max(held))
        out[owner.pk] = sorted({owner.turn} | (set(range(1, count + 1)) - held))
    return out
