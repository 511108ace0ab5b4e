"""The judge base-URL guard: allowed hosts on allowed ports only, no settings as keys."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from judges.llm.client import JudgeNotConfigured, UnsafeBaseURL, api_key_get, base_url_check
from judges.models import Judge
from judges.services.judges import judge_create


@pytest.fixture
def production_allowlist(settings) -> None:
    settings.CONCORD_JUDGE_HOST_ALLOWLIST = ["api.openai.com", "127.0.0.1", "localhost"]


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:6379/",  # Redis
        "http://localhost:5432/v1",  # PostgreSQL
        "http://127.0.0.1:22/",
        "https://api.openai.com:8443/v1",
    ],
)
def test_an_allowed_host_on_a_service_port_is_refused(production_allowlist: None, url: str) -> None:
    with pytest.raises(UnsafeBaseURL, match="port"):
        base_url_check(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://api.openai.com/v1",
        "http://127.0.0.1:8000/v1",  # vLLM
        "http://localhost:11434/v1",  # Ollama
        "http://127.0.0.1:8080/v1",  # llama.cpp
    ],
)
def test_default_and_common_llm_server_ports_are_allowed(
    production_allowlist: None, url: str
) -> None:
    base_url_check(url)


def test_an_allow_list_entry_may_open_one_more_port_for_one_host(settings) -> None:
    settings.CONCORD_JUDGE_HOST_ALLOWLIST = ["llm.internal", "llm.internal:9000"]
    base_url_check("http://llm.internal:9000/v1")
    with pytest.raises(UnsafeBaseURL):
        base_url_check("http://llm.internal:9001/v1")


@pytest.mark.parametrize("url", ["http://[127.0.0.1]/", "http://[::1/", "http://127.0.0.1:99999/"])
def test_a_malformed_url_gives_the_guards_error_not_a_crash(
    production_allowlist: None, url: str
) -> None:
    with pytest.raises(UnsafeBaseURL):
        base_url_check(url)


@pytest.mark.parametrize(
    "name",
    ["SECRET_KEY", "DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "CACHE_URL", "DJANGO_DEBUG",
     "DATABASE_CONN_MAX_AGE", "secret_key"],
)  # fmt: skip
def test_a_judge_cannot_name_the_settings_own_variables_as_its_key(db: None, name: str) -> None:
    with pytest.raises(ValidationError) as error:
        judge_create(
            name="sneaky",
            kind=Judge.Kind.LLM,
            model_name="gpt-4o",
            base_url="https://api.openai.com/v1",
            api_key_env=name,
            prompt_template="Compare {answer_first} and {answer_second}.",
        )
    assert "api_key_env" in error.value.message_dict
    with pytest.raises(JudgeNotConfigured):
        api_key_get(name)


def _judge_naming(name: str) -> None:
    judge_create(
        name=f"judge reading {name}",
        kind=Judge.Kind.LLM,
        model_name="gpt-4o",
        base_url="https://api.openai.com/v1",
        api_key_env=name,
        prompt_template="Compare {answer_first} and {answer_second}.",
    )


@pytest.mark.parametrize("name", ["AWS_SECRET_ACCESS_KEY", "HOME", "GITHUB_TOKEN", "OPENAI_KEY"])
def test_a_judge_may_name_only_the_allowed_key_variables(
    db: None, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 27: any variable that was not a setting went to an allowed host as a Bearer token.
    monkeypatch.setenv(name, "a server secret")
    with pytest.raises(ValidationError) as error:
        _judge_naming(name)
    message = error.value.message_dict["api_key_env"][0]
    assert "CONCORD_JUDGE_KEY_ENV_ALLOWED" in message and "OPENAI_API_KEY" in message
    # A judge saved before the list (or through a raw write) still cannot read it.
    with pytest.raises(JudgeNotConfigured, match="CONCORD_JUDGE_KEY_ENV_ALLOWED"):
        api_key_get(name)


def test_the_default_names_and_prefix_and_an_admins_own_list_are_allowed(
    db: None, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    monkeypatch.setenv("CONCORD_JUDGE_KEY_VLLM", "k1")
    monkeypatch.setenv("OPENAI_API_KEY", "k2")
    monkeypatch.setenv("TOGETHER_API_KEY", "k3")
    _judge_naming("CONCORD_JUDGE_KEY_VLLM")
    _judge_naming("OPENAI_API_KEY")
    assert api_key_get("CONCORD_JUDGE_KEY_VLLM") == "k1"
    with pytest.raises(ValidationError):
        _judge_naming("TOGETHER_API_KEY")
    settings.CONCORD_JUDGE_KEY_ENV_ALLOWED = ["TOGETHER_API_KEY"]
    _judge_naming("TOGETHER_API_KEY")
    assert api_key_get("TOGETHER_API_KEY") == "k3"
    with pytest.raises(JudgeNotConfigured):
        api_key_get("OPENAI_API_KEY")
