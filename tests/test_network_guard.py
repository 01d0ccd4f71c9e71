"""The guard itself: a connection outside loopback must fail the test that tries it."""

from __future__ import annotations

import socket

import pytest
from pytest_socket import SocketConnectBlockedError


def test_connecting_outside_loopback_is_blocked() -> None:
    # pytest-socket also warns with the blocked host: expected here, so caught, not reported.
    with (
        pytest.warns(UserWarning, match="192.0.2.1"),
        pytest.raises(SocketConnectBlockedError),
    ):
        socket.create_connection(("192.0.2.1", 80), timeout=1).close()


def test_loopback_is_allowed() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    try:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            pass
    finally:
        server.close()
