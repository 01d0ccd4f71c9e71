"""The composition root: settings, wiring, CLI, the conversation loop, the server."""
