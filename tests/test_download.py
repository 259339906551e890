"""The resumable downloader against a real HTTP server on loopback (tests/loopback_http.py)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading

import pytest

from app.domain.errors import Cancelled, ModelFileError
from app.engine.model_files import check_text_model
from app.setup import secrets
from app.setup.catalog import CatalogFile
from app.setup.download import (
    ChecksumMismatch,
    DownloadControl,
    Downloader,
    DownloadError,
    Interrupted,
    NotEnoughSpace,
    Paused,
)
from tests.loopback_http import LoopbackServer

CHUNK = 64 * 1024


@pytest.fixture
def server():
    with LoopbackServer() as srv:
        yield srv


@pytest.fixture
def payload() -> bytes:
    return os.urandom(3 * 1024 * 1024 + 12345)


def spec_for(srv: LoopbackServer, path: str, data: bytes, *, sha: str | None = "auto", size: int | None = -1,
             name: str = "model.gguf") -> CatalogFile:
    return CatalogFile(name, (srv.url(path),), len(data) if size == -1 else size,
                       hashlib.sha256(data).hexdigest() if sha == "auto" else sha)


def leftovers(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_full_download_reports_bytes_speed_and_time_left(server, payload, tmp_path):
    server.serve("/m.gguf", payload, delay=0.002)
    events = []
    result = Downloader(tmp_path, chunk=CHUNK).download(spec_for(server, "/m.gguf", payload), progress=events.append)
    assert result.path.read_bytes() == payload and result.verified and result.size == len(payload)
    assert result.sha256 == hashlib.sha256(payload).hexdigest() and result.resumed_from == 0
    assert leftovers(tmp_path) == ["model.gguf"]  # no .part, no sidecar
    states = [e.state for e in events]
    assert states[0] == "connecting" and states[-2:] == ["verifying", "done"] and "downloading" in states
    moving = [e for e in events if e.state == "downloading"]
    assert [e.done for e in moving] == sorted(e.done for e in moving)
    assert all(e.total == len(payload) for e in moving)
    later = [e for e in moving if e.speed > 0]
    assert later and all(e.eta is not None and e.eta >= 0 for e in later)
    line = later[-1].describe()
    assert " of 3.0 MiB" in line and "/s" in line and "left" in line


def test_interrupted_download_resumes_with_range_after_a_restart(server, payload, tmp_path):
    served = server.serve("/m.gguf", payload, cut_after=[1_200_000])
    spec = spec_for(server, "/m.gguf", payload)
    with pytest.raises(Interrupted) as err:
        Downloader(tmp_path, chunk=CHUNK, retries=0).download(spec)
    assert "resumes where it stopped" in str(err.value)
    part = tmp_path / "model.gguf.part"
    assert part.stat().st_size == 1_200_000 and not (tmp_path / "model.gguf").exists()
    sidecar = json.loads((tmp_path / "model.gguf.part.json").read_text())
    assert sidecar["url"] == spec.urls[0] and sidecar["total"] == len(payload) and sidecar["validator"] == served.etag

    result = Downloader(tmp_path, chunk=CHUNK).download(spec)  # a new process: only the files on disk remain
    assert result.path.read_bytes() == payload and result.resumed_from == 1_200_000 and result.verified
    second = server.requests_for("/m.gguf")[1]
    assert second.headers["range"] == "bytes=1200000-" and second.headers["if-range"] == served.etag
    assert second.status == 206 and leftovers(tmp_path) == ["model.gguf"]


def test_a_broken_connection_is_resumed_within_the_same_download(server, payload, tmp_path):
    server.serve("/m.gguf", payload, cut_after=[500_000, 2_000_000])
    result = Downloader(tmp_path, chunk=CHUNK, retries=3).download(spec_for(server, "/m.gguf", payload))
    assert result.path.read_bytes() == payload
    assert [s.status for s in server.requests_for("/m.gguf")] == [200, 206, 206]


def test_a_file_changed_on_the_server_restarts_instead_of_mixing_two_versions(server, payload, tmp_path):
    server.serve("/m.gguf", payload, cut_after=[1_000_000])
    with pytest.raises(Interrupted):
        Downloader(tmp_path, chunk=CHUNK, retries=0).download(spec_for(server, "/m.gguf", payload, sha=None),
                                                                accept_unverified=True)
    newer = os.urandom(len(payload))
    server.serve("/m.gguf", newer)  # new ETag: If-Range no longer matches, the server sends the whole file
    result = Downloader(tmp_path, chunk=CHUNK).download(spec_for(server, "/m.gguf", payload, sha=None),
                                                        accept_unverified=True)
    assert result.path.read_bytes() == newer and result.sha256 == hashlib.sha256(newer).hexdigest()
    assert server.requests_for("/m.gguf")[1].status == 200


def test_checksum_mismatch_is_rejected_and_the_file_deleted(server, payload, tmp_path):
    server.serve("/m.gguf", payload)
    with pytest.raises(ChecksumMismatch) as err:
        Downloader(tmp_path, chunk=CHUNK).download(spec_for(server, "/m.gguf", payload, sha="0" * 64))
    assert "does not match its published SHA-256" in err.value.what and "deleted" in err.value.what
    assert leftovers(tmp_path) == []


def test_not_enough_disk_space_is_refused_before_starting(server, payload, tmp_path):
    server.serve("/m.gguf", payload)
    free = shutil.disk_usage(tmp_path).free
    with pytest.raises(NotEnoughSpace) as err:  # the published size is known: refused without connecting
        Downloader(tmp_path, margin=free).download(spec_for(server, "/m.gguf", payload))
    assert "not enough free disk space" in err.value.what and "Free some space" in err.value.todo
    assert server.seen == [] and leftovers(tmp_path) == []
    with pytest.raises(NotEnoughSpace):  # size unknown: refused from Content-Length, before any byte is written
        Downloader(tmp_path, margin=free).download(spec_for(server, "/m.gguf", payload, size=None))
    assert leftovers(tmp_path) == []


def test_cancel_deletes_the_part_and_pause_keeps_it_but_never_as_a_model(server, tiny_model_pair, tmp_path):
    data = tiny_model_pair.text.read_bytes()
    server.serve("/t.gguf", data, delay=0.03)
    spec = spec_for(server, "/t.gguf", data, name="text.gguf")

    def stop_after(control: DownloadControl, action: str, limit: int):
        def progress(p):
            if p.state == "downloading" and p.done >= limit:
                getattr(control, action)()
        return progress

    control = DownloadControl()
    with pytest.raises(Paused):
        Downloader(tmp_path, chunk=CHUNK).download(spec, progress=stop_after(control, "pause", len(data) // 4),
                                                   control=control)
    assert not (tmp_path / "text.gguf").exists()
    with pytest.raises(ModelFileError, match="truncated"):  # what is kept is not a usable model
        check_text_model(tmp_path / "text.gguf.part")

    control = DownloadControl()
    with pytest.raises(Cancelled) as err:
        Downloader(tmp_path, chunk=CHUNK).download(spec, progress=stop_after(control, "cancel", len(data) // 2),
                                                   control=control)
    assert not isinstance(err.value, Paused) and leftovers(tmp_path) == []

    result = Downloader(tmp_path, chunk=CHUNK).download(spec)  # and a clean download still works
    assert check_text_model(result.path).architecture == "nemotron_h"


def test_cancel_from_another_thread(server, payload, tmp_path):
    server.serve("/m.gguf", payload, delay=0.01)
    control = DownloadControl()
    started = threading.Event()
    timer = threading.Timer(0.3, control.cancel)
    timer.start()
    try:
        with pytest.raises(Cancelled):
            Downloader(tmp_path, chunk=CHUNK).download(spec_for(server, "/m.gguf", payload), control=control,
                                                       progress=lambda p: started.set())
    finally:
        timer.cancel()
    assert started.is_set() and leftovers(tmp_path) == []


def test_unverified_files_need_explicit_consent(server, payload, tmp_path):
    server.serve("/m.gguf", payload)
    spec = spec_for(server, "/m.gguf", payload, sha=None)
    with pytest.raises(DownloadError) as err:
        Downloader(tmp_path).download(spec)
    assert "no published SHA-256" in err.value.what and "--accept-unverified" in err.value.todo
    assert server.seen == []
    result = Downloader(tmp_path).download(spec, accept_unverified=True)
    assert not result.verified and result.sha256 == hashlib.sha256(payload).hexdigest()


def test_an_existing_verified_file_is_not_downloaded_again(server, payload, tmp_path):
    server.serve("/m.gguf", payload)
    spec = spec_for(server, "/m.gguf", payload)
    Downloader(tmp_path).download(spec)
    again = Downloader(tmp_path).download(spec)
    assert again.verified and len(server.seen) == 1


def test_gated_file_uses_the_keyring_token_and_never_leaks_it(server, payload, tmp_path, caplog, memory_keyring):
    token = "hf_testTOKEN1234567890"
    server.serve("/gated.gguf", payload, token=token, cut_after=[700_000])
    spec = spec_for(server, "/gated.gguf", payload)
    with pytest.raises(DownloadError) as err:
        Downloader(tmp_path, token_hosts=("127.0.0.1",)).download(spec)
    assert "needs an access token" in err.value.what and "deskhand setup --token" in err.value.todo

    secrets.set_secret(token)
    assert memory_keyring.store[(secrets.SERVICE, secrets.HF_TOKEN)] == token
    caplog.set_level(logging.DEBUG)
    downloader = Downloader(tmp_path, token=secrets.get_secret(), token_hosts=("127.0.0.1",), chunk=CHUNK)
    result = downloader.download(spec)  # cut once: the resumed request carries the token too
    assert result.path.read_bytes() == payload
    assert [s.status for s in server.requests_for("/gated.gguf")][-2:] == [200, 206]
    assert token not in caplog.text and token not in repr(downloader)
    assert all(token not in p.read_text(errors="replace") for p in tmp_path.rglob("*.json"))

    # other hosts never get it: neither directly nor through a redirect
    server.serve("/public.gguf", payload)
    server.redirect("/hop.gguf", server.url("/public.gguf", host="localhost"))
    hop = CatalogFile("hop.gguf", (server.url("/hop.gguf"),), len(payload), hashlib.sha256(payload).hexdigest())
    Downloader(tmp_path, token=token, token_hosts=("127.0.0.1",)).download(hop)
    assert server.requests_for("/hop.gguf")[0].headers.get("authorization") == f"Bearer {token}"
    assert "authorization" not in server.requests_for("/public.gguf")[0].headers
    other = CatalogFile("o.gguf", (server.url("/public.gguf", host="localhost"),), len(payload), None)
    Downloader(tmp_path, token=token, token_hosts=("127.0.0.1",)).download(other, accept_unverified=True)
    assert all("authorization" not in s.headers for s in server.requests_for("/public.gguf"))


def test_not_found_names_the_file(server, tmp_path):
    spec = CatalogFile("gone.gguf", (server.url("/gone.gguf"),), None, "0" * 64)
    with pytest.raises(DownloadError, match=r"gone\.gguf was not found"):
        Downloader(tmp_path).download(spec)


def test_no_keyring_backend_gives_a_clear_error(monkeypatch):
    import keyring
    from keyring.backends import fail

    keyring.set_keyring(fail.Keyring())
    assert not secrets.backend().usable and secrets.get_secret() is None
    with pytest.raises(secrets.SecretStoreError) as err:
        secrets.set_secret("hf_x")
    assert "no secure secret store" in err.value.what and "GNOME Keyring" in err.value.todo


def test_a_file_at_its_final_name_with_the_right_size_but_wrong_content_is_not_reported_verified(
        server, payload, tmp_path):
    server.serve("/m.gguf", payload)
    spec = spec_for(server, "/m.gguf", payload)
    wrong = bytearray(payload)
    wrong[len(wrong) // 2] ^= 0xFF  # one flipped byte: same size, other content
    (tmp_path / "model.gguf").write_bytes(bytes(wrong))
    result = Downloader(tmp_path).download(spec)
    assert len(server.seen) == 1, "the damaged file was taken as the model"
    assert result.verified and result.sha256 == hashlib.sha256(payload).hexdigest()
    assert (tmp_path / "model.gguf").read_bytes() == payload
