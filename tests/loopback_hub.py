"""A Hugging Face hub on 127.0.0.1 for download tests, speaking what huggingface_hub uses (its source is the
reference: file_download.get_hf_file_metadata, utils/_http.hf_raise_for_status, hf_api.model_info):

* GET /api/models/{repo}/revision/{rev} (and /api/datasets/…): the model info as the hub answers it (its keys and
  nesting as huggingface_hub's ModelInfo / RepoSibling / BlobLfsInfo read them): "_id", "id", "modelId", "author",
  "sha", "lastModified", "createdAt", "private", "disabled", "gated", "tags" (with "license:…"), "library_name",
  "cardData" (the model card's metadata: license, license_name, license_link, base_model), "gguf" for GGUF
  repositories, "usedStorage", and "siblings": [{"rfilename"}] — with ?blobs=true (files_metadata) each sibling also
  has "blobId" and "size", and a Git LFS file "lfs": {"sha256", "size", "pointerSize"}. README.md and .gitattributes
  are there as plain git files (no "lfs");
* HEAD/GET /{repo}/resolve/{rev}/{path} (a dataset's: /datasets/{repo}/resolve/…): 302 to the file's storage
  address, with X-Repo-Commit, ETag,
  X-Linked-Etag (the Git LFS SHA-256) and X-Linked-Size; errors carry X-Error-Code (RepoNotFound,
  RevisionNotFound, EntryNotFound, GatedRepo) as the hub's do;
* GET /lfs/{sha256} on another host name (localhost): the bytes, with Range requests, cut connections and slow
  transfers. The access token must never reach it.

Started and stopped by the test (`with LoopbackHub() as hub`); HF_ENDPOINT=hub.endpoint points huggingface_hub at it.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class HubFile:
    data: bytes
    cut_after: list[int] = field(default_factory=list)  # per GET, in order: close after this many body bytes
    delay: float = 0.0  # seconds between 16 KiB pieces
    advertised_sha: str | None = None  # what the hub claims (a damaged upload when it differs from the data)
    lfs: bool = True  # stored with Git LFS (every model file is); False: a plain git file (configs, README)

    @property
    def sha256(self) -> str:
        return self.advertised_sha or hashlib.sha256(self.data).hexdigest()


@dataclass
class Repo:
    commit: str
    files: dict[str, HubFile] = field(default_factory=dict)
    token: str | None = None  # gated: needs this Bearer token
    card: dict[str, Any] = field(default_factory=lambda: {"license": "apache-2.0"})  # the model card's metadata


def _git_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def all_files(repo: Repo) -> dict[str, HubFile]:
    """The repository's files with the two every hub repository has: .gitattributes and the model card."""
    readme = b"---\n" + "".join(f"{k}: {json.dumps(v)}\n" for k, v in repo.card.items()).encode() + b"---\n"
    plain = {".gitattributes": HubFile(b"*.gguf filter=lfs diff=lfs merge=lfs -text\n", lfs=False),
             "README.md": HubFile(readme, lfs=False)}
    return {**plain, **repo.files}


def model_info(name: str, repo: Repo, blobs: bool) -> dict[str, Any]:
    """What the hub's /api/models/{repo}/revision/{rev} answers."""
    siblings = []
    for n, f in all_files(repo).items():
        s: dict[str, Any] = {"rfilename": n}
        if blobs:
            s |= {"blobId": _git_oid(f.data), "size": len(f.data)}
            if f.lfs:
                s["lfs"] = {"sha256": f.sha256, "size": len(f.data), "pointerSize": 134}
                s["blobId"] = _git_oid(f"version https://git-lfs.github.com/spec/v1\noid sha256:{f.sha256}\n"
                                       f"size {len(f.data)}\n".encode())
        siblings.append(s)
    lic = repo.card.get("license")
    info: dict[str, Any] = {
        "_id": hashlib.md5(name.encode()).hexdigest()[:24], "id": name, "modelId": name, "author": name.split("/")[0],
        "sha": repo.commit, "lastModified": "2026-09-28T09:12:44.000Z", "createdAt": "2026-09-20T16:01:02.000Z",
        "private": False, "disabled": False, "gated": "manual" if repo.token else False, "library_name": "gguf",
        "tags": ["gguf", "image-text-to-text", *([f"license:{lic}"] if lic else [])], "downloads": 1234,
        "likes": 56, "cardData": dict(repo.card), "spaces": [], "widgetData": [],
        "usedStorage": sum(len(f.data) for f in repo.files.values()), "siblings": siblings,
    }
    if any(n.endswith(".gguf") for n in repo.files):
        info["gguf"] = {"total": 123456, "architecture": "qwen35", "context_length": 262144}
    return info


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    status: int = 0


