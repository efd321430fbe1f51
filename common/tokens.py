"""Random tokens (API keys, session ids, a CSAT ask's page link) and how they are stored: shared by services/keys.py
and the writer's transactions that make one (storage/csat.py). No I/O."""
from __future__ import annotations

import hashlib
import secrets


def hash_token(token: str) -> str:
    """Random tokens (API keys, session ids) are stored as this. A 256-bit random token needs no slow
    hash: SHA-256 is what makes a stolen table useless."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """A 256-bit random token, URL-safe (stored as hash_token of it)."""
    return secrets.token_urlsafe(32)
