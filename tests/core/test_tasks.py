"""Every Celery task of the apps is made by core.tasks.task: its name is the one messages and
beat already use, it acknowledges late, is redelivered when its worker dies, stores no result
and has a soft and a hard time limit, the hard one within the broker's visibility timeout."""

from __future__ import annotations

import pytest
from celery import Task
from django.conf import settings

from config.celery import app
from core.queues import Queue
from core.tasks import ConcordTask, SoftTimeLimitExceeded, failure_reason, task

# The names the tasks had before core.tasks existed: messages already queued, beat's schedule
# and core.broker.task_send name them, so none may change.
NAMES = {
    "annotation.assignments_expire",
    "annotation.prolific_bonus_batch_run",
    "leaderboard.contrast_set_build",  # issue 27 part 4, contrast set off the shell
    "annotation.pairs_generate",  # added since (issue 27, pair generation off the web request)
    "annotation.prolific_connection_test",  # added since (issue 27, the Prolific panel's test)
    "annotation.prolific_bonus_batches_run",
    "annotation.prolific_submissions_reconcile",
    "annotation.prolific_unverified_recheck",
    "judges.call_execute",
    "judges.calls_execute",
    "judges.calls_reconcile",
    "judges.connection_test",
    "judges.panel_run_combine",
    "judges.pl_runs_reconcile",
    "judges.pl_score_run",
    "judges.pl_train",
    "judges.pl_trainings_reconcile",
    "judges.contrast_score",  # added since (issue 24 part 4, contrast scoring as a PL run step)
    "judges.references_write",  # added since (issue 28, references written in a worker)
    "judges.run_fan_out",
    "leaderboard.export_build",
    "leaderboard.exports_maintain",
    "leaderboard.pair_priorities_recompute",
    "leaderboard.pair_priorities_refresh",
    "leaderboard.report_compute",
}
APPS = ("annotation", "judges", "leaderboard", "core", "config", "rankeval")


def ours() -> dict[str, Task]:
    """The tasks of the project's apps, as the worker registers them."""
    app.loader.import_default_modules()
    return {
        name: registered
        for name, registered in app.tasks.items()
        if type(registered).__module__.split(".")[0] in APPS or name.split(".")[0] in APPS
    }


def test_the_apps_register_exactly_the_task_names_they_had() -> None:
    assert set(ours()) == NAMES


@pytest.mark.parametrize("name", sorted(NAMES))
def test_every_task_is_made_by_core_tasks_with_both_time_limits(name: str) -> None:
    made = ours()[name]
    assert isinstance(made, ConcordTask), f"{name} is not made by core.tasks.task"
    assert made.name == name
    assert made.acks_late and made.reject_on_worker_lost and made.ignore_result
    assert made.soft_time_limit is not None and made.time_limit is not None
    assert 0 < made.soft_time_limit < made.time_limit
    # A message unacknowledged past the visibility timeout goes to a second worker.
    visibility = settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    assert isinstance(visibility, int) and made.time_limit < visibility
    # Its docstring says why its limits are what they are.
    assert made.__doc__ is not None and "Limits" in made.__doc__


@pytest.mark.parametrize("name", sorted(NAMES))
def test_a_task_sent_by_name_goes_to_the_queue_its_task_names(name: str) -> None:
    made = ours()[name]
    assert isinstance(made, ConcordTask)
    assert app.amqp.router.route({}, name)["queue"].name == made.concord_queue.value
    # An explicit queue (core.broker.task_send's) comes before the route.
    assert app.amqp.router.route({"queue": "export"}, name)["queue"].name == "export"


def test_a_soft_limit_after_the_hard_one_is_refused() -> None:
    with pytest.raises(ValueError, match="soft time limit"):
        task(name="x.y", queue=Queue.DEFAULT, soft_time_limit=60, time_limit=60)
    with pytest.raises(ValueError, match="acks_late"):
        task(name="x.y", queue=Queue.DEFAULT, soft_time_limit=1, time_limit=2, acks_late=False)


def test_the_reason_of_a_stopped_task_names_the_time_limit() -> None:
    assert failure_reason(ValueError("bad row 3")) == "ValueError: bad row 3"
    assert failure_reason(SoftTimeLimitExceeded()).startswith("stopped at its time limit")
