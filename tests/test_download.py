"""Downloads through huggingface_hub against a loopback hub (tests/loopback_hub.py): the standard cache, resume after
an interruption or a restart, verification against the catalog's and the hub's SHA-256, gated repositories."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil

import pytest

from app.domain.errors import Cancelled, ModelFileError
from app.engine.gguf.model_pair import check_text_model
from app.setup import secrets
from app.setup.catalog import CatalogFile
from app.setup.download import (
    ChecksumMismatch,
    DownloadControl,
    Downloader,
    DownloadError,
    NotEnoughSpace,
    Paused,
)
from tests.loopback_hub import LoopbackHub

REPO = "Hcompany/Holo-Test-GGUF"


@pytest.fixture
def hub():
    with LoopbackHub() as h:
        yield h


@pytest.fixture
def payload() -> bytes:
    return os.urandom(3 * 1024 * 1024 + 12345)


def spec(name: str, data: bytes, *, sha: str | None = "auto", size: int | None = -1, repo: str = REPO,
         revision: str = "main") -> CatalogFile:
    return CatalogFile(name, repo, revision, len(data) if size == -1 else size,
                       hashlib.sha256(data).hexdigest() if sha == "auto" else sha)


def downloader(hub, tmp_path, **kw) -> Downloader:
    return Downloader(cache_dir=tmp_path / "hub", endpoint=hub.endpoint, **kw)


def blobs(tmp_path) -> list[str]:
    folder = tmp_path / "hub" / ("models--" + REPO.replace("/", "--")) / "blobs"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def stop_after(control: DownloadControl, action: str, limit: int):
    def progress(p):
        if p.state == "downloading" and p.done >= limit:
            getattr(control, action)()
    return progress


def test_download_lands_in_the_standard_cache_verified_with_progress(hub, payload, tmp_path):
    f = hub.add(REPO, "model.gguf", payload, delay=0.002)
    events = []
    result = downloader(hub, tmp_path).download(spec("model.gguf", payload), progress=events.append)
    commit = hub._srv.repos[REPO].commit
    assert result.path == tmp_path / "hub" / f"models--{REPO.replace('/', '--')}" / "snapshots" / commit / "model.gguf"
    assert result.path.read_bytes() == payload and result.verified and result.hub_sha256
    assert result.commit == commit and result.sha256 == f.sha256 and blobs(tmp_path) == [f.sha256]
    states = [e.state for e in events]
    assert states[0] == "connecting" and states[-2:] == ["verifying", "done"] and "downloading" in states
    moving = [e for e in events if e.state == "downloading"]
    assert [e.done for e in moving] == sorted(e.done for e in moving) and moving[-1].total == len(payload)
    later = [e for e in moving if e.speed > 0]
    assert later and " of 3.0 MiB" in later[-1].describe() and "left" in later[-1].describe()
    # the revision was resolved through the hub's API, the file through its resolve URL, the bytes from storage
    assert [s.path.split("?")[0] for s in hub.seen][:1] == [f"/api/models/{REPO}/revision/main"]

    again = downloader(hub, tmp_path).download(spec("model.gguf", payload))
    assert again.path == result.path and len(hub.blob_requests(f)) == 1  # found in the cache, checked, not fetched


def test_a_file_another_tool_downloaded_is_found_in_the_cache(hub, payload, tmp_path):
    from huggingface_hub import hf_hub_download

    f = hub.add(REPO, "model.gguf", payload)
    theirs = hf_hub_download(REPO, "model.gguf", cache_dir=tmp_path / "hub", endpoint=hub.endpoint, token=False)
    ours = downloader(hub, tmp_path).download(spec("model.gguf", payload))
    assert str(ours.path) == theirs and len(hub.blob_requests(f)) == 1 and ours.verified


def test_a_broken_connection_is_resumed_by_the_library_within_the_download(hub, payload, tmp_path):
    f = hub.add(REPO, "model.gguf", payload, cut_after=[500_000])
    result = downloader(hub, tmp_path).download(spec("model.gguf", payload))
    assert result.path.read_bytes() == payload
    gets = hub.blob_requests(f)
    assert [s.status for s in gets] == [200, 206] and gets[1].headers["range"].startswith("bytes=")


def test_a_paused_download_resumes_after_a_restart_with_a_range_request(hub, payload, tmp_path, tiny_model_pair):
    data = tiny_model_pair.text.read_bytes()
    f = hub.add(REPO, "text.gguf", data, delay=0.03)
    control = DownloadControl()
    with pytest.raises(Paused):
        downloader(hub, tmp_path).download(spec("text.gguf", data), control=control,
                                           progress=stop_after(control, "pause", len(data) // 4))
    part = [b for b in blobs(tmp_path) if b.endswith(".incomplete")]
    assert part == [f"{f.sha256}.incomplete"]  # kept, and never a blob or a snapshot the app could load
    with pytest.raises(ModelFileError, match="truncated"):
        check_text_model(tmp_path / "hub" / f"models--{REPO.replace('/', '--')}" / "blobs" / part[0])
    have = (tmp_path / "hub" / f"models--{REPO.replace('/', '--')}" / "blobs" / part[0]).stat().st_size

    result = downloader(hub, tmp_path).download(spec("text.gguf", data))  # a new process: only files remain
    assert result.path.read_bytes() == data and result.resumed_from == have > 0
    last = hub.blob_requests(f)[-1]
    assert last.status == 206 and last.headers["range"] == f"bytes={have}-"
    assert check_text_model(result.path).architecture == "nemotron_h" and blobs(tmp_path) == [f.sha256]


def test_cancel_deletes_the_partial_file(hub, payload, tmp_path):
    hub.add(REPO, "model.gguf", payload, delay=0.01)
    control = DownloadControl()
    with pytest.raises(Cancelled) as err:
        downloader(hub, tmp_path).download(spec("model.gguf", payload), control=control,
                                           progress=stop_after(control, "cancel", 200_000))
    assert not isinstance(err.value, Paused) and blobs(tmp_path) == []


def test_a_wrong_checksum_is_refused(hub, payload, tmp_path):
    hub.add(REPO, "model.gguf", payload)
    with pytest.raises(DownloadError) as err:  # the catalog pins another file than the hub offers: nothing fetched
        downloader(hub, tmp_path).download(spec("model.gguf", payload, sha="0" * 64))
    assert "different model.gguf" in err.value.what and blobs(tmp_path) == []
    damaged = os.urandom(len(payload))
    hub.add(REPO, "bad.gguf", damaged, advertised_sha=hashlib.sha256(payload).hexdigest())
    with pytest.raises(ChecksumMismatch) as err:  # the bytes do not match the hub's own checksum
        downloader(hub, tmp_path).download(spec("bad.gguf", damaged, sha=None), accept_unverified=True)
    assert "does not match the hub's SHA-256" in err.value.what and "deleted" in err.value.what
    assert blobs(tmp_path) == []


def test_not_enough_disk_space_is_refused_before_the_transfer(hub, payload, tmp_path):
    f = hub.add(REPO, "model.gguf", payload)
    free = shutil.disk_usage(tmp_path).free
    with pytest.raises(NotEnoughSpace) as err:
        downloader(hub, tmp_path, margin=free).download(spec("model.gguf", payload))
    assert "not enough free disk space" in err.value.what and "HF_HUB_CACHE" in err.value.todo
    assert hub.blob_requests(f) == [] and blobs(tmp_path) == []


def test_unverified_files_need_explicit_consent_and_are_still_checked_against_the_hub(hub, payload, tmp_path):
    hub.add(REPO, "model.gguf", payload)
    with pytest.raises(DownloadError) as err:
        downloader(hub, tmp_path).download(spec("model.gguf", payload, sha=None, size=None))
    assert "no SHA-256 checksum in the catalog" in err.value.what and "--accept-unverified" in err.value.todo
    assert hub.seen == []
    result = downloader(hub, tmp_path).download(spec("model.gguf", payload, sha=None, size=None),
                                                accept_unverified=True)
    assert not result.verified and result.hub_sha256 and result.sha256 == hashlib.sha256(payload).hexdigest()


def test_gated_repository_uses_the_keyring_token_and_never_leaks_it(hub, payload, tmp_path, caplog, memory_keyring):
    token = "hf_testTOKEN1234567890"
    f = hub.add("Hcompany/Gated", "gated.gguf", payload, token=token, cut_after=[700_000])
    gated = spec("gated.gguf", payload, repo="Hcompany/Gated")
    with pytest.raises(DownloadError) as err:
        downloader(hub, tmp_path).download(gated)
    assert "needs an access token" in err.value.what and "deskhand setup --token" in err.value.todo
    secrets.set_secret(token)
    caplog.set_level(logging.DEBUG)
    d = downloader(hub, tmp_path, token=secrets.get_secret())
    result = d.download(gated)  # cut once: the library resumes it
    assert result.path.read_bytes() == payload and token not in caplog.text and token not in repr(d)
    hub_calls = [s for s in hub.seen if not s.path.startswith("/lfs/")]
    assert hub_calls and all(s.headers.get("authorization") == f"Bearer {token}" for s in hub_calls[-2:])
    assert all("authorization" not in s.headers for s in hub.blob_requests(f))  # never sent to storage
    assert all(token not in p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file()
               and p.stat().st_size < 10_000)
    with pytest.raises(DownloadError, match="refused the access token"):
        downloader(hub, tmp_path, token="hf_wrong").download(gated)


def test_missing_files_repositories_and_revisions_are_named(hub, payload, tmp_path):
    hub.add(REPO, "model.gguf", payload)
    d = downloader(hub, tmp_path)
    with pytest.raises(DownloadError, match=r"gone\.gguf was not found in Hcompany/Holo-Test-GGUF"):
        d.download(spec("gone.gguf", payload))
    with pytest.raises(DownloadError, match="repository Nobody/Nothing was not found"):
        d.download(spec("model.gguf", payload, repo="Nobody/Nothing"))
    with pytest.raises(DownloadError, match="revision the catalog pins"):
        d.download(spec("model.gguf", payload, revision="v9"))


def test_an_unreachable_hub_says_so_plainly(tmp_path, payload):
    with socket_closed() as endpoint, pytest.raises(DownloadError) as err:
        Downloader(cache_dir=tmp_path / "hub", endpoint=endpoint).download(spec("m.gguf", payload))
    assert "Could not reach 127.0.0.1" in err.value.what and "internet connection" in err.value.todo


def test_no_keyring_backend_gives_a_clear_error():
    import keyring
    from keyring.backends import fail

    keyring.set_keyring(fail.Keyring())
    assert not secrets.backend().usable and secrets.get_secret() is None
    with pytest.raises(secrets.SecretStoreError) as err:
        secrets.set_secret("hf_x")
    assert "no secure secret store" in err.value.what and "GNOME Keyring" in err.value.todo


def test_a_cached_file_with_the_right_size_but_wrong_content_is_not_reported_verified(hub, payload, tmp_path):
    f = hub.add(REPO, "model.gguf", payload)
    first = downloader(hub, tmp_path).download(spec("model.gguf", payload))
    wrong = bytearray(payload)
    wrong[len(wrong) // 2] ^= 0xFF  # one flipped byte: same size, other content
    first.path.resolve().write_bytes(bytes(wrong))
    again = downloader(hub, tmp_path).download(spec("model.gguf", payload))
    assert len(hub.blob_requests(f)) == 2, "the damaged file was taken as the model"
    assert again.verified and again.sha256 == f.sha256 and again.path.read_bytes() == payload


class socket_closed:
    """An endpoint on a port nothing listens on."""

    def __enter__(self) -> str:
        import socket

        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        return None


@pytest.mark.parametrize("content", [None, b"not a certificate\n"])
def test_a_certificate_file_that_cannot_be_read_is_named_not_taken_for_a_network_failure(hub, payload, tmp_path,
                                                                                          monkeypatch, content):
    """A missing or broken SSL_CERT_FILE makes the hub's HTTP client fail before it connects; the message names
    the variable and the file, not the internet connection."""
    from huggingface_hub.utils._http import close_session

    hub.add(REPO, "model.gguf", payload)
    ca = tmp_path / "private-ca.pem"
    if content is not None:
        ca.write_bytes(content)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    close_session()  # the library keeps one HTTP client: the next one reads the variable
    try:
        with pytest.raises(DownloadError) as err:
            downloader(hub, tmp_path).download(spec("model.gguf", payload))
    finally:
        monkeypatch.delenv("SSL_CERT_FILE")
        close_session()
    assert "SSL_CERT_FILE" in err.value.what and "private-ca.pem" in err.value.what, err.value.what
    assert "internet" not in err.value.todo and "SSL_CERT_FILE" in err.value.todo
