"""Milvus Lite: one in-process server per data directory, and the lock that keeps other
processes out of it (moved out of milvus_store.py, which uses these)."""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING

from adapters.vector.client_library import pymilvus
from core.errors import StoreUnavailable

if TYPE_CHECKING:
    from pymilvus import MilvusClient

# -- Milvus Lite: one server per data directory in this process -------------------------------

# Lite keeps no MVCC timestamps, so every query iterator (counting or reading a KB page by page)
# logs that it falls back to the client's clock: twice in `tacit demo`, on every `tacit ask`, with
# nothing for a user to do. Only that message is dropped, and only once this process runs Lite;
# pymilvus's other warnings and errors still reach the terminal.
_QUERY_ITERATOR_LOGGER = "pymilvus.client.iterator.query_iterator"
_NO_MVCC_TS = "failed to get mvccTs from milvus server"


def _not_lite_mvcc_fallback(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith(_NO_MVCC_TS)


def _quiet_lite_mvcc_fallback() -> None:
    logger = logging.getLogger(_QUERY_ITERATOR_LOGGER)
    if _not_lite_mvcc_fallback not in logger.filters:
        logger.addFilter(_not_lite_mvcc_fallback)


# pymilvus starts one in-process Lite server per path and keeps it until exit; that server holds
# the directory's lock. Counting our clients per path lets aclose() stop the server (releasing
# the lock for other processes) when the last store on that path closes.
_lite_clients: dict[str, int] = {}
_lite_guard = threading.Lock()


def _lite_lock_held_elsewhere(path: str) -> bool:
    """Whether another process holds Milvus Lite's advisory lock (flock on `<path>/LOCK`).

    Only meaningful when this process has no Lite server on `path`: flock locks belong to an open
    file description, so our own server's lock would also make this probe fail.
    """
    try:
        import fcntl
    except ImportError:  # Windows: no probe; the failure to open is reported as it comes
        return False
    lock_file = os.path.join(path, "LOCK")
    if not os.path.exists(lock_file):
        return False
    fd = os.open(lock_file, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _locked_error(path: str) -> StoreUnavailable:
    return StoreUnavailable(
        f"The vector store {path} is in use by another Tacit process (for example "
        "`tacit serve`). Milvus Lite lets one process open it at a time: index through the "
        "running service, or stop it and try again.",
        hint="or point vector.uri at a Milvus server, which any number of processes can share",
    )


def open_lite(path: str, timeout: float) -> MilvusClient:
    with _lite_guard:
        first = _lite_clients.get(path, 0) == 0
        if first and _lite_lock_held_elsewhere(path):
            # Checked before opening: pymilvus would log a traceback and raise a bare
            # "Open local milvus failed".
            raise _locked_error(path)
        _quiet_lite_mvcc_fallback()
        milvus = pymilvus()
        try:
            client: MilvusClient = milvus.MilvusClient(path, timeout=timeout)
        except milvus.MilvusException as exc:
            if first and _lite_lock_held_elsewhere(path):  # lost a race with another process
                raise _locked_error(path) from exc
            raise StoreUnavailable(
                f"Cannot open the Milvus Lite data directory {path}: {exc.message}. "
                "(Milvus Lite 3 keeps a directory there; a file of that name from an older "
                "version must be moved away and the documents indexed again.)"
            ) from exc
        _lite_clients[path] = _lite_clients.get(path, 0) + 1
        return client


def close_lite(path: str, client: MilvusClient) -> None:
    with _lite_guard:
        client.close()
        remaining = _lite_clients.get(path, 1) - 1
        if remaining > 0:
            _lite_clients[path] = remaining
            return
        _lite_clients.pop(path, None)
        from milvus_lite.server_manager import server_manager_instance

        # Stops the server and closes the database, which flushes it and releases the lock.
        server_manager_instance.release_server(path)
