"""Encryption at rest for secrets (signing secrets, provider keys, cookie secret) with data/secret.key."""
import os
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF


class SecretBox:
    def __init__(self, key):
        self._key = key
        self._fernet = Fernet(key)

    def derive(self, purpose):
        """A secret for one purpose (e.g. the cookie secret), derived so that nothing more is stored."""
        return HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                    info=purpose.encode()).derive(self._key).hex()

    @classmethod
    def from_data_dir(cls, data_dir):
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

    def encrypt(self, text):
        return self._fernet.encrypt(text.encode()).decode()

    def decrypt(self, token):
        try:
            return self._fernet.decrypt(token.encode()).decode()
        except InvalidToken as exc:
            raise ValueError("secret cannot be decrypted with data/secret.key") from exc
