"""The shared vocabulary: actions, geometry, events, proposals, errors, settings and paths — pure data and rules,
imported by every layer; imports nothing of the app outside `app.domain`, no Qt, and nothing that opens sockets,
databases or processes (that lives in app.link, app.agent, app.desktop)."""
