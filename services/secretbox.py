"""Encryption at rest for secrets (signing secrets, provider keys, cookie secret) with data/secret.key."""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

if TYPE_CHECKING:
    from settings import Settings


class SecretKeyError(RuntimeError):
    """The secret key cannot be used: a --secret-key-file that is missing, or not the database's key."""


class SecretBox:
    def __init__(self, key: bytes) -> None:
        self._key = key
        self._fernet = Fernet(key)
        self._derived: dict[str, str] = {}

    def derive(self, purpose: str) -> str:
        """A secret for one purpose (e.g. the cookie secret), derived so that nothing more is stored; kept once
        derived (the same for ever: the email import asks for its key once per mail)."""
        secret = self._derived.get(purpose)
        if secret is None:
            secret = self._derived[purpose] = HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                                                   info=purpose.encode()).derive(self._key).hex()
        return secret

    @classmethod
    def from_settings(cls, settings: Settings) -> SecretBox:
        """--secret-key-file, or secret.key in --data-dir (made at first start). Processes sharing a database
        must share the key: a file given but missing is an error, never a new key made in its place."""
        if settings.secret_key_file is None:
            return cls.from_data_dir(settings.data_dir)
        path = Path(settings.secret_key_file)
        if not path.is_file():
            raise SecretKeyError(f"--secret-key-file {path}: no such file (copy the secret.key of the first server, "
                             "or make one with: python -c 'from cryptography.fernet import Fernet; "
                             "print(Fernet.generate_key().decode())' > FILE; chmod 600 FILE)")
        return cls(path.read_bytes().strip())

    @classmethod
    def from_data_dir(cls, data_dir: str | Path) -> SecretBox:
        """Load data/secret.key, creating it (mode 0600) on first use."""
        path = Path(data_dir) / "secret.key"
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return cls(path.read_bytes().strip())
        key = Fernet.generate_key()
        with os.fdopen(fd, "wb") as f:
            f.write(key)
        return cls(key)

    def fingerprint(self) -> str:
        """A short value that tells keys apart and reveals nothing of the key (stored in the database, so that a
        process started with another key is refused before it signs a cookie or stores a secret)."""
        return self.derive("key-fingerprint")[:16]

    def encrypt(self, text: str) -> str:
        return self._fernet.encrypt(text.encode()).decode()

    def decrypt(self, token: str) -> str:
        try:
            return self._fernet.decrypt(token.encode()).decode()
        except InvalidToken as exc:
            raise ValueError("secret cannot be decrypted with data/secret.key") from exc
