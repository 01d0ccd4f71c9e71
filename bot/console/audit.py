"""The audit log of the console's admin actions: who did what, when (index, remove, label,
refit, bindings, logins — failed ones too), kept in the state store as one capped list.

Any console action calls `audit(store, actor, action, detail)`; the Audit page shows the newest.
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
# The newest actions kept: an admin's history over months of normal use, a bounded list
# (a flood of failed logins pushes out the oldest, never grows the store).
AUDIT_KEPT = 10_000
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
    try:
        await store.push(AUDIT_KEY, json.dumps(entry, ensure_ascii=False), max_len=AUDIT_KEPT)
    except StoreError as exc:
        _log.warning("console audit: could not record %s by %s: %s", action, actor, exc)


async def recent(store: StateStore, count: int) -> list[AuditEntry]:
    """The newest `count` actions, newest first."""
    rows = []
    for raw in reversed(await store.recent(AUDIT_KEY, count)):
        data = json.loads(raw)
        rows.append(
            AuditEntry(
                float(data["at"]), str(data["actor"]), str(data["action"]), str(data["detail"])
            )
        )
    return rows
