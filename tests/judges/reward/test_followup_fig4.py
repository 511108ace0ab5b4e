"""AdvisorQA's Fig. 4 on the demo study, end to end: the PL model and the longer-answer baseline
judge the same pairs, a follow-up samples the pairs where they disagree and the PL model voted
the better answer, people say why on the rationale-only form, and the follow-up's report shows
their values for that group."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from annotation.models import Assignment, HumanJudgment, Study
from annotation.services.demo import demo_setup
from judges.models import Judge, JudgeRun, PLTraining
from judges.reward.demo import DEMO_PL_NAME, demo_pl_model_queue
from judges.reward.scoring import pl_run_execute
from judges.reward.services import pl_training_execute
from judges.services.calls import judge_call_execute
from judges.services.demo import demo_judges_ensure
from judges.services.runs import judge_run_start
from leaderboard.models import Followup, FollowupPair
from leaderboard.report.registry import section_get
from leaderboard.selectors.followup import judge_disagreement_counts
from leaderboard.selectors.frames import VoteFilters
from leaderboard.services.reports import ReportParams, report_data, votes_and_reads_get
from tests.annotation.work_helpers import enter_and_consent
from tests.leaderboard.conftest import get_computed

pytestmark = pytest.mark.django_db

# What each worker cites: everyone names relevance; the first worker also empathy.
CITED = {"PID-fig4-0": ["relevance", "empathy"], "PID-fig4-1": ["relevance"]}


def _answer_everything(client: Client, study: Study, pid: str) -> int:
    """Enter as a Prolific worker and answer every item offered with CITED[pid]; the count."""
    cache.clear()  # entry rate limits are per address, and every worker here is one address
    enter_and_consent(client, study, pid)
    done = 0
    while True:
        response = client.get(f"/work/{study.slug}/")
        location = response.get("Location", "")
        match = re.search(r"/item/([0-9a-f-]{36})/", location)
        if match is None:
            return done
        public_id = match.group(1)
        page = client.get(location).content.decode()
        assert "answer was rated better" in page and 'name="likert"' not in page
        posted = client.post(
            f"/work/{study.slug}/item/{public_id}/",
            {"submission_id": str(uuid.uuid4()), "values": CITED[pid]},
        )
        assert posted.status_code == 302, posted.content
        assert Assignment.objects.get(public_id=public_id).status == Assignment.Status.SUBMITTED
        done += 1


def test_the_values_where_the_pl_model_beat_the_longer_answer_baseline_show_in_the_follow_up(
    client: Client, reward_dirs: Path
) -> None:
    study = demo_setup().study
    longer = next(j for j in demo_judges_ensure() if j.kind == Judge.Kind.LONGER)
    demo_pl_model_queue(study=study)
    training = PLTraining.objects.get(name=DEMO_PL_NAME)
    assert pl_training_execute(training_id=training.pk) == "done"
    pl_run = JudgeRun.objects.get(judge__name=DEMO_PL_NAME)  # started by the training
    assert pl_run_execute(run_id=pl_run.pk) == "done"
    researcher = study.members.get(username="demo-researcher")
    longer_run = judge_run_start(judge=longer, study=study, user=researcher)
    for call in longer_run.calls.all():
        judge_call_execute(call_id=call.pk)

    counts = judge_disagreement_counts(study=study, judge_a_run=pl_run, judge_b_run=longer_run)
    assert counts.agreed["first"] > 0 and counts.agreed["second"] > 0
    assert counts.total == sum(counts.agreed.values()) == sum(counts.basis.values())

    # The dashboard's form: PL first, the baseline second, only where the PL model was right.
    client.force_login(researcher)
    form = {
        "judge_a_run": pl_run.pk,
        "judge_b_run": longer_run.pk,
        "agreeing": "first",
        "sample_size": 4,
        "seed": 0,
    }
    preview = client.post(
        reverse("leaderboard:study_followup_preview", kwargs={"slug": study.slug}), form
    ).content.decode()
    assert f"the follow-up gets {min(4, counts.agreed['first'])} of" in preview
    created = client.post(
        reverse("leaderboard:study_followup_create", kwargs={"slug": study.slug}), form
    )
    followup = Study.objects.get(slug=created["Location"].strip("/").split("/")[-1])
    origin = Followup.objects.get(study=followup)
    links = FollowupPair.objects.filter(followup=origin)
    pairs = min(4, counts.agreed["first"])
    assert links.count() == followup.pairs.count() == pairs
    assert set(links.values_list("agreed", flat=True)) == {"first"}

    # People answer the why form (two workers, every pair each).
    Study.objects.filter(pk=followup.pk).update(status=Study.Status.LIVE)
    followup.refresh_from_db()
    client.logout()
    answered = {pid: _answer_everything(Client(), followup, pid) for pid in CITED}
    assert answered == {pid: pairs for pid in CITED}
    judgments = HumanJudgment.objects.filter(study=followup)
    assert all(j.preference == j.pair.rationale_winner for j in judgments)

    # The follow-up's rationale section: one group, the PL model's wins, with their values.
    votes, reads = votes_and_reads_get(study=followup, filters=VoteFilters())
    section = section_get("rationale")
    result = section.compute(report_data(votes=votes, reads=reads, params=ReportParams()))
    assert result.followup is not None
    assert (result.followup.first, result.followup.agreeing) == (origin.first_label, "first")
    (group,) = result.followup.groups
    assert (group.agreed, group.pairs, group.judgments) == ("first", pairs, 2 * pairs)
    cited = {row.value: row.count for row in group.values}
    assert cited["relevance"] == 2 * pairs and cited["empathy"] == pairs
    assert cited["creativity"] == 0

    # And the analysis page shows it, row and plot.
    client.force_login(researcher)
    page = get_computed(
        client, reverse("leaderboard:study_analysis", kwargs={"slug": followup.slug})
    ).content.decode()
    assert f"follow-up: {origin.first_label} voted the better answer ({pairs} pairs)" in page
    assert "Values where each judge voted the better answer" in page
