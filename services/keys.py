"""API keys, UI passwords and webhook signing secrets: generation, hashing, verification."""
import base64
import hashlib
import hmac
import os
import secrets

KEY_PREFIX = "pk_"
SECRET_PREFIX = "whsec_"
# scrypt cost: ~50 ms on this class of machine; always run it in an executor, never on the loop.
_SCRYPT = dict(n=2**14, r=8, p=1, dklen=32)


def new_api_key():
    """Returns (key shown once, SHA-256 hex stored, prefix kept for display)."""
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    return key, hash_api_key(key), key[:10]


def hash_token(token):
    """Random tokens (API keys, session ids) are stored as this. A 256-bit random token needs no slow
    hash: SHA-256 is what makes a stolen table useless."""
    return hashlib.sha256(token.encode()).hexdigest()


hash_api_key = hash_token


def new_session_id():
    """The id a UI session cookie carries (stored as hash_token of it)."""
    return secrets.token_urlsafe(32)


def new_password():
    return secrets.token_urlsafe(12)


def hash_password(password):
    salt = os.urandom(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, **_SCRYPT)
    return f"scrypt${salt.hex()}${digest.hex()}"


def verify_password(password, stored):
    try:
        scheme, salt, digest = stored.split("$")
    except ValueError:
        return False
    if scheme != "scrypt":
        return False
    candidate = hashlib.scrypt(password.encode(), salt=bytes.fromhex(salt), **_SCRYPT)
    return hmac.compare_digest(candidate.hex(), digest)


def new_webhook_secret():
    """A Standard Webhooks secret: whsec_ + base64 of 24 random bytes."""
    return SECRET_PREFIX + base64.b64encode(os.urandom(24)).decode()
