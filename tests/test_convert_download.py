"""The download part of `deskhand model convert` against a loopback hub (tests/loopback_hub.py): the checkpoint is
taken from one commit, resumes after an interruption, a gated repository without a token and a checkpoint of another
architecture are refused before any weights are fetched."""

from __future__ import annotations

import json

import pytest

from app.domain.paths import default_paths
from app.setup.convert.checkpoint import CheckpointError, inspect_checkpoint
from app.setup.convert.checkpoint_fetch import fetch_checkpoint, list_checkpoint
from app.setup.convert.job import ConvertJob, ConvertRequest
from app.setup.convert.registry import registry_file
from app.setup.download import DownloadControl, Downloader, DownloadError, Paused
from tests.fixtures.hf_checkpoint import checkpoint_files, write_checkpoint
from tests.loopback_hub import LoopbackHub

REPO = "Hcompany/Holotron-12B"
SHARD = "model-00001-of-00002.safetensors"


@pytest.fixture
def hub():
    with LoopbackHub() as h:
        yield h


@pytest.fixture
def files(tmp_path) -> dict[str, bytes]:
    return checkpoint_files(write_checkpoint(tmp_path / "source"))


def serve(hub, files, repo=REPO, **shard_kw):
    out = {}
    for name, data in files.items():
        out[name] = hub.add(repo, name, data, **(shard_kw if name == SHARD else {}))
    (hub.add(repo, "modeling.py", b"raise SystemExit('remote code must never be downloaded')"))
    return out


def test_the_checkpoint_resumes_after_an_interruption_from_one_commit(hub, files, tmp_path):
    served = serve(hub, files, delay=0.01)
    commit = hub._srv.repos[REPO].commit
    d = Downloader(cache_dir=tmp_path / "hub", endpoint=hub.endpoint)
    remote = list_checkpoint(d, REPO, "main")
    # every hub repository has its model card (README.md), fetched with the checkpoint; never its Python code
    assert remote.commit == commit and {f.name for f in remote.files} == set(files) | {"README.md"}
    shards = [f for f in remote.files if f.name.endswith(".safetensors")]
    assert shards and all(f.lfs_sha256 == served[f.name].sha256 for f in shards)  # verified against the listing
    assert remote.weight_bytes == sum(len(v) for k, v in files.items() if k.endswith(".safetensors"))
    control = DownloadControl()

    def pause_mid_shard(i, n, p):
        if p.filename == SHARD and p.state == "downloading" and p.done > len(files[SHARD]) // 3:
            control.pause()

    with pytest.raises(Paused):
        fetch_checkpoint(d, remote, progress=pause_mid_shard, control=control)
    have = remote.cached_bytes(d)
    assert 0 < have < remote.size

    again = Downloader(cache_dir=tmp_path / "hub", endpoint=hub.endpoint)  # a new run: only the files remain
    folder = fetch_checkpoint(again, list_checkpoint(again, REPO, "main"))
    assert folder.name == commit and {p.name for p in folder.iterdir()} == set(files) | {"README.md"}
    assert all((folder / k).read_bytes() == v for k, v in files.items())
    gets = hub.blob_requests(served[SHARD])
    assert gets[-1].status == 206 and int(gets[-1].headers["range"].removeprefix("bytes=").split("-")[0]) > 0
    assert inspect_checkpoint(folder).weight_bytes == remote.weight_bytes
    assert not any("modeling.py" in s.path for s in hub.seen)


def _job(tmp_path, hub, **kw):
    paths = default_paths(tmp_path / "home").ensure()
    return paths, ConvertJob(paths, ConvertRequest(repo=REPO, **kw),
                             downloader=Downloader(cache_dir=tmp_path / "hub", endpoint=hub.endpoint))


def test_a_gated_repository_without_a_token_says_what_to_do(hub, files, tmp_path):
    serve(hub, files, token="hf_secretTOKEN")
    paths, job = _job(tmp_path, hub)
    with pytest.raises(DownloadError) as e:
        job.run()
    assert "gated repository (Hcompany/Holotron-12B)" in e.value.what and "needs an access token" in e.value.what
    assert "deskhand setup --token" in e.value.todo
    assert not any(s.path.startswith("/lfs/") for s in hub.seen)
    assert not registry_file(paths).exists() and not paths.settings_file.exists()


