"""API keys of LLM judges: read from the environment, or pasted in the page and kept encrypted.

A pasted key is encrypted by core.secretbox (Fernet under a key derived from SECRET_KEY with a
purpose of its own). It is decrypted only at call time, in the worker; it is never shown again,
never logged and never exported. Changing SECRET_KEY makes stored keys unreadable: such a judge
then says so and asks for the key again.
"""

from __future__ import annotations

from django.utils import timezone

from core.secretbox import InvalidToken, secret_clean, secret_decrypt, secret_encrypt
from judges.llm.client import JudgeNotConfigured, api_key_get
from judges.models import Judge

_PURPOSE = b"concord.judges.api-key.v1"
MAX_KEY_LENGTH = 500


def api_key_encrypt(key: str) -> str:
    """Return the Fernet token of a pasted key, as text fit for the database."""
    return secret_encrypt(key, purpose=_PURPOSE)


def api_key_clean(key: str) -> str:
    """A pasted key without surrounding space; ValueError naming what is wrong with it."""
    return secret_clean(key, max_length=MAX_KEY_LENGTH)


def judge_api_key_set(*, judge: Judge, key: str) -> None:
    """Store a pasted key encrypted (replacing any earlier one); the env variable is dropped."""
    token = api_key_encrypt(api_key_clean(key))
    now = timezone.now()
    Judge.objects.filter(pk=judge.pk).update(
        api_key_encrypted=token, api_key_set_at=now, api_key_env=""
    )
    judge.api_key_encrypted, judge.api_key_set_at, judge.api_key_env = token, now, ""


def judge_api_key(*, judge: Judge) -> str:
    """The key to call the judge with: the pasted one, else the named environment variable.

    Raises JudgeNotConfigured naming what is missing; never puts the key in a message.
    """
    if judge.api_key_encrypted:
        try:
            return secret_decrypt(judge.api_key_encrypted, purpose=_PURPOSE)
        except InvalidToken as exc:
            raise JudgeNotConfigured(
                "not configured: the pasted key cannot be read (SECRET_KEY changed since it "
                "was stored); paste it again on the judge's page"
            ) from exc
    return api_key_get(judge.api_key_env)


def judge_key_source(*, judge: Judge) -> str:
    """Where the judge's key comes from, in words, without the key."""
    if judge.api_key_encrypted:
        when = f" on {judge.api_key_set_at:%Y-%m-%d %H:%M} UTC" if judge.api_key_set_at else ""
        return f"a key pasted{when}, stored encrypted"
    if judge.api_key_env:
        return f"the environment variable {judge.api_key_env}"
    return "no key yet"
