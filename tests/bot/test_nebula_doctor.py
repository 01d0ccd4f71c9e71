"""`tacit doctor` against a production configuration: NebulaGraph (the fake graphd), and a
Milvus server and a Redis server that cannot be reached (closed ports on 127.0.0.1)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot import doctor
from bot.settings import Settings
from tests.fakes.fake_graphd import FakeGraphd


@pytest.fixture
def graphd() -> Iterator[FakeGraphd]:
    with FakeGraphd() as server:
        yield server


@pytest.fixture(autouse=True)
def _no_tacit_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in list(os.environ):
        if key.startswith("TACIT_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)  # no stray tacit.toml


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def production(home: Path, graphd: FakeGraphd, **sections: Any) -> Settings:
    graph = {
        "kind": "nebula",
        "nebula_addresses": [graphd.address],
        "nebula_schema_timeout": 1.0,
        "nebula_timeout": 5.0,
    }
    graph.update(sections.pop("graph", {}))
    return Settings(home=home, kb="ops", graph=graph, **sections)


def declare_schema(graphd: FakeGraphd, *, edge_indexes: bool = True) -> None:
    graphd.spaces.add("tacit_ops")
    graphd.reply(r"SHOW TAGS$", ["Name"], [["doc"], ["chunk"], ["entity"]])
    graphd.reply(r"SHOW EDGES$", ["Name"], [["mentions"], ["related"], ["supports"]])
    tag_indexes = ["doc_by_source", "chunk_by_source", "entity_by_key", "entity_by_name"]
    graphd.reply(r"SHOW TAG INDEXES$", ["Index Name"], [[name] for name in tag_indexes])
    graphd.reply(r"SHOW EDGE INDEXES$", ["Index Name"], [["related_all"]] if edge_indexes else [])


async def test_a_healthy_nebula_reports_versions_and_schema(home: Path, graphd: FakeGraphd) -> None:
    declare_schema(graphd)
    graphd.reply(r"^LOOKUP ON `chunk` YIELD id\(vertex\) AS `v` \| YIELD count", ["n"], [[12]])
    detail = await doctor._graph(production(home, graphd))
    assert f"127.0.0.1:9779 {graphd.version} ONLINE" in detail
    assert "space tacit_ops has its schema" in detail
    assert "12 chunk(s)" in detail


async def test_a_kb_without_a_space_says_how_to_create_it(home: Path, graphd: FakeGraphd) -> None:
    (check,) = [c for c in await _checks(production(home, graphd)) if c.name == "graph store"]
    assert not check.ok
    assert "has no space tacit_ops" in check.detail
    assert "tacit index --kb ops" in check.fix
    assert graphd.spaces == set()  # the doctor looks; it creates nothing


async def test_a_partial_schema_is_named(home: Path, graphd: FakeGraphd) -> None:
    declare_schema(graphd, edge_indexes=False)
    (check,) = [c for c in await _checks(production(home, graphd)) if c.name == "graph store"]
    assert not check.ok
    assert "lacks edge index related_all" in check.detail
    assert "IF NOT EXISTS" in check.fix


async def test_a_wrong_nebula_password_names_the_setting(home: Path, graphd: FakeGraphd) -> None:
    settings = production(home, graphd, graph={"nebula_password": "wrong"})
    (check,) = [c for c in await _checks(settings) if c.name == "graph store"]
    assert not check.ok
    assert "rejected user 'root'" in check.detail
    assert "nebula_password" in check.fix


async def test_an_unreachable_nebula_milvus_and_redis_each_get_a_fix(home: Path) -> None:
    graph_port, milvus_port, redis_port = closed_port(), closed_port(), closed_port()
    settings = Settings(
        home=home,
        graph={"kind": "nebula", "nebula_addresses": [f"127.0.0.1:{graph_port}"],
               "nebula_timeout": 1.0},
        vector={"uri": f"http://127.0.0.1:{milvus_port}", "token": "root:Milvus", "timeout": 1.0},
        state={"url": f"redis://:s3cret@127.0.0.1:{redis_port}/0"},
    )  # fmt: skip
    checks = {c.name: c for c in await _checks(settings)}
    graph, vectors, state = checks["graph store"], checks["vector store"], checks["state store"]
    assert not graph.ok and f"127.0.0.1:{graph_port}" in graph.detail
    assert "nebula_addresses" in graph.fix
    assert not vectors.ok and f"127.0.0.1:{milvus_port}" in vectors.detail
    assert "Milvus server" in vectors.fix and "token" in vectors.fix
    assert not state.ok
    assert "rediss://" in state.fix and "cluster" in state.fix
    assert "s3cret" not in state.fix + state.detail  # the password never shows


async def _checks(settings: Settings) -> list[doctor.Check]:
    """The three store checks only (the embedder and LLM checks are tested elsewhere)."""
    results = []
    for name, probe, fix in (
        ("graph store", doctor._graph, doctor._graph_fix(settings)),
        ("vector store", doctor._vectors, doctor._vector_fix(settings)),
        ("state store", doctor._state, doctor._state_fix(settings)),
    ):
        results.extend(await doctor.run_probes(settings, [(name, probe, fix)]))
    return results


async def test_storage_hosts_missing_or_offline_are_named(home: Path, graphd: FakeGraphd) -> None:
    declare_schema(graphd)
    columns = ["Host", "Port", "Status", "Leader count", "Leader distribution",
               "Partition distribution", "Version"]  # fmt: skip
    graphd.reply(r"^SHOW HOSTS$", columns, [], times=1)
    graphd.reply(r"^SHOW HOSTS$", columns, [["storaged0", 9779, "OFFLINE", 0, "", "", "3.8.0"]])
    (missing,) = [c for c in await _checks(production(home, graphd)) if c.name == "graph store"]
    assert "no storaged host is registered" in missing.detail
    assert "ADD HOSTS" in missing.fix
    (offline,) = [c for c in await _checks(production(home, graphd)) if c.name == "graph store"]
    assert "storaged storaged0:9779 not ONLINE" in offline.detail
