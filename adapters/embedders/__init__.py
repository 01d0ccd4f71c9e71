"""Embedders: USE multilingual in process (the default) or an OpenAI-compatible endpoint.

Exports resolve lazily: importing the USE embedder must not import the openai client (tens of
MB and a noticeable start-up), and vice versa.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from adapters.embedders.openai_compat import OpenAICompatibleEmbedder
    from adapters.embedders.use import USE_DIM, USE_NAME, USEEmbedder

_EXPORTS = {
    "OpenAICompatibleEmbedder": "adapters.embedders.openai_compat",
    "USEEmbedder": "adapters.embedders.use",
    "USE_DIM": "adapters.embedders.use",
    "USE_NAME": "adapters.embedders.use",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(module), name)


__all__ = ["USE_DIM", "USE_NAME", "OpenAICompatibleEmbedder", "USEEmbedder"]
