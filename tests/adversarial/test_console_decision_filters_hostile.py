"""Hostile query strings for the console's decision list (/console/decisions): a listed filter
(action, stage, feedback, judged by) given a value not on its list filters nothing, is not
selected, and is not carried into the "older decisions" link; a value that needs escaping in a
URL (a channel with `&` or `#`) is carried whole."""

from __future__ import annotations

import html
import re
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from adapters.state.redis_store import RedisStateStore
from bot.conversation_state import ConversationState
from bot.settings import ConversationSettings
from core.decision import DEFERRED_SCORE
from tests.bot.console.test_auth import PROXY, app_for, client, store
from tests.bot.console.test_decisions import decision

__all__ = ["store"]  # the fixture, imported for this module's tests

USER = {"X-Forwarded-User": "ana@corp"}
ODD_CHANNEL = "a&judged=model#x"  # would split into two filters if not URL-encoded


async def seed(store: RedisStateStore, per_kind: int, channel: str = "C1") -> None:
    state = ConversationState(store, ConversationSettings(), default_kb="default")
    now = time.time()
    for n in range(per_kind):
        await state.record(
            decision(f"t-model-{n}", "r", {DEFERRED_SCORE: 1.0}, now - 99 + n, channel=channel)
        )
        await state.record(decision(f"t-rule-{n}", "r", {}, now - 99 + n + 0.5, channel=channel))


def traces(page: str) -> list[str]:
    return re.findall(r'href="/console/decisions/([^"]+)" class="open-decision"', page)


@pytest.mark.parametrize(
    "query",
    [
        "judged=MODEL",
        "judged=model%00",
        "judged=%20model",
        "judged=word%20rule",
        "judged=" + "m" * 5000,
        "judged=%3Cscript%3Ealert(1)%3C/script%3E",
        "judged=model%26outcome%3Danswered",
        "outcome=answered%27--&stage=nowhere&feedback=sideways",
    ],
)
async def test_an_unknown_listed_value_filters_nothing(
    store: RedisStateStore, tmp_path: Path, query: str
) -> None:
    await seed(store, 30)  # 60 decisions: more than a page, so the "older" link is drawn
    async with client(app_for(store, tmp_path, **PROXY), "10.0.0.7") as http:
        page = await http.get(f"/console/decisions?{query}", headers=USER)
    assert page.status_code == 200
    shown = traces(page.text)
    assert len(shown) == 50 and any(t.startswith("t-rule-") for t in shown)
    assert " selected>" not in page.text  # no select shows the hostile value as chosen
    older = re.search(r'hx-get="/console/decisions\?([^"]*)"', page.text)
    assert older is not None
    assert set(parse_qs(html.unescape(older.group(1)))) == {"before"}
    assert "<script>" not in page.text


async def test_a_channel_that_needs_escaping_is_kept_whole_through_paging(
    store: RedisStateStore, tmp_path: Path
) -> None:
    await seed(store, 30, channel=ODD_CHANNEL)
    channel = f"slack:T1:{ODD_CHANNEL}"
    async with client(app_for(store, tmp_path, **PROXY), "10.0.0.7") as http:
        first = await http.get("/console/decisions", params={"channel": channel}, headers=USER)
        older = re.search(r'hx-get="([^"]+)"', first.text)
        assert older is not None
        link = html.unescape(older.group(1))
        assert parse_qs(urlsplit(link).query)["channel"] == [channel]
        rest = await http.get(link, headers={**USER, "HX-Request": "true"})
    assert len(traces(first.text)) + len(traces(rest.text)) == 60
