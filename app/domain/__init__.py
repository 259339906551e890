"""The shared vocabulary: actions, geometry, events, proposals, errors, settings and paths — pure data and rules,
imported by every layer; imports nothing of the app outside `app.domain`, and no Qt."""
