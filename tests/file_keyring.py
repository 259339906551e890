"""A keyring backend that keeps secrets in one JSON file ($DESKHAND_TEST_KEYRING), so a server subprocess and the
test share a keyring through the real `keyring` API (PYTHON_KEYRING_BACKEND=tests.file_keyring.FileKeyring)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError


class FileKeyring(KeyringBackend):
    priority = 1  # type: ignore[assignment]

    def _file(self) -> Path:
        return Path(os.environ["DESKHAND_TEST_KEYRING"])

    def _all(self) -> dict[str, str]:
        f = self._file()
        return json.loads(f.read_text()) if f.exists() else {}

    def get_password(self, service: str, username: str) -> str | None:
        return self._all().get(f"{service}/{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        data = self._all()
        data[f"{service}/{username}"] = password
        self._file().write_text(json.dumps(data))

    def delete_password(self, service: str, username: str) -> None:
        data = self._all()
        if data.pop(f"{service}/{username}", None) is None:
            raise PasswordDeleteError(username)
        self._file().write_text(json.dumps(data))
