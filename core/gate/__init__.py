"""The intent-and-refusal gate: whether Tacit answers a chat message, and why."""
