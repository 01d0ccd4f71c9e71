"""The Knowledge page's channels: each channel's binding (KB and mode) and its recent traffic,
and the form that binds a channel.

A binding is a run-time override of the channel in the state store, the record `/tacit mode`
changes too (ConversationState.bind_channel): the console and the chat read and write the same
one, over the `[conversation.channels]` settings, which stay what a channel starts from.
"""

from __future__ import annotations

import time
from html import escape
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from bot.audit import audit
from bot.console import home_kbs
from bot.console.auth import Session
from bot.console.context import Console
from bot.conversation_state import parse_channel_id
from core.kb import validate_kb_name

TRAFFIC_DAYS = 7
MOST_CHANNELS = 200  # rows one page shows (the channels of the KB shown first)
MODES = ("auto", "mention", "off")
TRAFFIC_OUTCOMES = ("answered", "declined", "silent")
TRAFFIC_EVERY_S = 10.0
_TRAFFIC = "channel_traffic"
KB_CHANGED = "tacit-kb-changed"  # the event that reloads the page's tables (HX-Trigger)


async def channel_rows(console: Console, kb: str) -> list[dict[str, Any]]:
    """Every channel the settings, the decision log or a run-time binding name, with its
    binding and its decisions of the last TRAFFIC_DAYS days; the channels of `kb` first."""
    facets = await console.state.log.facets()
    named = [
        *console.settings.conversation.channels,
        *await console.state.overridden_channels(),
        *facets["channels"],
    ]
    parsed: dict[str, tuple[str, str, str]] = {}
    for channel in dict.fromkeys(named):
        try:
            parsed[channel] = parse_channel_id(channel)
        except ValueError:
            continue  # a decision of a platform the console cannot bind (none today)
    configs = await console.state.channels(list(parsed.values()))
    days = await _traffic_days(console)
    # Each day's counters (`<channel>|<outcome>`) read once, not once per channel.
    counts: dict[str, dict[str, int]] = {}
    last_day: dict[str, str] = {}
    for day, counters in days:
        for field, n in counters.items():
            channel, sep, outcome = field.rpartition("|")
            if sep and channel in parsed:
                seen = counts.setdefault(channel, {})
                seen[outcome] = seen.get(outcome, 0) + n
                last_day[channel] = day
    rows: list[dict[str, Any]] = []
    settings = console.settings
    for channel, config in zip(parsed, configs, strict=True):
        seen = counts.get(channel, {})
        configured = settings.conversation.channels.get(channel)
        rows.append(
            {
                "channel": channel,
                "kb": config.kb,
                # what the channel answers from with no binding here: its setting, else the
                # default KB (the "as configured" choice; not the KB it is bound to now)
                "configured_kb": configured.kb if configured and configured.kb else settings.kb,
                "bound": config.bound,
                "mode": config.mode if config.enabled else "off",
                "traffic": {outcome: seen.get(outcome, 0) for outcome in TRAFFIC_OUTCOMES},
                "total": sum(seen.values()),
                "last_day": last_day.get(channel, ""),
            }
        )
    rows.sort(key=lambda r: (r["kb"] != kb, -r["total"], r["channel"]))
    return rows[:MOST_CHANNELS]


async def _traffic_days(console: Console) -> list[tuple[str, dict[str, int]]]:
    """The decision log's day counters of the last TRAFFIC_DAYS days, read at most every
    TRAFFIC_EVERY_S: traffic a few seconds old is recent enough, and the page is drawn
    without a read of today's counters each time (bindings are read fresh every time)."""
    kept = console.health_cache.get(_TRAFFIC)
    if kept is not None and time.monotonic() - kept[0] < TRAFFIC_EVERY_S:
        return list(kept[1])
    days = await console.state.log.days(TRAFFIC_DAYS)
    console.health_cache[_TRAFFIC] = (time.monotonic(), days)
    return days


def _error(message: str, status: int) -> HTMLResponse:
    # Escaped: the message may quote what the admin sent.
    return HTMLResponse(
        f'<p class="error" role="alert">{escape(message)}</p>',
        status_code=status,
        headers={"Cache-Control": "no-store"},
    )


async def channels_fragment(console: Console, request: Request, session: Session) -> Response:
    """The channels table alone: reloaded when a binding or a run changed it."""
    kb = _shown_kb(console, request.query_params.get("kb", ""))
    return console.render(
        request,
        session,
        "knowledge_channels.html.j2",
        kb=kb,
        channels=await channel_rows(console, kb),
        kbs=await home_kbs.kb_names(console, kb),
        modes=MODES,
        days=TRAFFIC_DAYS,
    )


def _shown_kb(console: Console, raw: str) -> str:
    try:
        return validate_kb_name(raw) if raw else console.settings.kb
    except ValueError:
        return console.settings.kb


async def bind(console: Console, request: Request, session: Session) -> Response:
    form = await console.form(request)
    values = {k: form.get(k) for k in ("channel", "kb", "mode")}
    channel, kb, mode = (v if isinstance(v, str) else "" for v in values.values())
    try:
        platform, workspace, name = parse_channel_id(channel)
    except ValueError as exc:
        return _error(str(exc), 400)
    if mode not in MODES:
        return _error("The mode is auto, mention or off.", 400)
    if kb:
        try:
            validate_kb_name(kb)
        except ValueError as exc:
            return _error(str(exc), 400)
        if kb not in [row.kb for row in await home_kbs.home_kbs(console, fresh=True)]:
            return _error(f"There is no knowledge base {kb}: create it first.", 404)
    config = await console.state.bind_channel(platform, workspace, name, kb=kb or None, mode=mode)
    home_kbs.forget(console)
    await audit(
        console.store,
        session.user,
        "bind",
        f"{channel.strip()} → {kb or f'(as configured: {config.kb})'}, mode {mode}",
    )
    shown = config.mode if config.enabled else "off"
    return HTMLResponse(
        f'<p class="ok" role="status" id="bind-result">{escape(channel.strip())} answers from '
        f"{escape(config.kb)}, mode {escape(shown)}.</p>",
        headers={"Cache-Control": "no-store", "HX-Trigger": KB_CHANGED},
    )
