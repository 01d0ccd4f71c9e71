"""The knowledge bases of the home, for the console: what `tacit kb list` lists (the graph
store's KBs and the settings' KBs, bot/knowledge_bases.py), the KBs created in the console
before anything was indexed into them, and the KBs channels are bound to at run time.

A KB exists in the graph store once it holds something; one created in the console is empty
until then, so its name is kept in the state store (`console:{kbs}:created`) and listed
beside the home's. Counting the home's KBs reads every chunk's length (SQLite), so the rows
are kept (recounted in the background past ROWS_EVERY_S) and dropped when a run of the
console changes a KB.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

from bot.console.context import Console, logger
from bot.conversation_state import parse_channel_id
from bot.knowledge_bases import KbRow, kb_rows
from core.kb import validate_kb_name

ROWS_EVERY_S = 10.0
CREATED_KEY = "console:{kbs}:created"
CREATED_KEPT = 1000
_CACHE = "home_kbs"


async def created_kbs(console: Console) -> list[str]:
    names = await console.store.recent(CREATED_KEY, CREATED_KEPT)
    kept = []
    for name in dict.fromkeys(names):
        try:
            kept.append(validate_kb_name(name))
        except ValueError:  # not written by create_kb: never shown, never used as a KB
            continue
    return kept


async def create_kb(console: Console, name: str) -> bool:
    """Keep a new KB's name (already validated); False when the home already has that KB."""
    if any(row.kb == name for row in await home_kbs(console, fresh=True)):
        return False
    await console.store.push(CREATED_KEY, name, max_len=CREATED_KEPT)
    forget(console)
    return True


def forget(console: Console) -> None:
    """Drop the kept rows: the next page counts again (a run ended, a KB was created)."""
    console.health_cache.pop(_CACHE, None)


async def home_kbs(console: Console, *, fresh: bool = False) -> list[KbRow]:
    """Every KB of the home with its counts, the default first, then by name; each with the
    channels bound to it, in the settings or at run time (the console).

    Rows older than ROWS_EVERY_S are shown while they are counted again in the background
    (counting reads every chunk of the home); rows dropped by forget(), after a run of the
    console, or asked `fresh` are counted while the caller waits."""
    kept = console.health_cache.get(_CACHE)
    if kept is None or fresh:
        return list(await _count(console))
    if time.monotonic() - kept[0] >= ROWS_EVERY_S:
        counting: dict[str, asyncio.Task[Any]] = console.health_cache.setdefault("counting", {})
        task = counting.get(_CACHE)  # cancelled with the overview's at close
        if task is None or task.done():
            counting[_CACHE] = asyncio.create_task(_count(console), name="console-home-kbs")
    return list(kept[1])


async def _count(console: Console) -> list[KbRow]:
    rows = await kb_rows(console.settings, console.services.graph)
    known = {row.kb for row in rows}
    for name in await created_kbs(console):
        if name not in known:
            rows.append(KbRow(name, 0, 0, None, 0))
            known.add(name)
    overridden, bound = await _bound_at_run_time(console)
    for name in sorted(set(bound) - known):
        rows.append(KbRow(name, 0, 0, None, 0))
    # A channel with run-time overrides is wherever they (or the settings under them) bind it.
    rows = [
        replace(
            row,
            channels=sorted({*(set(row.channels) - overridden), *bound.get(row.kb, [])}),
        )
        for row in rows
    ]
    rows.sort(key=lambda row: (row.kb != console.settings.kb, row.kb))
    console.health_cache[_CACHE] = (time.monotonic(), rows)
    return rows


async def _bound_at_run_time(console: Console) -> tuple[set[str], dict[str, list[str]]]:
    """The channels with run-time overrides, and KB → those of them bound to it."""
    overridden = await console.state.overridden_channels()
    parsed: dict[str, tuple[str, str, str]] = {}
    for channel in overridden:
        try:
            parsed[channel] = parse_channel_id(channel)
        except ValueError:
            continue
    found: dict[str, list[str]] = {}
    configs = await console.state.channels(list(parsed.values()))
    for channel, config in zip(parsed, configs, strict=True):
        if config.bound:
            found.setdefault(config.kb, []).append(channel)
    return set(overridden), found


async def picker_kbs(console: Console, logged: list[str]) -> list[str]:
    """Every page's KB picker and list: the home's KBs (those the Knowledge page lists, one
    created there included), then those only the configuration or the decision log names. One
    list for every page, so a KB created on the Knowledge page can be picked on the Gate,
    Labels, "To document" and Decisions pages too."""
    try:
        names = [row.kb for row in await home_kbs(console)]
    except Exception:  # a graph store down must not take the Gate or Labels page with it
        logger.warning("console: the home's KBs could not be listed", exc_info=True)
        names = []
    return names + [name for name in console.kbs(logged) if name not in names]


async def last_indexed(console: Console) -> dict[str, float]:
    """Each KB's latest document time, as the Knowledge page shows it ({} when the graph
    store cannot say): the overview's "last indexed" for a KB the CLI or a sync indexed, which
    no console run recorded."""
    try:
        rows = await home_kbs(console)
    except Exception:  # a graph store down must not take the overview with it
        logger.warning("console: the home's KBs could not be listed", exc_info=True)
        return {}
    return {row.kb: row.last_indexed for row in rows if row.last_indexed is not None}


async def kb_names(console: Console, current: str = "") -> list[str]:
    """The names for a KB picker: the home's KBs, and the one shown even when it is none of
    them (a page opened on a KB nothing holds yet must not show another's name)."""
    names = [row.kb for row in await home_kbs(console)]
    if current and current not in names:
        names.append(current)
    return names
