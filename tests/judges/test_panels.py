"""Panels of judges (juries): members' hand-made verdicts combined by majority, mean Likert and
weighted mean, each against a hand count; the missing-member rule; refusals; access."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client
from django.urls import reverse

from annotation.models import Answer, Pair, Prompt, Study, System
from annotation.roles import Role
from annotation.services.roles import study_member_add
from judges.models import Judge, JudgeCall, JudgeRun
from judges.services.panels import (
    likert_mean,
    likert_round,
    majority_label,
    panel_create,
    panel_run_combine,
)
from judges.services.runs import judge_run_start
from tests.conftest import Cast, make_user
from tests.judges.conftest import panel_run

pytestmark = pytest.mark.django_db


# Likert 1-8 canonical: 2 = A, 7 = B, 4 = tie, unless a test gives its own scores.
LIKERT = {"A": 2, "B": 7, "tie": 4}


def make_pairs(study: Study, n: int) -> list[Pair]:
    s1, s2 = (System.objects.create(study=study, name=name) for name in ("s1", "s2"))
    pairs = []
    for i in range(n):
        prompt = Prompt.objects.create(study=study, external_id=f"q{i}", turns=["?"])
        a = Answer.objects.create(prompt=prompt, system=s1, turns=["x"])
        b = Answer.objects.create(prompt=prompt, system=s2, turns=["y"])
        pairs.append(Pair.objects.create(study=study, prompt=prompt, answer_a=a, answer_b=b))
    return pairs


def member_run(
    study: Study,
    name: str,
    verdicts: dict[tuple[int, str], int | str | None],
    *,
    cost: Decimal = Decimal(0),
    kind: str = "llm",
) -> JudgeRun:
    """A done run of a new judge with one call per (pair id, order): a Likert score (its
    collapsed label the preference), a bare label (no Likert), or None (did not parse)."""
    judge = Judge.objects.create(name=name, kind=kind, study=study)
    run = JudgeRun.objects.create(judge=judge, study=study, status="done")
    for (pair_id, order), verdict in verdicts.items():
        call = JudgeCall(run=run, pair_id=pair_id, order=order, status="done", cost_usd=cost)
        if isinstance(verdict, int):
            call.likert = verdict
            call.preference = "A" if verdict <= 3 else "B" if verdict >= 6 else "tie"
        elif isinstance(verdict, str):
            call.preference = verdict
        else:
            call.parse_error = "no score on the first line"
        call.save()
    run.pairs.set({pair_id for pair_id, _ in verdicts})
    return run


def panel_calls(run: JudgeRun) -> dict[tuple[int, str], JudgeCall]:
    return {(c.pair_id, c.order): c for c in JudgeCall.objects.filter(run=run)}  # type: ignore[misc]


def test_majority_label_is_the_most_votes_and_a_shared_most_is_a_tie() -> None:
    assert majority_label(["A", "A", "B"]) == "A"
    assert majority_label(["B", "tie", "B"]) == "B"
    assert majority_label(["A", "B"]) == "tie"
    assert majority_label(["A", "B", "tie"]) == "tie"
    assert majority_label(["A", "A", "tie", "tie"]) == "tie"
    assert majority_label(["tie", "tie", "A"]) == "tie"


@pytest.mark.parametrize(
    ("mean", "rounded"),
    [
        ("1", 1),
        ("1.6667", 2),
        ("3.2", 3),
        ("3.5", 4),  # a half goes towards the middle: "slightly A" and "equal" is equal
        ("2.5", 3),
        ("5.5", 5),
        ("6.5", 6),
        ("4.5", 4),
        ("5.51", 6),
        ("7.5", 7),
        ("8", 8),
    ],
)
def test_a_mean_likert_rounds_to_the_nearest_score_and_a_half_towards_the_middle(
    mean: str, rounded: int
) -> None:
    assert likert_round(Decimal(mean)) == rounded


def test_likert_mean_is_the_weighted_mean_in_decimals() -> None:
    scores = [Decimal(2), Decimal(3), Decimal(7)]
    assert likert_mean(scores, [Decimal(1)] * 3) == Decimal(4)
    assert likert_mean(scores, [Decimal(3), Decimal(1), Decimal(1)]) == Decimal("3.2")


@pytest.fixture
def three_members(cast: Cast) -> tuple[list[Pair], list[JudgeRun]]:
    """Three members on four pairs in both orders (pair 3 also unjudged by the third member)."""
    pairs = make_pairs(cast.study, 5)
    p = [pair.pk for pair in pairs]
    # Per member: pair index -> (score A first, score B first) in canonical terms.
    scores = {
        "m1": {0: (2, 2), 1: (2, 1), 2: (7, 6), 3: (4, 4), 4: (2, 7)},
        "m2": {0: (3, 3), 1: (7, 8), 2: (8, 7), 3: (4, 5), 4: (3, 6)},
        "m3": {0: (7, 7), 1: (4, 4), 2: (5, 4), 4: (1, 8)},
    }
    cost = {"m1": Decimal("0.001"), "m2": Decimal("0.002"), "m3": Decimal("0.010")}
    runs = [
        member_run(
            cast.study,
            name,
            {(p[i], o): s[k] for i, s in table.items() for k, o in enumerate(("ab", "ba"))},
            cost=cost[name],
        )
        for name, table in scores.items()
    ]
    return pairs, runs


def test_a_majority_panel_gives_each_pair_and_order_the_hand_counted_majority(
    cast: Cast, three_members: tuple[list[Pair], list[JudgeRun]]
) -> None:
    pairs, runs = three_members
    members = [run.judge for run in runs]
    panel = panel_create(name="jury", study=cast.study, members=members, rule="majority")
    run = panel_run(judge=panel, study=cast.study, user=cast.researcher)
    assert run.status == JudgeRun.Status.DONE and run.judge == panel
    assert set(run.panel_sources.all()) == set(runs)
    calls = panel_calls(run)
    p = [pair.pk for pair in pairs]
    # By hand, from the scores above collapsed (1-3 A, 4-5 tie, 6-8 B):
    # pair 0: A A B | A A B -> A, A; pair 1: A B tie | A B tie -> tie, tie;
    # pair 2: B B tie | B B tie -> B, B; pair 4: A A A | B B B -> A, B.
    expected = {
        (p[0], "ab"): "A",
        (p[0], "ba"): "A",
        (p[1], "ab"): "tie",
        (p[1], "ba"): "tie",
        (p[2], "ab"): "B",
        (p[2], "ba"): "B",
        (p[4], "ab"): "A",
        (p[4], "ba"): "B",
    }
    for key, label in expected.items():
        assert calls[key].preference == label, key
        assert calls[key].likert is None  # a majority keeps no Likert
        assert calls[key].cost_usd == 0
    # The request names the member calls used, by member.
    used = calls[(p[0], "ab")].request["member_calls"]
    assert used == {
        r.judge.name: [JudgeCall.objects.get(run=r, pair_id=p[0], order="ab").pk] for r in runs
    }
    # Pair 3: m3 never judged it, so the panel gives no verdict and says who is missing.
    for order in ("ab", "ba"):
        missing = calls[(p[3], order)]
        assert missing.preference == "" and "m3" in missing.parse_error
        assert "m1" not in missing.parse_error
    assert len(calls) == 10


def test_a_mean_likert_panel_rounds_the_hand_computed_mean(
    cast: Cast, three_members: tuple[list[Pair], list[JudgeRun]]
) -> None:
    pairs, runs = three_members
    panel = panel_create(
        name="jury", study=cast.study, members=[r.judge for r in runs], rule="mean_likert"
    )
    calls = panel_calls(panel_run(judge=panel, study=cast.study, user=cast.researcher))
    p = [pair.pk for pair in pairs]
    # (2+3+7)/3 = 4 -> 4 tie; (2+7+4)/3 = 4.33 -> 4; (1+8+4)/3 = 4.33 -> 4;
    # (7+8+5)/3 = 6.67 -> 7 B; (6+7+4)/3 = 5.67 -> 6 B; (2+3+1)/3 = 2 A; (7+6+8)/3 = 7 B.
    expected = {
        (p[0], "ab"): (4, "tie"),
        (p[1], "ab"): (4, "tie"),
        (p[1], "ba"): (4, "tie"),
        (p[2], "ab"): (7, "B"),
        (p[2], "ba"): (6, "B"),
        (p[4], "ab"): (2, "A"),
        (p[4], "ba"): (7, "B"),
    }
    for key, (likert, label) in expected.items():
        assert (calls[key].likert, calls[key].preference) == (likert, label), key
    # B shown first: the panel's score as shown is the mirror of its canonical score.
    assert calls[(p[2], "ba")].likert_shown == 3 and calls[(p[2], "ab")].likert_shown == 7
    assert calls[(p[1], "ab")].request["likert_mean"] == str(Decimal(13) / 3)


def test_a_weighted_panel_uses_the_researchers_weights(
    cast: Cast, three_members: tuple[list[Pair], list[JudgeRun]]
) -> None:
    pairs, runs = three_members
    panel = panel_create(
        name="jury",
        study=cast.study,
        members=[r.judge for r in runs],
        rule="weighted",
        weights=[Decimal(3), Decimal(1), Decimal(1)],
    )
    calls = panel_calls(panel_run(judge=panel, study=cast.study, user=cast.researcher))
    p = [pair.pk for pair in pairs]
    # (3*2 + 3 + 7) / 5 = 3.2 -> 3 A (the equal-weight mean was a tie);
    # (3*2 + 7 + 4) / 5 = 3.4 -> 3 A; (3*7 + 8 + 5) / 5 = 6.8 -> 7 B; (3*2 + 3 + 1) / 5 = 2 A.
    assert (calls[(p[0], "ab")].likert, calls[(p[0], "ab")].preference) == (3, "A")
    assert (calls[(p[1], "ab")].likert, calls[(p[1], "ab")].preference) == (3, "A")
    assert (calls[(p[2], "ab")].likert, calls[(p[2], "ab")].preference) == (7, "B")
    assert (calls[(p[4], "ab")].likert, calls[(p[4], "ab")].preference) == (2, "A")
    assert calls[(p[0], "ab")].request["weights"] == {
        "m1": "3.0000",
        "m2": "1.0000",
        "m3": "1.0000",
    }


def test_a_member_asked_in_one_order_votes_with_that_verdict_in_both(cast: Cast) -> None:
    pairs = make_pairs(cast.study, 1)
    pair = pairs[0].pk
    both = member_run(cast.study, "both-orders", {(pair, "ab"): 2, (pair, "ba"): 7})
    one = member_run(cast.study, "one-order", {(pair, "ba"): 6})
    bare = member_run(cast.study, "labels", {(pair, "ab"): "B"})
    panel = panel_create(
        name="jury", study=cast.study, members=[both.judge, one.judge, bare.judge], rule="majority"
    )
    calls = panel_calls(panel_run(judge=panel, study=cast.study, user=cast.researcher))
    # A first: A, B (its only verdict), B -> B; B first: B, B, B (its only verdict) -> B.
    assert calls[(pair, "ab")].preference == "B"
    assert calls[(pair, "ba")].preference == "B"
    one_call = JudgeCall.objects.get(run=one)
    assert calls[(pair, "ab")].request["member_calls"]["one-order"] == [one_call.pk]
    # Under a Likert rule the member without a Likert score leaves the panel without a verdict.
    likert_panel = panel_create(
        name="jury-likert",
        study=cast.study,
        members=[both.judge, one.judge, bare.judge],
        rule="mean_likert",
    )
    calls = panel_calls(panel_run(judge=likert_panel, study=cast.study, user=cast.researcher))
    assert calls[(pair, "ab")].preference == ""
    assert "no Likert score from labels" in calls[(pair, "ab")].parse_error


def test_a_members_failed_call_leaves_that_order_without_a_panel_verdict(cast: Cast) -> None:
    pair = make_pairs(cast.study, 1)[0].pk
    m1 = member_run(cast.study, "m1", {(pair, "ab"): 2, (pair, "ba"): 2})
    m2 = member_run(cast.study, "m2", {(pair, "ab"): None, (pair, "ba"): 3})
    panel = panel_create(
        name="jury", study=cast.study, members=[m1.judge, m2.judge], rule="majority"
    )
    calls = panel_calls(panel_run(judge=panel, study=cast.study, user=cast.researcher))
    assert calls[(pair, "ab")].preference == "" and "m2" in calls[(pair, "ab")].parse_error
    assert calls[(pair, "ba")].preference == "A"


def test_a_panel_is_refused_with_one_member_a_nested_panel_or_a_bad_weight(cast: Cast) -> None:
    pair = make_pairs(cast.study, 1)[0].pk
    m1 = member_run(cast.study, "m1", {(pair, "ab"): 2}).judge
    m2 = member_run(cast.study, "m2", {(pair, "ab"): 3}).judge
    with pytest.raises(ValidationError, match="at least two members"):
        panel_create(name="j", study=cast.study, members=[m1], rule="majority")
    with pytest.raises(ValidationError, match="once"):
        panel_create(name="j", study=cast.study, members=[m1, m1], rule="majority")
    inner = panel_create(name="inner", study=cast.study, members=[m1, m2], rule="majority")
    with pytest.raises(ValidationError, match="cannot sit on a panel"):
        panel_create(name="outer", study=cast.study, members=[inner, m1], rule="majority")
    for bad in (Decimal(0), Decimal(-1)):
        with pytest.raises(ValidationError, match="positive"):
            panel_create(
                name="j",
                study=cast.study,
                members=[m1, m2],
                rule="weighted",
                weights=[bad, Decimal(1)],
            )
    with pytest.raises(ValidationError, match="unknown rule"):
        panel_create(name="j", study=cast.study, members=[m1, m2], rule="median")
    # Another study's own judge cannot sit on this study's panel.
    foreign = Judge.objects.create(name="theirs", kind="llm", study=cast.other_study)
    with pytest.raises(ValidationError, match="not judges of this study: theirs"):
        panel_create(name="j", study=cast.study, members=[m1, foreign], rule="majority")
    assert list(Judge.objects.filter(kind="panel").values_list("name", flat=True)) == ["inner"]


def test_a_panel_run_is_refused_naming_the_members_without_a_done_run(cast: Cast) -> None:
    pair = make_pairs(cast.study, 1)[0].pk
    m1 = member_run(cast.study, "m1", {(pair, "ab"): 2}).judge
    m2 = Judge.objects.create(name="m2-never-run", kind="llm", study=cast.study)
    m3 = member_run(cast.study, "m3", {(pair, "ab"): 2}).judge
    JudgeRun.objects.filter(judge=m3).update(status="running")
    panel = panel_create(name="jury", study=cast.study, members=[m1, m2, m3], rule="majority")
    with pytest.raises(ValidationError, match="m2-never-run, m3"):
        judge_run_start(judge=panel, study=cast.study, user=cast.researcher)
    assert not JudgeRun.objects.filter(judge=panel).exists()


def test_only_a_researcher_of_the_study_starts_a_panel_run(cast: Cast) -> None:
    pair = make_pairs(cast.study, 1)[0].pk
    m1 = member_run(cast.study, "m1", {(pair, "ab"): 2}).judge
    m2 = member_run(cast.study, "m2", {(pair, "ab"): 3}).judge
    panel = panel_create(name="jury", study=cast.study, members=[m1, m2], rule="majority")
    for user in (cast.outsider, cast.worker_one.user):
        assert user is not None
        with pytest.raises(PermissionDenied):
            judge_run_start(judge=panel, study=cast.study, user=user)
    assert not JudgeRun.objects.filter(judge=panel).exists()
    run = panel_run(judge=panel, study=cast.study, user=cast.admin)
    assert JudgeCall.objects.get(run=run).preference == "A"


def test_the_panel_uses_each_members_latest_done_run(cast: Cast) -> None:
    pair = make_pairs(cast.study, 1)[0].pk
    old = member_run(cast.study, "m1", {(pair, "ab"): 7})
    newer = JudgeRun.objects.create(judge=old.judge, study=cast.study, status="done")
    JudgeCall.objects.create(
        run=newer, pair_id=pair, order="ab", status="done", likert=2, preference="A"
    )
    JudgeRun.objects.create(judge=old.judge, study=cast.study, status="cancelled")
    m2 = member_run(cast.study, "m2", {(pair, "ab"): 2})
    panel = panel_create(
        name="jury", study=cast.study, members=[old.judge, m2.judge], rule="majority"
    )
    run = panel_run(judge=panel, study=cast.study, user=cast.researcher)
    assert set(run.panel_sources.all()) == {newer, m2}
    assert JudgeCall.objects.get(run=run).preference == "A"


def test_a_researcher_makes_a_panel_on_its_page_and_runs_it_from_the_run_list(
    cast: Cast, client: Client
) -> None:
    pair = make_pairs(cast.study, 1)[0].pk
    m1 = member_run(cast.study, "m1", {(pair, "ab"): 2}).judge
    m2 = member_run(cast.study, "m2", {(pair, "ab"): 3}).judge
    m3 = member_run(cast.study, "m3", {(pair, "ab"): 8}).judge
    client.force_login(cast.researcher)
    url = reverse("judges:panel_create", args=[cast.study.slug])
    page = client.get(url)
    assert page.status_code == 200
    assert all(f"> {name}</label>" in page.content.decode() for name in ("m1", "m2", "m3"))
    form = {"name": "jury", "members": [m1.pk, m2.pk, m3.pk], "rule": "weighted"}
    wrong = client.post(url, form | {"weights": "1, 2"})
    assert wrong.status_code == 400 and "one weight per chosen member" in wrong.content.decode()
    made = client.post(url, form | {"weights": "1, 1, 5"})
    panel = Judge.objects.get(name="jury")
    assert made.status_code == 302 and made["Location"] == reverse(
        "judges:judge_detail", args=[cast.study.slug, panel.pk]
    )
    assert (panel.kind, panel.panel_rule, panel.study) == ("panel", "weighted", cast.study)
    assert [(s.member.name, s.weight) for s in panel.panel_members.order_by("position")] == [
        ("m1", Decimal(1)),
        ("m2", Decimal(1)),
        ("m3", Decimal(5)),
    ]
    detail = client.get(made["Location"]).content.decode()
    assert 'id="panel-members"' in detail and "m3" in detail
    started = client.post(reverse("judges:run_list", args=[cast.study.slug]), {"judge": panel.pk})
    run = JudgeRun.objects.get(judge=panel)
    assert started.status_code == 302 and run.status == "running"
    panel_run_combine(run_id=run.pk)
    # (2 + 3 + 5 x 8) / 7 = 6.43 -> 6: B.
    assert JudgeCall.objects.get(run=run).preference == "B"


def test_the_panel_page_is_closed_to_outsiders_and_offers_no_other_studys_judge(
    cast: Cast, client: Client
) -> None:
    pair = make_pairs(cast.study, 1)[0].pk
    m1 = member_run(cast.study, "m1", {(pair, "ab"): 2}).judge
    theirs = Judge.objects.create(name="their-judge", kind="llm", study=cast.other_study)
    url = reverse("judges:panel_create", args=[cast.study.slug])
    for user in (cast.outsider, cast.worker_one.user):
        assert user is not None
        client.force_login(user)
        assert client.get(url).status_code in (403, 404)
        posted = client.post(url, {"name": "j", "members": [m1.pk, theirs.pk], "rule": "majority"})
        assert posted.status_code in (403, 404)
    client.force_login(cast.researcher)
    assert "their-judge" not in client.get(url).content.decode()
    refused = client.post(url, {"name": "j", "members": [m1.pk, theirs.pk], "rule": "majority"})
    assert refused.status_code == 400
    # A researcher of the other study only cannot open this study's page.
    other = make_user("olga-other", Role.RESEARCHER)
    study_member_add(study=cast.other_study, user=other)
    client.force_login(other)
    assert client.get(url).status_code == 404
    assert not Judge.objects.filter(kind="panel").exists()


def test_the_demo_has_a_panel_of_its_three_judges_that_waits_for_their_runs(cast: Cast) -> None:
    from judges.services.demo import DEMO_PANEL, demo_judges_ensure
    from judges.services.judges import judge_readiness

    first = demo_judges_ensure(study=cast.study)
    again = demo_judges_ensure(study=cast.study)
    assert [j.pk for j in first] == [j.pk for j in again]
    panel = Judge.objects.get(name=DEMO_PANEL)
    assert (panel.kind, panel.panel_rule, panel.study) == ("panel", "majority", cast.study)
    assert [s.member.name for s in panel.panel_members.order_by("position")] == [
        "baseline: random",
        "baseline: longer answer",
        "gpt-4 (H4 Likert)",
    ]
    assert judge_readiness(judge=panel) == ""
    with pytest.raises(ValidationError, match="baseline: random, baseline: longer answer, gpt-4"):
        judge_run_start(judge=panel, study=cast.study, user=cast.researcher)


def test_the_judge_run_command_queues_a_panel_run_and_says_a_worker_combines_it(cast: Cast) -> None:
    from io import StringIO

    from django.core.management import call_command

    pair = make_pairs(cast.study, 1)[0].pk
    m1 = member_run(cast.study, "m1", {(pair, "ab"): 2, (pair, "ba"): 3}).judge
    m2 = member_run(cast.study, "m2", {(pair, "ab"): 3, (pair, "ba"): 7}).judge
    panel_create(name="jury", study=cast.study, members=[m1, m2], rule="mean_likert")
    out = StringIO()
    call_command(
        "judge_run",
        "--study",
        cast.study.slug,
        "--judge",
        "jury",
        "--user",
        "ada-admin",
        stdout=out,
    )
    run = JudgeRun.objects.get(judge__name="jury")
    assert out.getvalue().strip() == (
        f"Run {run.pk} queued: a worker combines its members' calls (no request is made)."
    )
    assert panel_run_combine(run_id=run.pk) == 2
    # (2 + 3) / 2 = 2.5 -> 3: A; (3 + 7) / 2 = 5 -> 5: tie.
    calls = panel_calls(run)
    assert (calls[(pair, "ab")].likert, calls[(pair, "ab")].preference) == (3, "A")
    assert (calls[(pair, "ba")].likert, calls[(pair, "ba")].preference) == (5, "tie")


def test_the_panels_call_page_links_the_member_calls_it_combined(
    cast: Cast, client: Client
) -> None:
    pair = make_pairs(cast.study, 1)[0].pk
    r1 = member_run(cast.study, "m1", {(pair, "ab"): 2})
    r2 = member_run(cast.study, "m2", {(pair, "ab"): None})
    panel = panel_create(
        name="jury", study=cast.study, members=[r1.judge, r2.judge], rule="majority"
    )
    run = panel_run(judge=panel, study=cast.study, user=cast.researcher)
    call = JudgeCall.objects.get(run=run)
    client.force_login(cast.researcher)
    assert (
        client.get(reverse("judges:run_detail", args=[cast.study.slug, run.pk])).status_code == 200
    )
    page = client.get(reverse("judges:call_detail", args=[cast.study.slug, run.pk, call.pk]))
    html = page.content.decode()
    assert page.status_code == 200 and 'id="member-calls"' in html
    m1_call = JudgeCall.objects.get(run=r1)
    link = reverse("judges:call_detail", args=[cast.study.slug, r1.pk, m1_call.pk])
    assert f'href="{link}"' in html and "no verdict" in html  # m2's call did not parse
    assert "no verdict from m2" in html and "Not sent yet" not in html


def test_a_panel_run_is_combined_by_one_task_once_and_a_lost_message_is_sent_again(
    cast: Cast, django_capture_on_commit_callbacks: Any
) -> None:
    from datetime import timedelta

    from django.conf import settings
    from django.utils import timezone

    from judges.services.runs import judge_calls_reconcile
    from tests.judges.integration import broker_purge, judge_queue_messages

    def queued() -> list[tuple[str, list[int]]]:
        return judge_queue_messages(settings.CELERY_BROKER_URL)

    broker_purge(settings.CELERY_BROKER_URL)
    pair = make_pairs(cast.study, 1)[0].pk
    m1 = member_run(cast.study, "m1", {(pair, "ab"): 2}).judge
    m2 = member_run(cast.study, "m2", {(pair, "ab"): 3}).judge
    panel = panel_create(name="jury", study=cast.study, members=[m1, m2], rule="majority")
    with django_capture_on_commit_callbacks(execute=True):
        run = judge_run_start(judge=panel, study=cast.study, user=cast.researcher)
    assert queued() == [("judges.panel_run_combine", [run.pk])]
    # The reconciler neither finishes a panel run without calls nor sends it again in its grace.
    judge_calls_reconcile()
    run.refresh_from_db()
    assert run.status == "running" and queued() == []
    # Its message lost: past the grace period the reconciler sends it again.
    JudgeRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(hours=1))
    judge_calls_reconcile()
    assert queued() == [("judges.panel_run_combine", [run.pk])]
    # Two workers given it write once.
    assert panel_run_combine(run_id=run.pk) == 1
    assert panel_run_combine(run_id=run.pk) == 0
    run.refresh_from_db()
    assert run.status == "done" and JudgeCall.objects.get(run=run).preference == "A"
    broker_purge(settings.CELERY_BROKER_URL)
