"""Issue 25, item 12: tests for one-line bugs a mutation audit planted and no test caught. Real SQLite files,
the real redaction and the real consent rule."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import threading

import pytest

from app.agent import history_recovery
from app.agent.history_recovery import open_recorder
from app.agent.recorder import connect
from app.agent.run_memory import REDACTED, without_secrets
from app.domain.errors import DeskhandError
from app.domain.settings import Settings
from app.setup.engines import check_screenshots_may_leave


@pytest.mark.parametrize("secret", ['pa"ss\\wörd', "ünïcødé-Geheimnis", "tab\tand\nline"])
@pytest.mark.parametrize("ascii_only", [True, False])
def test_a_typed_secret_is_redacted_in_its_json_escaped_form_inside_the_raw_answer(secret, ascii_only):
    raw = json.dumps({"note": None, "thought": "Sign in.", "tool_call": {"tool_name": "write", "content": secret}},
                     ensure_ascii=ascii_only)
    assert secret not in raw or not ascii_only or secret.isascii()  # the raw answer holds it escaped
    cleaned = without_secrets(raw, {secret})
    assert json.loads(cleaned)["tool_call"]["content"] == REDACTED, cleaned


def test_a_damaged_history_is_moved_aside_with_its_wal_and_shm_files(tmp_path):
    db = tmp_path / "runs.sqlite3"
    db.write_bytes(b"not a database" * 500)
    for suffix, data in (("-wal", b"wal bytes"), ("-shm", b"shm bytes")):
        (tmp_path / f"runs.sqlite3{suffix}").write_bytes(data)
    recorder, notices = open_recorder(db, tmp_path / "runs")
    assert recorder is not None and any("damaged" in n for n in notices), notices
    recorder.close()
    kept = sorted(p.name for p in tmp_path.glob("runs.corrupt-*"))
    assert [k.rsplit(".sqlite3", 1)[1] for k in kept] == ["", "-shm", "-wal"], kept
    assert (tmp_path / kept[2]).read_bytes() == b"wal bytes"  # the old log went with its database


def test_a_history_locked_at_start_up_is_waited_for(tmp_path, monkeypatch):
    """The lock is released only once open_recorder has met it and started waiting: a start that does not wait
    runs without history (the mutation), one that waits records."""
    db = tmp_path / "runs.sqlite3"
    connect(db).close()
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    waiting = threading.Event()
    real_sleep = history_recovery.time.sleep

    def noted_sleep(seconds: float) -> None:
        waiting.set()
        real_sleep(seconds)

    monkeypatch.setattr(history_recovery.time, "sleep", noted_sleep)
    releaser = threading.Thread(target=lambda: (waiting.wait(600), holder.rollback(), holder.close()))
    releaser.start()
    try:
        recorder, notices = open_recorder(db, tmp_path / "runs", lock_wait_s=600)
    finally:
        waiting.set()
        releaser.join()
    assert recorder is not None and notices == [], notices
    recorder.close()


def test_the_consent_question_comes_back_when_the_server_moves_to_a_new_host():
    confirmed = Settings(engine="remote", engine_url="https://gpu-a.example:8000/v1",
                         engine_confirmed_host="gpu-a.example")
    check_screenshots_may_leave(confirmed)  # the host agreed to
    moved = confirmed.replace(engine_url="https://gpu-b.example:8000/v1")
    with pytest.raises(DeskhandError, match=r"gpu-b\.example, which you have not confirmed"):
        check_screenshots_may_leave(moved)
    check_screenshots_may_leave(moved.replace(engine_url="http://127.0.0.1:8000/v1"))  # this computer: no question


@pytest.mark.parametrize("right", ["mean", "std"])
def test_the_projector_normalisation_is_fixed_when_only_one_of_mean_and_std_is_right(model_factory, tmp_path,
                                                                                   right):
    from app.engine.gguf.header import read_gguf
    from app.setup.convert.finish import fix_normalisation
    from tests.fixtures import gguf_models as gm

    mmproj = model_factory.mmproj(tmp_path, image_mean=gm.CLIP_MEAN if right == "mean" else gm.IMAGENET_MEAN,
                                  image_std=gm.CLIP_STD if right == "std" else gm.IMAGENET_STD)
    assert fix_normalisation(mmproj, gm.CLIP_MEAN, gm.CLIP_STD) != ""
    info = read_gguf(mmproj, "mmproj")
    assert info.get("clip.vision.image_mean") == pytest.approx(gm.CLIP_MEAN)
    assert info.get("clip.vision.image_std") == pytest.approx(gm.CLIP_STD)


def _mount_tmpfs(folder, size: str) -> None:
    folder.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(folder)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a file system here: {r.stderr.strip()}")


def test_the_conversion_disk_check_adds_up_checkpoint_and_outputs_on_one_disk(tmp_path):
    """Two real file systems of 2 GiB (tmpfs: nothing is written): 1.2 GiB of checkpoint and 1.2 GiB of outputs
    fit one on each, not both on one."""
    from app.setup.convert.plan import DiskNeed, check_disk
    from app.setup.transfer import NotEnoughSpace

    one, other = tmp_path / "one", tmp_path / "other"
    _mount_tmpfs(one, "2g")
    try:
        _mount_tmpfs(other, "2g")
        try:
            for folder in (one / "models", one / "hub", other / "hub"):
                folder.mkdir()  # two folders of one disk: told apart by the disk, not by the path
            need = DiskNeed(download=1200 * 2**20, outputs=1200 * 2**20)
            check_disk(need, one / "models", other / "hub")  # each disk holds its part (with the margin)
            with pytest.raises(NotEnoughSpace, match=r"2\.[34] GiB"):
                check_disk(need, one / "models", one / "hub")
        finally:
            subprocess.run(["umount", "-l", str(other)], check=False)
    finally:
        subprocess.run(["umount", "-l", str(one)], check=False)


def test_file_metadata_and_the_checkpoint_file_list_come_from_the_resolved_commit(tmp_path):
    """A branch is resolved to its commit once; every later request names that commit, so a push to the branch
    in the middle cannot mix two versions (the mutation read them from "main"). The checkpoint's file list and its
    commit come from one answer of the hub, and its files are then fetched from that commit."""
    import hashlib

    from app.setup.catalog import CatalogFile
    from app.setup.convert.checkpoint_fetch import fetch_checkpoint, list_checkpoint
    from app.setup.download import Downloader
    from tests.loopback_hub import LoopbackHub

    repo, data = "Hcompany/Holo-Pinned", b"GGUF" + bytes(4096)
    with LoopbackHub() as hub:
        hub.add(repo, "model.gguf", data)
        hub.add(repo, "config.json", b"{}")
        commit = hub._srv.repos[repo].commit
        downloader = Downloader(cache_dir=tmp_path / "hub", endpoint=hub.endpoint)
        result = downloader.download(CatalogFile("model.gguf", repo, "main", len(data),
                                                 hashlib.sha256(data).hexdigest()))
        before = len(hub.seen)
        remote = list_checkpoint(downloader, repo, "main")
        fetch_checkpoint(downloader, remote, only=("config.json",))
        paths = [s.path.split("?")[0] for s in hub.seen]
    assert result.commit == commit and remote.commit == commit
    resolves = [p for p in paths if "/resolve/" in p]
    assert resolves and all(f"/resolve/{commit}/" in p for p in resolves), resolves
    listing = [p for p in paths[before:] if p.startswith("/api/models/")]
    assert listing == [f"/api/models/{repo}/revision/main"], paths  # one answer: the commit and its files
