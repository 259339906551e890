"""Secrets (the access token for gated model repositories, a model server's API key) in the system keyring;
never in files or logs."""

from __future__ import annotations

from dataclasses import dataclass

from app.domain.errors import DeskhandError

SERVICE = "Deskhand"
HF_TOKEN = "huggingface-token"
REMOTE_API_KEY = "model-server-api-key"  # the remote engine's key (vLLM --api-key)
NO_KEYRING_TODO = ("Install and unlock a secret store (GNOME Keyring or KWallet on Linux; macOS and Windows have "
                   "one built in), then try again.")


WHAT = {HF_TOKEN: "Hugging Face access token", REMOTE_API_KEY: "model server API key"}


def what(name: str) -> str:
    """The secret in the words of the field it was typed in."""
    return WHAT.get(name, "secret")


class SecretStoreError(DeskhandError):
    """No usable keyring backend, or the backend refused the operation."""


@dataclass(frozen=True)
class Backend:
    name: str  # e.g. "keyring.backends.SecretService.Keyring"
    usable: bool  # a real store (priority > 0 and not the fail/null backend)
    detail: str


def backend() -> Backend:
    """Which keyring backend this process would use, and whether it can keep a secret."""
    import keyring

    kr = keyring.get_keyring()
    name = f"{type(kr).__module__}.{type(kr).__qualname__}"
    try:
        priority = float(kr.priority)
    except Exception:  # a backend's priority may raise when it is not available
        priority = 0.0
    dead = name.startswith(("keyring.backends.fail", "keyring.backends.null"))
    if dead or priority <= 0:
        return Backend(name, False, "no secure secret store is available to keep an access token")
    plain = "keyrings.alt" in name and "Encrypted" not in name
    return Backend(name, True, "stores secrets in a plain file (keyrings.alt)" if plain else "system secret store")


def _store_error(action: str, exc: Exception, name: str) -> SecretStoreError:
    return SecretStoreError(f"The {what(name)} could not be {action}: no usable secret store "
                            f"({type(exc).__name__}).", NO_KEYRING_TODO)


def get_secret(name: str = HF_TOKEN) -> str | None:
    import keyring
    from keyring.errors import KeyringError

    if not backend().usable:
        return None
    try:
        value = keyring.get_password(SERVICE, name)
    except KeyringError as exc:
        raise _store_error("read", exc, name) from None
    return value or None


def set_secret(value: str, name: str = HF_TOKEN) -> None:
    import keyring
    from keyring.errors import KeyringError

    value = value.strip()
    if not value:
        todo = "Paste the token (it starts with “hf_”) and try again." if name == HF_TOKEN else "Type it and try again."
        raise DeskhandError(f"The {what(name)} is empty.", todo)
    if not backend().usable:
        raise SecretStoreError(f"There is no secure secret store on this computer to keep the {what(name)}.",
                               NO_KEYRING_TODO)
    try:
        keyring.set_password(SERVICE, name, value)
    except KeyringError as exc:
        raise _store_error("saved", exc, name) from None


def delete_secret(name: str = HF_TOKEN) -> bool:
    """True if a token was removed."""
    import keyring
    from keyring.errors import KeyringError, PasswordDeleteError

    if not backend().usable:
        return False
    try:
        keyring.delete_password(SERVICE, name)
    except PasswordDeleteError:
        return False
    except KeyringError as exc:
        raise _store_error("removed", exc, name) from None
    return True
