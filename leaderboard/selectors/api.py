"""Reads for the analysis API: its operations, from its OpenAPI schema, and the studies it lists."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet
from django.http import HttpRequest

from annotation.models import Study
from annotation.selectors.studies import study_list_with_counts


def api_schema_get(*, request: HttpRequest) -> list[dict[str, Any]]:
    """The analysis API's operations from its OpenAPI schema: path, method, summary, params."""
    from rest_framework.schemas.openapi import SchemaGenerator

    generator = SchemaGenerator(
        title="Concord analysis API", urlconf="leaderboard.api_urls", url="/api/v1/"
    )
    schema = generator.get_schema(request=None, public=True) or {}
    operations = []
    for path, methods in sorted(schema.get("paths", {}).items()):
        for method, operation in sorted(methods.items()):
            operations.append(
                {
                    "path": path,
                    "method": method.upper(),
                    "summary": operation.get("description", ""),
                    "parameters": [p.get("name") for p in operation.get("parameters", [])],
                }
            )
    return operations


def api_study_list(*, user: User | AnonymousUser) -> QuerySet[Study]:
    """The studies the user may read, with their counts, by slug."""
    return study_list_with_counts(user=user).order_by("slug")
