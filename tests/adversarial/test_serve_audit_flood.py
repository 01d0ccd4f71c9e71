"""The console's audit log against a flood of failed logins, on a real `tacit serve` behind a
trusted proxy: the throttle counts failures per client address, and an attacker with many
addresses (an IPv6 prefix, many hosts) is many clients. Their failed logins are kept apart, so
that however many there are they never push the admins' actions out of the log."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import httpx
import pytest
import redis

from tests.adversarial.serve_support import Serving, console_client, tacit_serve

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

REDIS_DB = 13
ADDRESSES = 60  # each under the throttle's failures per client


@pytest.fixture(scope="module")
def prefix() -> Iterator[str]:
    name = f"tacit-audit-flood-{uuid.uuid4().hex[:8]}:"
    yield name
    client = redis.Redis(db=REDIS_DB)
    for key in client.scan_iter(match=f"{name}*"):
        client.delete(key)
    client.close()


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory, prefix: str) -> Iterator[Serving]:
    env = {
        "TACIT_STATE__URL": f"redis://127.0.0.1:6379/{REDIS_DB}",
        "TACIT_STATE__KEY_PREFIX": prefix,
        "TACIT_CONSOLE__TRUSTED_PROXIES": json.dumps(["127.0.0.1/32"]),
    }
    with tacit_serve(tmp_path_factory.mktemp("audit-flood"), env) as served:
        yield served


def test_failed_logins_from_many_addresses_never_push_out_admin_actions(
    serving: Serving, prefix: str
) -> None:
    client, headers = console_client(serving)
    try:
        made = client.post("/console/knowledge/create", data={"name": "audited"}, headers=headers)
        assert made.status_code == 201, made.text
    finally:
        client.close()
    with httpx.Client(base_url=serving.url, timeout=30) as anyone:
        for n in range(ADDRESSES):
            address = f"2001:db8::{n:x}"
            for _ in range(3):
                refused = anyone.post(
                    "/console/login",
                    data={"token": "guess"},
                    headers={"Origin": serving.origin, "X-Forwarded-For": address},
                )
                assert refused.status_code == 401
    store = redis.Redis(db=REDIS_DB, decode_responses=True)
    try:
        actions = [
            json.loads(raw)["action"] for raw in store.lrange(f"{prefix}console:audit", 0, -1)
        ]
    finally:
        store.close()
    # the admins' list holds their actions only: a flood cannot make it shed them
    assert "login failed" not in actions
    assert "create kb" in actions
    # and the failed logins are still shown on the Audit page
    client, _ = console_client(serving)
    try:
        page = client.get("/console/audit").text
    finally:
        client.close()
    assert "2001:db8::3b" in page and "create kb" in page
