"""API keys, UI passwords and webhook signing secrets: generation, hashing, verification."""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets

import argon2

from common.tokens import hash_token as hash_token, new_token

KEY_PREFIX = "pk_"
SECRET_PREFIX = "whsec_"
# UI passwords: argon2id with OWASP's 19 MiB, 2 passes, 1 lane (~50 ms on a free core of this class of
# machine; always run it in an executor, never on the loop). The parameters are in each stored hash (the
# PHC string $argon2id$v=19$m=19456,t=2,p=1$salt$digest), so raising them later rehashes at sign-in.
_ARGON2 = argon2.PasswordHasher(time_cost=2, memory_cost=19456, parallelism=1, hash_len=32, salt_len=16,
                                type=argon2.Type.ID)
# Hashes made before argon2id: scrypt$salt$digest with these fixed parameters (none stored); verified
# still, and replaced by an argon2id hash at the user's next sign-in.
_LEGACY_SCRYPT = dict(n=2**14, r=8, p=1, dklen=32)


def new_api_key() -> tuple[str, str, str]:
    """Returns (key shown once, SHA-256 hex stored, prefix kept for display)."""
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    return key, hash_api_key(key), key[:10]


hash_api_key = hash_token
new_session_id = new_token  # the id a UI session cookie carries (stored as hash_token of it)


def new_password() -> str:
    return secrets.token_urlsafe(12)


def hash_password(password: str) -> str:
    """The PHC string of an argon2id hash of password, with today's parameters (CPU-heavy: an executor)."""
    return _ARGON2.hash(password)


def is_password_hash(stored: str) -> bool:
    """Whether stored is a password hash at all (an invited user's marker, for one, is not)."""
    return stored.startswith("$argon2id$") or stored.startswith("scrypt$")


def verify_password(password: str, stored: str) -> bool:
    """Whether password matches the stored hash: argon2id with the parameters the hash names, or a legacy
    scrypt hash. Anything else (a marker, a damaged hash) matches no password. CPU-heavy: an executor."""
    if stored.startswith("$argon2id$"):
        try:
            return _ARGON2.verify(stored, password)
        except (argon2.exceptions.VerificationError, argon2.exceptions.InvalidHashError):  # a mismatch, a damaged hash
            return False
    try:
        scheme, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        candidate = hashlib.scrypt(password.encode(), salt=bytes.fromhex(salt), **_LEGACY_SCRYPT)
    except ValueError:
        return False
    return hmac.compare_digest(candidate.hex(), digest)


def password_needs_rehash(stored: str) -> bool:
    """Whether a hash that just verified should be replaced: a legacy scrypt hash, or argon2id with
    parameters other than today's."""
    return not stored.startswith("$argon2id$") or _ARGON2.check_needs_rehash(stored)


def new_webhook_secret() -> str:
    """A Standard Webhooks secret: whsec_ + base64 of 24 random bytes."""
    return SECRET_PREFIX + base64.b64encode(os.urandom(24)).decode()
