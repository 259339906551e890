"""Files and licences read from the hub when a model is chosen (app/setup/hub_listing.py, resolve.py), against the
loopback hub answering model info in the hub's own format: the commit is pinned, every file gets the size and SHA-256
the hub publishes, the text model is told from the projector by name or, where names do not tell, by GGUF header,
the licence comes from the model card, and an unreachable hub is said plainly."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from app.engine.gguf.header import leading_metadata
from app.setup.catalog import CatalogFile, load_catalog
from app.setup.download import Downloader
from app.setup.hub_listing import ListingStore, licence_of, read_listing
from app.setup.resolve import ResolveError, quant_name, resolve_entry
from app.setup.transfer import DownloadError
from tests.fixtures.gguf_models import ModelPair
from tests.loopback_hub import LoopbackHub
from tests.test_download import socket_closed

REPO = "Hcompany/Holo4-35B-A3B-GGUF"


@pytest.fixture
def hub():
    with LoopbackHub() as h:
        yield h


def holo4(hub: LoopbackHub, pair: ModelPair, *, text: str = "Holo4-35B-A3B-Q4_K_M.gguf",
          mmproj: str = "mmproj-F16.gguf", card: dict | None = None) -> None:
    hub.add(REPO, text, pair.text.read_bytes(), card={"license": "apache-2.0"} if card is None else card)
    hub.add(REPO, mmproj, pair.mmproj.read_bytes())


def header_of(hub: LoopbackHub, tmp_path: Path, listing):
    d = Downloader(cache_dir=tmp_path / "hub", endpoint=hub.endpoint)
    return lambda name: leading_metadata(d.leading_bytes(listing.repo, listing.commit, name))


def test_the_listing_pins_the_commit_with_every_files_size_and_lfs_sha256(hub, holo4moe_pair, tmp_path):
    holo4(hub, holo4moe_pair)
    listing = read_listing(REPO, endpoint=hub.endpoint)
    commit = hub._srv.repos[REPO].commit
    assert listing.commit == commit and listing.licence.id == "apache-2.0" and listing.licence.commercial is True
    by_name = {f.name: f for f in listing.files}
    text = holo4moe_pair.text.read_bytes()
    assert by_name["Holo4-35B-A3B-Q4_K_M.gguf"].size == len(text)
    assert by_name["Holo4-35B-A3B-Q4_K_M.gguf"].sha256 == hashlib.sha256(text).hexdigest()
    assert by_name["README.md"].sha256 is None  # a plain git file: no LFS object id
    api = [s for s in hub.seen if s.path.startswith("/api/")]
    assert len(api) == 1 and api[0].path == f"/api/models/{REPO}/revision/main?blobs=true"

    entry = resolve_entry(load_catalog().get("holo4-35b-a3b"), listing)
    (q,) = entry.quantizations
    assert q.name == "Q4_K_M" and q.file.resolved and q.file.revision == commit and q.file.size == len(text)
    assert entry.mmproj.filename == "mmproj-F16.gguf" and entry.mmproj.resolved
    assert entry.terms is not None and entry.source_line == f"{REPO} @ {commit[:12]} (read from the hub)"


def test_names_that_do_not_tell_the_roles_are_decided_by_the_gguf_headers(hub, holo4moe_pair, tmp_path):
    holo4(hub, holo4moe_pair, text="holo4-a.gguf", mmproj="holo4-b.gguf")
    listing = read_listing(REPO, endpoint=hub.endpoint)
    with pytest.raises(ResolveError, match="has no vision projector"):
        resolve_entry(load_catalog().get("holo4-35b-a3b"), listing)  # by name alone: no mmproj
    entry = resolve_entry(load_catalog().get("holo4-35b-a3b"), listing, header_of(hub, tmp_path, listing))
    assert [q.file.filename for q in entry.quantizations] == ["holo4-a.gguf"]
    assert entry.mmproj.filename == "holo4-b.gguf"
    ranged = [s for s in hub.seen if s.path.startswith("/lfs/")]
    assert len(ranged) == 2 and all(s.headers["range"] == "bytes=0-65535" and s.status == 206 for s in ranged)
    assert all("authorization" not in s.headers for s in ranged)  # the storage host never sees a token


def test_a_catalog_file_the_repository_no_longer_has_or_another_checksum_is_refused(hub, holo4moe_pair):
    holo4(hub, holo4moe_pair, text="renamed-Q4_K_M.gguf")
    listing = read_listing(REPO, endpoint=hub.endpoint)
    entry = load_catalog().get("holo4-35b-a3b")
    hinted = entry.quantizations[0].file
    named = entry.__class__(**{**entry.__dict__, "quantizations": (entry.quantizations[0].__class__(
        "Q4_K_M", CatalogFile("Holo4-35B-A3B-Q4_K_M.gguf", REPO, "main", None, None, hinted.approx_size)),)})
    with pytest.raises(ResolveError) as err:
        resolve_entry(named, listing)
    assert "Holo4-35B-A3B-Q4_K_M.gguf is not in Hcompany/Holo4-35B-A3B-GGUF" in err.value.what
    assert "renamed-Q4_K_M.gguf, mmproj-F16.gguf" in err.value.what and "update the catalog" in err.value.todo
    pinned = entry.__class__(**{**entry.__dict__, "quantizations": (entry.quantizations[0].__class__(
        "Q4_K_M", CatalogFile("renamed-Q4_K_M.gguf", REPO, "main", None, "0" * 64)),)})
    with pytest.raises(ResolveError, match=r"The hub offers a different renamed-Q4_K_M\.gguf"):
        resolve_entry(pinned, listing)


@pytest.mark.parametrize("card,name,commercial", [
    ({"license": "apache-2.0"}, "Apache-2.0", True),
    ({"license": "cc-by-nc-4.0"}, "CC-BY-NC-4.0", False),
    ({"license": "other", "license_name": "nvidia-open-model-license", "license_link": "LICENSE"},
     "NVIDIA Open Model License", True),
    ({"license": "other", "license_name": "acme-research-only"}, "acme-research-only", False),
    ({"license": "other", "license_name": "acme-model-terms"}, "acme-model-terms", None),
    ({}, "no licence declared on the model card", None),
])
def test_the_model_cards_licence_is_classified(hub, holo4_pair, card, name, commercial):
    holo4(hub, holo4_pair, card=card)
    lic = read_listing(REPO, endpoint=hub.endpoint).licence
    assert (lic.name, lic.commercial) == (name, commercial)
    assert lic.needs_consent == (commercial is not True)
    if commercial is False:
        assert "NON-COMMERCIAL" in lic.describe()
    if card.get("license_link") == "LICENSE":
        assert lic.link == f"{hub.endpoint}/{REPO}/blob/main/LICENSE"


def test_a_license_tag_stands_in_for_a_card_without_metadata():
    lic = licence_of(None, ["gguf", "license:cc-by-nc-sa-4.0"], REPO, "https://huggingface.co")
    assert lic.noncommercial and lic.id == "cc-by-nc-sa-4.0"


def test_an_unreachable_hub_falls_back_to_the_last_listing_and_says_when_it_was_read(hub, holo4_pair, tmp_path):
    holo4(hub, holo4_pair)
    store = ListingStore(tmp_path / "listings")
    first = read_listing(REPO, endpoint=hub.endpoint, store=store)
    with socket_closed() as endpoint:
        kept = read_listing(REPO, endpoint=endpoint, store=store)
        assert kept.from_store and kept.commit == first.commit and kept.files == first.files
        assert "as read on" in kept.describe_source() and "cannot be reached now" in kept.describe_source()
        with pytest.raises(DownloadError) as err:
            read_listing("Hcompany/Other-GGUF", endpoint=endpoint, store=store)
    assert "Could not reach 127.0.0.1" in err.value.what


@pytest.mark.parametrize("name,quant", [
    ("Holo4-35B-A3B-Q4_K_M.gguf", "Q4_K_M"), ("q4_k_m.gguf", "Q4_K_M"), ("Holo-3.1-4B.Q8_0.gguf", "Q8_0"),
    ("Holo-3.1-0.8B.mmproj-f16.gguf", "F16"), ("model-IQ4_XS.gguf", "IQ4_XS"), ("Holotron4-30B-A3B-BF16.gguf", "BF16"),
    ("weights.gguf", None),
])
def test_quantization_names_are_read_from_file_names(name, quant):
    assert quant_name(name) == quant
