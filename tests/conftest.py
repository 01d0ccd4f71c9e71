"""Shared fixtures and the network guard.

The guard (pytest-socket, configured in pyproject's addopts) lets tests connect only to the
loopback addresses and unix sockets: a unit test that reaches the network elsewhere fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fresh Tacit data home."""
    path = tmp_path / "home"
    path.mkdir()
    return path
