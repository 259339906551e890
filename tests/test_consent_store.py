"""The hosts file the consent dialog and `deskhand mcp allow` both write (app/link/consent.py): real files."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

from app.link.consent import FILE_NAME, ConsentStore
from tests.desktop import REPO


def test_a_write_leaves_another_writer_s_unfinished_file_alone_and_stays_private(tmp_path):
    other = tmp_path / "mcp-hosts.tmp"  # the name every writer used: another process halfway through its write
    other.write_text('{"hosts": {"Claude Desktop": {"tools": ["st')
    store = ConsentStore(tmp_path)
    store.allow("Cursor", ("status", "stop"))
    assert other.read_text() == '{"hosts": {"Claude Desktop": {"tools": ["st'  # not taken over, not moved
    assert store.grant("Cursor").tools == ("status", "stop")
    assert stat.S_IMODE((tmp_path / FILE_NAME).stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILE_NAME, "mcp-hosts.tmp"]  # none of its own left


def test_a_hosts_file_an_editor_saved_with_a_byte_order_mark_keeps_its_consent(tmp_path):
    """As row S10 of the 2026-12-06 pass for settings: a BOM read as damage would count as no consent, and the next
    `mcp allow` would write over what the person had given."""
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / FILE_NAME).write_bytes(
        b'\xef\xbb\xbf{"hosts": {"Cursor": {"tools": ["status", "stop"], "granted_at": 1796600000.0}}}')
    env = {**os.environ, "DESKHAND_HOME": str(home), "PYTHONPATH": str(REPO)}
    hosts = subprocess.run([sys.executable, "-m", "app", "mcp", "hosts"], cwd=REPO, env=env, capture_output=True,
                           text=True, timeout=120)
    assert hosts.returncode == 0 and "Cursor: status, stop" in hosts.stdout, hosts.stdout + hosts.stderr
    store = ConsentStore(home / "config")
    store.allow("Claude Code", ("status",))
    assert store.grant("Cursor").tools == ("status", "stop") and store.grant("Claude Code").tools == ("status",)