_RESOLVE = re.compile(r"/(?P<repo>(?:datasets/)?[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)")
_API = re.compile(r"/api/(?P<kind>models|datasets)/(?P<repo>[^/]+/[^/]+)/revision/(?P<rev>[^/?]+)")


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, seen: Seen, status: int, headers: dict[str, str], body: bytes = b"") -> None:
        seen.status = status
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def _error(self, seen: Seen, status: int, code: str, commit: str | None = None) -> None:
        headers = {"X-Error-Code": code, "X-Error-Message": code}
        if commit:
            headers["X-Repo-Commit"] = commit
        self._reply(seen, status, headers, json.dumps({"error": code}).encode())

    def _repo(self, seen: Seen, name: str, rev: str) -> Repo | None:
        repo = self.server.repos.get(name)
        if repo is None:
            self._error(seen, 401, "RepoNotFound")
            return None
        if repo.token is not None and self.headers.get("Authorization") != f"Bearer {repo.token}":
            self._error(seen, 401, "GatedRepo")
            return None
        if rev not in ("main", repo.commit):
            self._error(seen, 404, "RevisionNotFound")
            return None
        return repo

    def _handle(self) -> None:
        srv = self.server
        seen = Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()})
        with srv.lock:
            srv.seen.append(seen)
        path = self.path.split("?", 1)[0]
        if m := _API.fullmatch(path):
            repo = self._repo(seen, ("datasets/" if m["kind"] == "datasets" else "") + m["repo"], m["rev"])
            if repo is not None:
                blobs = "blobs=true" in (self.path.split("?", 1)[1].lower() if "?" in self.path else "")
                body = json.dumps(model_info(m["repo"], repo, blobs)).encode()
                self._reply(seen, 200, {"Content-Type": "application/json"}, body)
            return
        if m := _RESOLVE.fullmatch(path):
            repo = self._repo(seen, m["repo"], m["rev"])
            if repo is None:
                return
            f = all_files(repo).get(m["path"])
            if f is None:
                self._error(seen, 404, "EntryNotFound", repo.commit)
                return
            if not f.lfs:  # a plain git file: served by the hub itself, its git object id as ETag
                self._send_blob(seen, f, {"ETag": f'"{_git_oid(f.data)}"', "X-Repo-Commit": repo.commit})
                return
            self._reply(seen, 302, {"Location": f"{srv.storage}/lfs/{f.sha256}", "X-Repo-Commit": repo.commit,
                                    "ETag": f'"{hashlib.sha1(f.data).hexdigest()}"', "X-Linked-Etag": f'"{f.sha256}"',
                                    "X-Linked-Size": str(len(f.data))})
            return
        if path.startswith("/lfs/"):
            f = srv.blobs.get(path[5:])
            if f is None:
                self._error(seen, 404, "EntryNotFound")
                return
            self._send_blob(seen, f)
            return
        self._error(seen, 404, "NotFound")

    def _send_blob(self, seen: Seen, f: HubFile, extra: dict[str, str] | None = None) -> None:
        data, start, end = f.data, 0, len(f.data) - 1
        rng = self.headers.get("Range")
        headers = {"ETag": f'"{f.sha256}"', "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream",
                   **(extra or {})}
        if rng:
            first, _, last = rng.removeprefix("bytes=").partition("-")
            start = int(first)
            end = min(int(last), end) if last else end
            if start >= len(data):
                self._reply(seen, 416, {"Content-Range": f"bytes */{len(data)}"})
                return
            seen.status = 206
            self.send_response(206)
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
        else:
            seen.status = 200
            self.send_response(200)
        body = data[start:end + 1]
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command == "HEAD":
            return
        cut = f.cut_after.pop(0) if f.cut_after else None
        sent = 0
        while sent < len(body):
            piece = body[sent:sent + 16384]
            if cut is not None and sent + len(piece) > cut:
                piece = piece[:cut - sent]
            try:
                self.wfile.write(piece)
                self.wfile.flush()
            except OSError:
                return
            sent += len(piece)
            if cut is not None and sent >= cut:
                self.connection.shutdown(socket.SHUT_RDWR)  # the transfer breaks mid-way
                self.close_connection = True
                return
            if f.delay:
                time.sleep(f.delay)

    do_GET = _handle
    do_HEAD = _handle


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.repos: dict[str, Repo] = {}
        self.blobs: dict[str, HubFile] = {}
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self.storage = f"http://localhost:{self.server_address[1]}"  # another host name: a CDN


class LoopbackHub:
    def __init__(self) -> None:
        self._srv = _Server()
        self._thread = threading.Thread(target=self._srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> LoopbackHub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._srv.shutdown()
        self._srv.server_close()
        self._thread.join(5)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._srv.server_address[1]}"

    def add(self, repo: str, path: str, data: bytes, *, commit: str | None = None, token: str | None = None,
            dataset: bool = False, card: dict[str, Any] | None = None, **kw: Any) -> HubFile:
        """A file of a model repository (of a dataset repository with dataset=True); `card`: the model card's
        metadata (licence)."""
        repo = f"datasets/{repo}" if dataset else repo
        r = self._srv.repos.setdefault(repo, Repo(commit or hashlib.sha1(repo.encode()).hexdigest()))
        if commit:
            r.commit = commit
        if token is not None:
            r.token = token
        if card is not None:
            r.card = dict(card)
        f = HubFile(data, **kw)
        r.files[path] = f
        self._srv.blobs[f.sha256] = f
        return f

    @property
    def seen(self) -> list[Seen]:
        with self._srv.lock:
            return list(self._srv.seen)

    def blob_requests(self, f: HubFile) -> list[Seen]:
        return [s for s in self.seen if s.path == f"/lfs/{f.sha256}" and s.method == "GET"]
