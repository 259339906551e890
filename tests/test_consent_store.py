"""The hosts file the consent dialog and `deskhand mcp allow` both write (app/link/consent.py): real files."""

from __future__ import annotations

import stat

from app.link.consent import FILE_NAME, ConsentStore


def test_a_write_leaves_another_writer_s_unfinished_file_alone_and_stays_private(tmp_path):
    other = tmp_path / "mcp-hosts.tmp"  # the name every writer used: another process halfway through its write
    other.write_text('{"hosts": {"Claude Desktop": {"tools": ["st')
    store = ConsentStore(tmp_path)
    store.allow("Cursor", ("status", "stop"))
    assert other.read_text() == '{"hosts": {"Claude Desktop": {"tools": ["st'  # not taken over, not moved
    assert store.grant("Cursor").tools == ("status", "stop")
    assert stat.S_IMODE((tmp_path / FILE_NAME).stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILE_NAME, "mcp-hosts.tmp"]  # none of its own left
