"""What a host is told when the person has not allowed it (the store itself is app.link.consent, shared with
the app's consent dialog and Settings page)."""

from __future__ import annotations

import json

from app.link.consent import ConsentStore, Grant

__all__ = ["ConsentStore", "Grant", "not_allowed_message"]


def not_allowed_message(host: str, tool: str, grant: Grant | None, why: str = "") -> str:
    """`why`: what happened to the question in the app ("" when none was asked)."""
    quoted = json.dumps(host, ensure_ascii=False)
    if grant is not None and grant.denied:
        return (f"The person at this computer denied “{host}” the use of Deskhand, so nothing was done (and no "
                f"screenshot taken). Only they can change that: in Deskhand's Settings → Other agents (withdraw the "
                f"answer, and the next call asks again) or with `deskhand mcp allow {quoted}`.")
    if grant is not None and grant.damaged:
        return (f"Deskhand's record of the person's answer for “{host}” is damaged, so it counts as no consent and "
                f"nothing was done. {why + ' ' if why else ''}Ask the person at this computer to run "
                f"`deskhand mcp allow {quoted}` (or `deskhand mcp forget {quoted}`, and the next call asks again).")
    if grant is not None:
        return (f"“{host}” may use {', '.join(grant.tools) or 'no tool'} but not {tool}. Ask the person at this "
                f"computer to withdraw the answer in Deskhand's Settings → Other agents (the next call asks again) "
                f"or to run `deskhand mcp allow {quoted} --tools {','.join((*grant.tools, tool))}`.")
    lead = (f"The person at this computer has not allowed “{host}” to use Deskhand yet, so nothing was done (and "
            "no screenshot taken).")
    if why:
        lead += f" {why}"
    return (f"{lead} Call {tool} again to be asked in Deskhand's window, or ask them to run "
            f"`deskhand mcp allow {quoted}` (all tools) or `deskhand mcp allow {quoted} --tools {tool}`.")
