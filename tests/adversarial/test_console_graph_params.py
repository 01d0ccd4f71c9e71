"""Hostile query strings for the console's graph data endpoint (/console/graph/data): paging
numbers out of range or not numbers, odd entity names and KB names. Each gets a bounded JSON
page or an empty one, never a server error or an unbounded read."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from starlette.applications import Starlette

from adapters.state.redis_store import RedisStateStore
from bot.console import console_mount
from bot.console.auth import ConsoleAuth
from bot.console.context import Console
from bot.console.jobs import Jobs
from bot.console.knowledge import GRAPH_EDGES, GRAPH_MAX, GRAPH_PAGE
from bot.conversation_state import ConversationState
from bot.gate_labels import GateLabels
from bot.settings import ConsoleSettings, Settings
from bot.wiring import build_graph
from tests.browser.synthetic_graph import HUB, write_hub_graph
from tests.browser.typed_graph import (
    CENTRE,
    HOSTILE_NAME,
    HOSTILE_RELATION,
    HOSTILE_TYPE,
    write_typed_graph,
)

NEIGHBOURS = 60
BASE = "http://console.test"


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    await write_hub_graph(tmp_path, "synthetic", NEIGHBOURS)
    store = await RedisStateStore.embedded(tmp_path / "state.rdb")
    settings = Settings(
        home=tmp_path, console=ConsoleSettings(admin_token=SecretStr("t-0123456789abcdef"))
    )
    graph = build_graph(settings)
    console = Console(
        settings=settings,
        store=store,
        state=ConversationState(store, settings.conversation, default_kb="default"),
        services=SimpleNamespace(graph=graph),  # type: ignore[arg-type]  # the graph is enough
        gate=None,
        reindex=None,
        auth=ConsoleAuth(store, settings.console),
        labels=GateLabels(store),
        jobs=Jobs(),
    )
    app = Starlette(routes=[console_mount(console)])
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))
    try:
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
            login = await client.post(
                "/console/login", data={"token": "t-0123456789abcdef"}, headers={"Origin": BASE}
            )
            assert login.status_code == 303
            yield client
    finally:
        await graph.aclose()
        await store.aclose()


async def _page(http: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    response = await http.get("/console/graph/data", params={"kb": "synthetic", **params})
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    assert len(data["nodes"]) <= GRAPH_MAX + 1 and len(data["edges"]) <= GRAPH_EDGES
    return data


@pytest.mark.parametrize(
    ("limit", "offset", "nodes"),
    [
        ("-5", "0", 2),  # at least one neighbour, and the hub
        ("0", "0", 2),
        ("abc", "0", 1 + min(GRAPH_PAGE, NEIGHBOURS)),  # not a number: the default page
        ("99999999999999999999", "0", 1 + NEIGHBOURS),  # capped at GRAPH_MAX
        ("10", "-3", 11),  # a negative offset is the first page
        ("10", "1e9", 11),  # not an integer: the first page
        ("10", "999999999", 0),  # past the end: nothing
        ("10", "55", 5),  # the last five neighbours, without the hub
    ],
)
async def test_paging_numbers_are_bounded(
    http: httpx.AsyncClient, limit: str, offset: str, nodes: int
) -> None:
    data = await _page(http, entity=HUB, limit=limit, offset=offset)
    assert len(data["nodes"]) == nodes
    assert data["total"] == NEIGHBOURS


@pytest.mark.parametrize(
    "entity",
    [
        "",
        " ",
        "x" * 60_000,  # cut to 200 characters before any lookup
        "hub'; DROP TABLE entities; --",
        "hub\x00",
        "\u202ehub",  # a right-to-left override
        "HUB",  # entities match case-folded: this one is the hub
        "../../etc/passwd",
        "%",
        "node 0001\nnode 0002",
    ],
)
async def test_odd_entity_names_get_a_page_or_nothing(http: httpx.AsyncClient, entity: str) -> None:
    data = await _page(http, entity=entity)
    if entity == "HUB":
        assert data["root"] == HUB and len(data["nodes"]) == 1 + NEIGHBOURS
    else:
        assert data["nodes"] == [] and data["next"] is None
    # The graph is still all there.
    assert len((await _page(http, entity=HUB))["nodes"]) == 1 + NEIGHBOURS


@pytest.mark.parametrize("kb", ["../synthetic", "nope", "", "a" * 500, "synthetic\x00"])
async def test_odd_kb_names_fall_back_or_find_nothing(http: httpx.AsyncClient, kb: str) -> None:
    response = await http.get("/console/graph/data", params={"kb": kb, "entity": HUB})
    assert response.status_code == 200
    assert response.json()["nodes"] == []  # the default KB (empty here) or an unknown one


async def test_hostile_names_types_and_relation_names_come_back_as_json_strings(
    http: httpx.AsyncClient, tmp_path: Path
) -> None:
    """Names, types and relation names are the documents' and a model's words: the data
    endpoint returns them as they are, as JSON strings (the page draws them as text), and the
    edge rows gain the relation's name, "" where the extractor gave none."""
    await write_typed_graph(tmp_path, "typed")
    response = await http.get(
        "/console/graph/data", params={"kb": "typed", "entity": CENTRE, "limit": "100"}
    )
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    data = response.json()
    hostile = next(n for n in data["nodes"] if n[1] == HOSTILE_NAME)
    assert hostile[2] == HOSTILE_TYPE
    names = {(a, b): name for a, b, _, name in data["edges"]}
    assert names[tuple(sorted((CENTRE, hostile[0])))] == HOSTILE_RELATION
    assert names[("deploy pipeline", "release notes")] == ""
    assert names[("deploy pipeline", "priya natarajan")] == "owns"
    # The relation's evidence is HTML, escaped.
    detail = await http.get(
        "/console/graph/detail", params={"kb": "typed", "source": CENTRE, "target": hostile[0]}
    )
    assert detail.status_code == 200
    assert HOSTILE_RELATION not in detail.text and HOSTILE_NAME not in detail.text
    assert "&lt;img src=x onerror=" in detail.text
