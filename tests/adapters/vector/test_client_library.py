"""adapters/vector/client_library.py: pymilvus is prepared once, whichever threads ask first."""

from __future__ import annotations

import threading
import time

import pytest
from pymilvus.client.utils import SciPyHelper

from adapters.vector import client_library


def test_threads_asking_at_once_prepare_pymilvus_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def slow_init() -> None:  # the scipy check that must not run twice at once
        calls.append(threading.current_thread().name)
        time.sleep(0.2)

    monkeypatch.setattr(SciPyHelper, "_init", staticmethod(slow_init))
    monkeypatch.setattr(client_library, "_loaded", None)
    threads = [threading.Thread(target=client_library.pymilvus) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert client_library.pymilvus().__name__ == "pymilvus"
