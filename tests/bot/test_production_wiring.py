"""Settings of the production engines reach their adapters: NebulaGraph, a Milvus server
(exercised through Milvus Lite with the server's index and consistency settings) and Redis
over TLS or as a cluster."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import SSLConnection

from adapters.graph.nebula_store import NebulaGraphStore
from adapters.state.redis_store import RedisStateStore
from adapters.vector.milvus_store import MilvusVectorStore
from bot import wiring
from bot.settings import ConversationSettings, Settings, load_settings
from core.errors import ConfigError
from core.models import VectorRecord


@pytest.fixture(autouse=True)
def _no_tacit_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in list(os.environ):
        if key.startswith("TACIT_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)


async def test_graph_kind_nebula_builds_the_nebula_store(home: Path) -> None:
    settings = Settings(
        home=home,
        graph={"kind": "nebula", "nebula_addresses": ["graphd-1:9669", "graphd-2"],
               "nebula_space_prefix": "team_"},
    )  # fmt: skip
    graph = wiring.build_graph(settings)
    try:
        assert isinstance(graph, NebulaGraphStore)
        assert graph.space("ops") == "team_ops"
        assert "graphd-1:9669, graphd-2:9669" in repr(graph)  # connects lazily: nothing yet
    finally:
        await graph.aclose()
    assert not (home / "graph.sqlite").exists()


def test_nebula_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TACIT_GRAPH__KIND", "nebula")
    monkeypatch.setenv("TACIT_GRAPH__NEBULA_ADDRESSES", '["graphd:9669"]')
    monkeypatch.setenv("TACIT_GRAPH__NEBULA_PASSWORD", "s3cret")
    settings = load_settings()
    assert settings.graph.nebula_addresses == ["graphd:9669"]
    assert settings.graph.nebula_password.get_secret_value() == "s3cret"
    assert "s3cret" not in str(settings.masked())
    monkeypatch.setenv("TACIT_GRAPH__NEBULA_SPACE_PREFIX", "bad-prefix")
    with pytest.raises(ConfigError, match=r"graph\.nebula_space_prefix"):
        load_settings()


async def test_milvus_server_settings_reach_the_store(home: Path) -> None:
    settings = Settings(
        home=home,
        vector={"uri": str(home / "lite.db"), "index_type": "AUTOINDEX",
                "consistency_level": "Bounded", "timeout": 3.0},
    )  # fmt: skip
    vectors = wiring.build_vectors(settings)
    try:
        assert isinstance(vectors, MilvusVectorStore)
        assert vectors.index_type == "AUTOINDEX"
        # The server's index type and a bounded consistency work end to end (here on Lite).
        await vectors.ensure(4)
        row = np.array([1, 0, 0, 0], dtype=np.float32)
        await vectors.upsert("chunks", "kb", [VectorRecord("a", row, "text", "a.md")])
        (hits,) = await vectors.search("chunks", "kb", row[None, :])
        assert [h.id for h in hits] == ["a"]
        assert (await vectors.server_version()).startswith("milvus_lite")
    finally:
        await vectors.aclose()
    assert MilvusVectorStore("http://127.0.0.1:19530").index_type == "AUTOINDEX"


async def test_redis_tls_and_cluster_urls_reach_the_client(home: Path) -> None:
    settings = Settings(home=home, state={"url": "rediss://:pw@redis.example.com:6380/0"})
    state = await wiring.build_state(settings)
    try:
        assert isinstance(state, RedisStateStore)
        pool = state.client.connection_pool  # nothing connects until the first command
        assert pool.connection_class is SSLConnection
    finally:
        await state.aclose()
    settings = Settings(home=home, state={"url": "redis://:pw@node-1:7000/0", "cluster": True})
    state = await wiring.build_state(settings)
    try:
        assert isinstance(state.client, RedisCluster)
    finally:
        await state.aclose()


@pytest.mark.parametrize("build", ["queue", "log"])
def test_the_queue_and_the_decision_log_name_the_store_they_need(build: str) -> None:
    class OtherStore:  # a StateStore of another kind than build_state makes
        pass

    with pytest.raises(TypeError, match="needs the Redis state store, not OtherStore"):
        if build == "queue":
            wiring.build_event_queue(OtherStore())  # type: ignore[arg-type]
        else:
            wiring.build_decision_log(OtherStore(), ConversationSettings())  # type: ignore[arg-type]
