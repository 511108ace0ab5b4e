"""Label Studio's side of benchmarks/bench_label_studio.py, run by the Python of its own venv.

It is our code, run inside Label Studio's installation (`var/label-studio-venv`), with
DJANGO_SETTINGS_MODULE=core.settings.label_studio and Label Studio's package folder on sys.path;
bench_label_studio.py starts it with the environment that points it at its database. Two
commands, each printing one JSON line on stdout:

    setup --annotators 8      migrate; an owner and `--annotators` annotator accounts in one
                              organization, each with a legacy API token, as `label-studio user`
                              makes them; prints {"owner": token, "annotators": [tokens]}
    fill --project ID --per-task K
                              K annotations on every task of the project, each by a different
                              annotator, written with bulk_create and the task counters set as
                              Label Studio's counter update computes them (for the export
                              benchmark, so that both sides export the same number of rows)

Nothing here goes through the network; the HTTP side (project, import, next, submit, export) is
driven by bench_label_studio.py against Label Studio's own server.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any


def _models() -> dict[str, Any]:
    import django

    django.setup()
    from django.apps import apps

    return {
        name: apps.get_model(app, model)
        for name, (app, model) in {
            "User": ("users", "User"),
            "Organization": ("organizations", "Organization"),
            "Project": ("projects", "Project"),
            "Task": ("tasks", "Task"),
            "Annotation": ("tasks", "Annotation"),
            "Token": ("authtoken", "Token"),
        }.items()
    }


def setup(annotators: int) -> dict[str, Any]:
    """Migrate, then an owner and `annotators` members of one organization, with tokens."""
    began = time.perf_counter()
    m = _models()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    migrated = time.perf_counter() - began
    owner = m["User"].objects.create_user(email="owner@bench.invalid", password="bench-owner")
    owner.is_staff = owner.is_superuser = True
    owner.save()
    organization = m["Organization"].create_organization(
        created_by=owner, title="Benchmark", legacy_api_tokens_enabled=True
    )
    tokens = []
    for user in [owner] + [
        m["User"].objects.create_user(email=f"annotator-{i}@bench.invalid", password=f"bench-{i}")
        for i in range(annotators)
    ]:
        organization.add_user(user)
        user.active_organization = organization
        user.save(update_fields=["active_organization"])
        tokens.append(m["Token"].objects.get_or_create(user=user)[0].key)
    return {
        "owner": tokens[0],
        "annotators": tokens[1:],
        "migrate_s": migrated,
        "setup_s": time.perf_counter() - began,
    }


def fill(project_id: int, per_task: int, result: list[dict[str, Any]]) -> dict[str, Any]:
    """`per_task` annotations on every task, by distinct annotators, in batches of 5,000."""
    m = _models()
    project = m["Project"].objects.get(pk=project_id)
    users = list(m["User"].objects.filter(email__startswith="annotator-").order_by("pk")[:per_task])
    if len(users) < per_task:
        raise SystemExit(f"fill: {per_task} annotations per task need {per_task} annotators")
    Annotation, Task = m["Annotation"], m["Task"]
    began = time.perf_counter()
    ids = list(Task.objects.filter(project=project).values_list("pk", flat=True))
    # Start from what the load left: fill each task up to `per_task` by annotators it lacks.
    done: dict[int, set[int]] = {}
    for task_id, user_id in Annotation.objects.filter(project=project).values_list(
        "task_id", "completed_by_id"
    ):
        done.setdefault(task_id, set()).add(user_id)
    batch: list[Any] = []
    written = 0
    for task_id in ids:
        have = done.get(task_id, set())
        for user in users:
            if len(have) >= per_task:
                break
            if user.pk in have:
                continue
            have.add(user.pk)
            batch.append(
                Annotation(
                    task_id=task_id,
                    project=project,
                    completed_by=user,
                    result=result,
                    lead_time=1.0,
                )
            )
        if len(batch) >= 5000:
            Annotation.objects.bulk_create(batch)
            written += len(batch)
            batch = []
    Annotation.objects.bulk_create(batch)
    written += len(batch)
    # The counters Label Studio's signals keep one annotation at a time, set as its
    # update_tasks_counters computes them (annotations not cancelled / cancelled; labeled once
    # the task has its overlap), in one statement: its own pass takes minutes on 100k tasks.
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE task SET total_annotations = c.done, cancelled_annotations = c.cancelled,
                            is_labeled = c.done >= task.overlap
            FROM (SELECT task_id, count(*) FILTER (WHERE NOT was_cancelled) AS done,
                         count(*) FILTER (WHERE was_cancelled) AS cancelled
                  FROM task_completion WHERE project_id = %s GROUP BY task_id) c
            WHERE task.id = c.task_id
            """,
            [project.pk],
        )
    return {"written": written, "tasks": len(ids), "fill_s": time.perf_counter() - began}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("setup")
    one.add_argument("--annotators", type=int, required=True)
    two = sub.add_parser("fill")
    two.add_argument("--project", type=int, required=True)
    two.add_argument("--per-task", type=int, required=True)
    two.add_argument("--result", required=True, help="the annotation result, as JSON")
    args = parser.parse_args()
    if args.command == "setup":
        out = setup(args.annotators)
    else:
        out = fill(args.project, args.per_task, json.loads(args.result))
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
