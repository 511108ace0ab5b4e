"""The strict parsers: a reply either says one thing in the asked format or is a parse error."""

from __future__ import annotations

import pytest

from judges.llm.parsing import (
    likert_canonical,
    likert_parse,
    likert_side,
    side_canonical,
    two_scores_parse,
    values_parse,
    verdict_canonical,
    verdict_parse,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("3\nThe first reply is more precise.", 3),
        ("  8  \n\nThe second is far better.", 8),
        ("**2**\nThe first answers the question.", 2),
        ("5.\nAlmost the same.", 5),
        ("\n\n1\nOnly the first is correct.", 1),
        ("4", 4),
    ],
)
def test_likert_reply_with_a_score_alone_on_the_first_line_parses(raw, expected):
    result = likert_parse(raw)
    assert result.ok
    assert result.likert_shown == expected
    assert result.raw == raw


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ("0\nBoth are bad.", "outside 1-8"),
        ("9\nThe second is perfect.", "outside 1-8"),
        ("Score: 3\nThe first is better.", "more than the score"),
        ("3 6\nHard to say.", "more than one number"),
        ("3/8\nThe first is better.", "more than one number"),
        ("The first reply is clearly better.", "no score"),
        ("4.5\nAbout equal.", "not a whole number"),
        ("", "empty reply"),
        ("-2\nNo.", "outside 1-8"),
    ],
)
def test_likert_reply_out_of_format_is_a_parse_error_never_a_guess(raw, error):
    result = likert_parse(raw)
    assert not result.ok
    assert error in result.parse_error
    assert result.likert_shown is None
    assert result.raw == raw


@pytest.mark.parametrize(
    "raw",
    [
        "I can't help with that.",
        "I'm sorry, but I cannot compare these answers.",
        "As an AI, I do not have personal preferences.",
        "I cannot evaluate content of this kind.",
    ],
)
def test_refusal_is_recorded_as_a_refusal_with_its_text(raw):
    result = likert_parse(raw)
    assert result.refusal
    assert result.parse_error.startswith("refusal")
    assert result.raw == raw


def test_an_explanation_that_mentions_inability_after_a_valid_score_is_not_a_refusal():
    result = likert_parse("4\nI cannot tell them apart; both are fine.")
    assert result.ok and not result.refusal and result.likert_shown == 4


@pytest.mark.parametrize(
    ("raw", "first", "second", "winner"),
    [
        ("7 4\nThe first is more complete.", 7.0, 4.0, "first"),
        ("3, 9\nSecond wins.", 3.0, 9.0, "second"),
        ("6 6\nSame quality.", 6.0, 6.0, "tie"),
        ("10 1", 10.0, 1.0, "first"),
    ],
)
def test_two_scores_on_the_first_line_parse(raw, first, second, winner):
    result = two_scores_parse(raw)
    assert result.ok
    assert (result.score_first, result.score_second, result.winner_shown) == (
        first,
        second,
        winner,
    )


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ("7\nOnly one.", "only one grade"),
        ("7 4 2\nThree.", "more than two numbers"),
        ("11 3\nToo high.", "outside 1-10"),
        ("0 5\nToo low.", "outside 1-10"),
        ("Both are decent.", "not two grades"),
    ],
)
def test_two_scores_out_of_format_are_parse_errors(raw, error):
    result = two_scores_parse(raw)
    assert not result.ok and error in result.parse_error


@pytest.mark.parametrize(
    ("raw", "winner", "label"),
    [
        ("Assistant A is more accurate.\n\n[[A]]", "first", "[[A]]"),
        ("B covers every step. Final verdict: [[B]]", "second", "[[B]]"),
        ("Both are equally good. [[C]]", "tie", "[[C]]"),
        ("[[B]] is my verdict, repeated: [[B]]", "second", "[[B]]"),
    ],
)
def test_verdict_token_parses(raw, winner, label):
    result = verdict_parse(raw)
    assert result.ok
    assert (result.winner_shown, result.verdict_label) == (winner, label)


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ("A is better.", "no verdict token"),
        ("At first [[A]], but on reflection [[B]].", "conflicting"),
        ("[[D]]", "unknown verdict token"),
        ("I'm sorry, I can't judge this.", "refusal"),
    ],
)
def test_verdict_without_exactly_one_token_is_a_parse_error(raw, error):
    result = verdict_parse(raw)
    assert not result.ok and error in result.parse_error


def test_values_reply_names_the_winner_and_known_values():
    result = values_parse("SECOND\nempathy, actionability\nIt acknowledges the worry.")
    assert result.ok
    assert result.winner_shown == "second"
    assert result.values == ("empathy", "actionability")


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ("BOTH\nempathy", "not FIRST or SECOND"),
        ("FIRST", "no values"),
        ("FIRST\nkindness, empathy", "unknown values: kindness"),
    ],
)
def test_values_reply_out_of_format_is_a_parse_error(raw, error):
    result = values_parse(raw)
    assert not result.ok and error in result.parse_error


@pytest.mark.parametrize(
    ("shown", "order", "canonical"),
    [(1, "ab", 1), (1, "ba", 8), (3, "ba", 6), (4, "ba", 5), (8, "ab", 8), (8, "ba", 1)],
)
def test_canonical_likert_is_nine_minus_shown_when_b_came_first(shown, order, canonical):
    assert likert_canonical(shown, order) == canonical


@pytest.mark.parametrize(
    ("value", "side"),
    [(1, "first"), (3, "first"), (4, "tie"), (5, "tie"), (6, "second"), (8, "second")],
)
def test_collapsed_preference_is_1_3_first_4_5_tie_6_8_second(value, side):
    assert likert_side(value) == side


@pytest.mark.parametrize(
    ("side", "order", "preference"),
    [
        ("first", "ab", "A"),
        ("first", "ba", "B"),
        ("second", "ab", "B"),
        ("second", "ba", "A"),
        ("tie", "ba", "tie"),
    ],
)
def test_side_shown_maps_to_canonical_preference(side, order, preference):
    assert side_canonical(side, order) == preference


def test_canonical_verdict_swaps_scores_and_likert_when_b_was_shown_first():
    verdict = verdict_canonical(likert_parse("2\nFirst better."), "ba")
    assert (verdict.likert_shown, verdict.likert, verdict.preference) == (2, 7, "B")
    scores = verdict_canonical(two_scores_parse("8 3"), "ba")
    assert (scores.score_a, scores.score_b, scores.preference) == (3.0, 8.0, "B")


def test_a_parse_error_has_no_canonical_verdict():
    with pytest.raises(ValueError):
        verdict_canonical(likert_parse("nine"), "ab")
