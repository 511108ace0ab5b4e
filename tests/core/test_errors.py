"""Every error Concord raises on purpose derives from core.errors.ApplicationError, and one that
no door catches is answered once for pages (the site's template with its message) and once for
the API (JSON with detail and code), instead of a server error."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator

import pytest

from core.errors import ApplicationError

# Every package of the project whose modules may define errors. rankeval and leaderboard.stats
# are pure (no Django): core.errors imports nothing, so they are not exempt.
PACKAGES = ("annotation", "judges", "leaderboard", "core", "config", "rankeval")
# Modules that do something when imported: settings read the environment (production refuses to
# start without a secret key), wsgi makes the application. They define no errors.
SKIP = ("config.settings", "config.wsgi")


def modules() -> Iterator[str]:
    for package in PACKAGES:
        root = importlib.import_module(package)
        yield package
        for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
            if ".migrations" in info.name or info.name.startswith(SKIP):
                continue
            yield info.name


def error_classes() -> list[type[BaseException]]:
    found = []
    for name in modules():
        module = importlib.import_module(name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if value.__module__ == name and issubclass(value, BaseException):
                found.append(value)
    return found


def test_the_walk_finds_the_errors_of_every_app() -> None:
    names = {f"{cls.__module__}.{cls.__qualname__}" for cls in error_classes()}
    for expected in (
        "annotation.services.errors.AnnotationError",
        "annotation.prolific.ProlificError",
        "judges.llm.client.JudgeCallError",
        "leaderboard.report.document.ReportPayloadError",
        "leaderboard.stats.consistency.PairRepeated",
        "core.broker.BrokerUnavailable",
    ):
        assert expected in names
    assert len(names) >= 40


def test_every_exception_class_of_the_apps_derives_from_application_error() -> None:
    strays = [
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in error_classes()
        if not issubclass(cls, ApplicationError)
    ]
    assert strays == [], f"derive these from core.errors.ApplicationError: {strays}"


def test_errors_that_callers_catch_as_value_errors_still_are_value_errors() -> None:
    from annotation.services.pairs import PairsGenerationError
    from judges.llm.client import UnsafeBaseURL
    from leaderboard.services.mtbench_import import MTBenchImportError

    for cls in (PairsGenerationError, UnsafeBaseURL, MTBenchImportError):
        assert issubclass(cls, ValueError) and issubclass(cls, ApplicationError)


def test_an_application_error_keeps_its_message_field_and_code() -> None:
    error = ApplicationError("line 4: 'score' must be 1-8", field="score", code="out_of_range")
    assert (str(error), error.message, error.field, error.code) == (
        "line 4: 'score' must be 1-8",
        "line 4: 'score' must be 1-8",
        "score",
        "out_of_range",
    )
    bare = ApplicationError()
    assert (bare.message, bare.field, bare.code, bare.http_status) == ("", None, "invalid", 400)


@pytest.mark.parametrize("cls", error_classes(), ids=lambda cls: cls.__qualname__)
def test_every_error_answers_a_client_or_server_status(cls: type[ApplicationError]) -> None:
    assert 400 <= cls.http_status < 600 and isinstance(cls.code, str) and cls.code


@pytest.mark.urls("tests.core.error_urls")
def test_a_page_that_lets_an_application_error_escape_shows_its_message(client, cast) -> None:
    client.force_login(cast.researcher)
    response = client.get("/raise/import/")
    assert response.status_code == 400
    assert "line 4 of gpt4.jsonl: &#x27;score&#x27; must be 1-10, not 11" in response.text
    # The site's own template: its header and its log-out form.
    assert 'class="topbar"' in response.text and cast.researcher.username in response.text
    conflict = client.get("/raise/closed/")
    assert conflict.status_code == 409
    assert "This pair was already submitted." in conflict.text


@pytest.mark.urls("tests.core.error_urls")
def test_any_other_exception_is_still_a_server_error(client, cast) -> None:
    client.force_login(cast.researcher)
    with pytest.raises(RuntimeError, match="a bug"):
        client.get("/raise/bug/")


@pytest.mark.urls("tests.core.error_urls")
def test_the_api_answers_an_application_error_as_json_with_its_code(client, cast) -> None:
    client.force_login(cast.researcher)
    invalid = client.post("/api/raise/invalid/")
    assert invalid.status_code == 400
    assert invalid.json() == {
        "detail": "Pick one of the seven values.",
        "code": "invalid",
        "field": "values",
    }
    closed = client.post("/api/raise/closed/")
    assert (closed.status_code, closed.json()) == (
        409,
        {"detail": "This pair was already submitted.", "code": "closed"},
    )
    base = client.post("/api/raise/other/")
    assert (base.status_code, base.json()) == (
        400,
        {"detail": "study 'mt-bench': no judge named 'gpt-5'", "code": "no_such_judge"},
    )
    # DRF's own errors keep their answers (here: no log-in).
    client.logout()
    assert client.post("/api/raise/invalid/").status_code == 403


def test_an_error_that_is_also_a_django_validation_error_keeps_a_code_and_its_message() -> None:
    from django.core.exceptions import ValidationError

    from judges.services.limits import RunLimitReached

    error = RunLimitReached("study 'main-study' already has 3 judge runs queued or running")
    assert isinstance(error, ValidationError) and isinstance(error, ApplicationError)
    assert error.messages == ["study 'main-study' already has 3 judge runs queued or running"]
    assert (error.message, error.code, error.http_status) == (
        "study 'main-study' already has 3 judge runs queued or running",
        "invalid",
        409,
    )
