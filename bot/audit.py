"""The audit log of admin actions: who did what, when — from the console (index, remove,
label, refit, bindings, sources, exports, logins; failed logins in a list of their own, so a
flood of them never pushes out what admins did), from the chat (`/tacit label`) and from the
HTTP API (`POST /v1/labels`), kept in the state store as capped lists.

Any admin action calls `audit(store, actor, action, detail)`; the console's Audit page shows
the newest.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

from core.errors import StoreError
from core.ports import StateStore

_log = logging.getLogger("tacit.console")

AUDIT_KEY = "console:audit"
# The newest actions kept: an admin's history over months of normal use, a bounded list.
AUDIT_KEPT = 10_000
# Failed logins, which anyone who reaches the login form writes (the throttle counts per
# address, and addresses are cheap: an IPv6 prefix, many hosts), in a list of their own: a
# flood of them pushes out older failed logins, never the admins' actions.
FAILED_KEY = "console:audit:failed"
FAILED_ACTION = "login failed"
FAILED_KEPT = 2_000
DETAIL_CHARS = 500


@dataclass(frozen=True, slots=True)
class AuditEntry:
    at: float
    actor: str
    action: str
    detail: str


async def audit(store: StateStore, actor: str, action: str, detail: str = "") -> None:
    """Record one admin action. A store that fails costs the record, not the action: it is
    logged instead."""
    entry = {
        "at": time.time(),
        "actor": actor[:200],
        "action": action[:100],
        "detail": detail[:DETAIL_CHARS],
    }
    key, kept = (FAILED_KEY, FAILED_KEPT) if action == FAILED_ACTION else (AUDIT_KEY, AUDIT_KEPT)
    try:
        await store.push(key, json.dumps(entry, ensure_ascii=False), max_len=kept)
    except StoreError as exc:
        _log.warning("console audit: could not record %s by %s: %s", action, actor, exc)


async def recent(store: StateStore, count: int) -> list[AuditEntry]:
    """The newest `count` actions, failed logins among them, newest first."""
    rows = []
    for key in (AUDIT_KEY, FAILED_KEY):
        for raw in reversed(await store.recent(key, count)):
            data = json.loads(raw)
            rows.append(
                AuditEntry(
                    float(data["at"]), str(data["actor"]), str(data["action"]), str(data["detail"])
                )
            )
    rows.sort(key=lambda row: -row.at)
    return rows[:count]
