"""Errors Tacit raises on purpose. Each carries a message fit to show a user as-is."""

from __future__ import annotations


class TacitError(Exception):
    """Base of every error Tacit means to report to a user (no traceback needed)."""

    hint: str | None = None

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint


class ConfigError(TacitError):
    """A setting is missing or invalid."""


class InputError(TacitError):
    """The user's input cannot be used (an empty question, an unknown path…)."""


class LLMError(TacitError):
    """The LLM endpoint failed after retries."""


class LLMTimeout(LLMError):
    """The LLM endpoint did not answer in time."""


class LLMBadResponse(LLMError):
    """The LLM answered, but not with what was asked (invalid JSON after repair, …)."""


class StoreError(TacitError):
    """A graph, vector or state store failed."""


class StoreUnavailable(StoreError):
    """A store cannot be reached or opened (down, locked by another process, …)."""


class QueueFull(StoreError):
    """The event queue holds its most entries: this one was not stored (the sender retries
    later; nothing already queued is dropped to make room)."""


class EmbedderError(TacitError):
    """The embedder failed."""
