"""API keys of LLM judges: read from the environment, or pasted in the page and kept encrypted.

A pasted key is encrypted with Fernet (AES-128-CBC with an HMAC-SHA256 tag, from the
`cryptography` package) under a key derived from the deployment's SECRET_KEY with HKDF-SHA256
and a purpose of its own, so the stored text is useless without the secret and no other use of
the secret yields the same key. It is decrypted only at call time, in the worker; it is never
shown again, never logged and never exported. Changing SECRET_KEY makes stored keys unreadable:
such a judge then says so and asks for the key again.
"""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.utils import timezone

from judges.llm.client import JudgeNotConfigured, api_key_get
from judges.models import Judge

_PURPOSE = b"concord.judges.api-key.v1"
MAX_KEY_LENGTH = 500


def _fernet() -> Fernet:
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_PURPOSE).derive(
        settings.SECRET_KEY.encode("utf-8")
    )
    return Fernet(base64.urlsafe_b64encode(derived))


def api_key_encrypt(key: str) -> str:
    """Return the Fernet token of a pasted key, as text fit for the database."""
    return _fernet().encrypt(key.encode("utf-8")).decode("ascii")


def api_key_clean(key: str) -> str:
    """A pasted key without surrounding space; ValueError naming what is wrong with it."""
    key = key.strip()
    if not key:
        raise ValueError("The key is empty.")
    if len(key) > MAX_KEY_LENGTH:
        raise ValueError(f"The key is longer than {MAX_KEY_LENGTH} characters.")
    if any(ch.isspace() or not ch.isprintable() for ch in key):
        raise ValueError("The key has spaces or invisible characters in it; paste it again.")
    return key


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
            return _fernet().decrypt(judge.api_key_encrypted.encode("ascii")).decode("utf-8")
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
