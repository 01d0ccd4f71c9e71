"""pymilvus, imported on first use.

Importing it (with pandas, requests and its gRPC stubs) takes about half a second, which a
command answered from the kept copies of a KB and the in-process BM25 index never needs: a
one-shot `tacit ask` on an unchanged KB opens no Milvus client at all. Whatever talks to Milvus
calls pymilvus() first."""

from __future__ import annotations

from functools import cache
from types import ModuleType


@cache
def pymilvus() -> ModuleType:
    import pymilvus as module
    from pymilvus.client.utils import SciPyHelper

    # pymilvus checks for scipy on its first search by executing scipy.sparse afresh, which is
    # not thread-safe: two searches starting at once in the thread pool (the answerer retrieves
    # while it plans) saw a half-initialised module ("scipy.sparse._lil has no attribute
    # lil_array"). Do that check once, here, before any thread searches.
    SciPyHelper._init()
    loaded: ModuleType = module
    return loaded