def test_another_architecture_is_refused_after_config_json_only(hub, files, tmp_path):
    config = json.loads(files["config.json"])
    config["architectures"] = ["Qwen2_5_VLForConditionalGeneration"]
    files["config.json"] = json.dumps(config).encode()
    served = serve(hub, files)
    paths, job = _job(tmp_path, hub)
    with pytest.raises(CheckpointError, match="another architecture"):
        job.run()
    fetched = {s.path for s in hub.seen if s.path.startswith("/lfs/")}
    assert fetched == {f"/lfs/{served['config.json'].sha256}"}  # not a byte of the weights
    assert not (paths.data / "tools").exists()  # nor the conversion tools


def test_not_enough_disk_is_said_before_anything_is_downloaded(hub, files, tmp_path, monkeypatch):
    from app.setup.convert import plan as convert_plan
    from app.setup.transfer import NotEnoughSpace

    serve(hub, files)
    monkeypatch.setattr(convert_plan, "_free", lambda path: 2 * 1024 * 1024)  # 2 MiB free
    _, job = _job(tmp_path, hub)
    with pytest.raises(NotEnoughSpace) as e:
        job.run()
    assert "not enough free disk space to convert this model" in e.value.what
    assert "to download" in e.value.what and "GGUF files" in e.value.what and "HF_HUB_CACHE" in e.value.todo
    assert not any(s.path.startswith("/lfs/") for s in hub.seen)


def test_cli_takes_the_base_model_at_its_pinned_commit_and_asks_before_installing_tools(hub, files, tmp_path):
    """`deskhand model convert nemotron-nano-12b-v2-vl`: NVIDIA's BF16 repository at the commit Deskhand pins; the
    checkpoint's config is checked, then, with no terminal and no --yes, it stops at the tools' size and asks."""
    import os
    import subprocess
    import sys

    from app.setup.convert.plan import SOURCES

    repo = "nvidia/NVIDIA-Nemotron-Nano-12B-v2-VL-BF16"
    pinned = SOURCES[repo][0]
    for name, data in files.items():
        hub.add(repo, name, data, commit=pinned)
    env = os.environ | {"HF_ENDPOINT": hub.endpoint, "DESKHAND_HOME": str(tmp_path / "home"),
                        "HF_HUB_CACHE": str(tmp_path / "hub")}
    r = subprocess.run([sys.executable, "-m", "app", "model", "convert", "nemotron-nano-12b-v2-vl"], env=env,
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{repo} @ {pinned}" in r.stdout and f"{repo} at commit {pinned}" in r.stdout
    assert "Converting needs a one-time download of about 1.2 GiB" in r.stderr and "--yes" in r.stderr
    assert any(s.path.startswith(f"/{repo}/resolve/{pinned}/config.json") for s in hub.seen)
    assert not (tmp_path / "home" / "data" / "tools").exists()


def test_a_non_commercial_checkpoint_is_not_downloaded_without_acknowledgement(hub, files, tmp_path):
    from app.setup.licence_consent import LicenceConsentNeeded

    for name, data in files.items():
        hub.add(REPO, name, data, card={"license": "cc-by-nc-4.0"})
    _, job = _job(tmp_path, hub)
    with pytest.raises(LicenceConsentNeeded) as e:
        job.run()
    assert "NON-COMMERCIAL licence" in e.value.what and "--accept-licence" in e.value.todo
    assert not any("/resolve/" in s.path or s.path.startswith("/lfs/") for s in hub.seen)  # nothing downloaded
    lines: list[str] = []
    _, job = _job(tmp_path, hub, accept_licence=True)
    job._log = lines.append
    job._remote()
    assert any("Licence of Hcompany" in line and "NON-COMMERCIAL" in line for line in lines)
    assert any("Licence acknowledged" in line for line in lines)
