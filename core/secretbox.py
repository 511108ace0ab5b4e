"""Secrets pasted in a page and kept encrypted in the database (judge API keys, Prolific tokens).

A secret is encrypted with Fernet (AES-128-CBC with an HMAC-SHA256 tag, from the `cryptography`
package) under a key derived from the deployment's SECRET_KEY with HKDF-SHA256 and a purpose of
its own, so the stored text is useless without the secret and no other use of the secret (nor a
secret stored for another purpose) yields the same key. Changing SECRET_KEY makes stored secrets
unreadable (`InvalidToken`): their owner then asks for them again.
"""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

__all__ = ["InvalidToken", "secret_clean", "secret_decrypt", "secret_encrypt"]


def _fernet(purpose: bytes) -> Fernet:
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose).derive(
        settings.SECRET_KEY.encode("utf-8")
    )
    return Fernet(base64.urlsafe_b64encode(derived))


def secret_encrypt(secret: str, *, purpose: bytes) -> str:
    """Return the Fernet token of a secret, as text fit for the database."""
    return _fernet(purpose).encrypt(secret.encode("utf-8")).decode("ascii")


def secret_decrypt(token: str, *, purpose: bytes) -> str:
    """The secret back from its token; raises InvalidToken when SECRET_KEY changed."""
    return _fernet(purpose).decrypt(token.encode("ascii")).decode("utf-8")


def secret_clean(secret: str, *, max_length: int, what: str = "key") -> str:
    """A pasted secret without surrounding space; ValueError naming what is wrong with it."""
    secret = secret.strip()
    if not secret:
        raise ValueError(f"The {what} is empty.")
    if len(secret) > max_length:
        raise ValueError(f"The {what} is longer than {max_length} characters.")
    if any(ch.isspace() or not ch.isprintable() for ch in secret):
        raise ValueError(f"The {what} has spaces or invisible characters in it; paste it again.")
    return secret
