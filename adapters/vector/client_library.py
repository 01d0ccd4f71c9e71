"""pymilvus, imported on first use.

Importing it (with pandas, requests and its gRPC stubs) takes about half a second, which a
command answered from the kept copies of a KB and the in-process BM25 index never needs: a
one-shot `tacit ask` on an unchanged KB opens no Milvus client at all. Whatever talks to Milvus
calls pymilvus() first, often from a worker thread (the client is synchronous)."""

from __future__ import annotations

import threading
from types import ModuleType

_loaded: ModuleType | None = None
_loading = threading.Lock()


def pymilvus() -> ModuleType:
    global _loaded
    if _loaded is not None:
        return _loaded
    with _loading:  # one thread imports and prepares it; the others wait for that
        if _loaded is None:
            import pymilvus as module
            from pymilvus.client.utils import SciPyHelper

            # pymilvus checks for scipy on its first search by executing scipy.sparse afresh,
            # which is not thread-safe: two searches starting at once in the thread pool (the
            # answerer retrieves while it plans) saw a half-initialised module
            # ("scipy.sparse._lil has no attribute lil_array"). Do that check once, here,
            # before any thread searches.
            SciPyHelper._init()
            _loaded = module
        return _loaded
