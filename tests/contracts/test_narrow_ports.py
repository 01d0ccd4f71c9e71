"""The parts of a port that consumers name are satisfied by every adapter of the port.

A part (the retriever's GraphReader, the indexer's DocumentStore and GraphDescriptions, the
vector cache's DocumentListing, the NearestSearch the gate and the retriever share) repeats the
signatures of the port methods it needs. mypy checks the port against each part where
bot/wiring.py hands a store over; this checks the adapters themselves, and the port, member by
member: present, as a coroutine, with the parameters (names, kinds, defaults) the part declares.
"""

from __future__ import annotations

import inspect
from typing import Any, Protocol

import pytest

from adapters.graph.nebula_store import NebulaGraphStore
from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.vector.milvus_store import MilvusVectorStore
from core.index.document_store import DocumentStore, GraphDescriptions
from core.ports import GraphStore, NearestSearch, VectorStore
from core.retrieve.graph_reader import GraphReader
from core.vector_cache import DocumentListing, VectorCache

GRAPH_ADAPTERS = (SQLiteGraphStore, NebulaGraphStore)

# (part, the port it is a part of, what implements it)
PARTS: list[tuple[type[Any], type[Any], tuple[type[Any], ...]]] = [
    (GraphReader, GraphStore, GRAPH_ADAPTERS),
    (GraphDescriptions, GraphStore, GRAPH_ADAPTERS),
    (DocumentStore, GraphStore, GRAPH_ADAPTERS),
    (DocumentListing, GraphStore, GRAPH_ADAPTERS),
    (NearestSearch, VectorStore, (MilvusVectorStore, VectorCache)),
]

CASES = [
    pytest.param(part, port, implementation, id=f"{part.__name__}-{implementation.__name__}")
    for part, port, implementations in PARTS
    for implementation in (port, *implementations)
]


def members(protocol: type[Any]) -> list[str]:
    """The methods a protocol declares, its base protocols' included."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls is not Protocol and getattr(cls, "_is_protocol", False):
            names.update(n for n, v in vars(cls).items() if inspect.isfunction(v))
    return sorted(n for n in names if not n.startswith("_"))


def parameters(method: Any) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(method).parameters.values()]


def test_the_parts_are_narrower_than_their_ports() -> None:
    assert members(GraphReader) == [
        "chunk_entities",
        "community_members",
        "get_chunks",
        "neighbourhood",
    ]
    assert set(members(DocumentStore)) >= set(members(GraphDescriptions))
    assert not set(members(DocumentStore)) & {"get_chunks", "chunk_entities", "aclose"}
    assert members(NearestSearch) == ["search"]
    assert members(DocumentListing) == ["get_documents"]


@pytest.mark.parametrize(("part", "port", "implementation"), CASES)
def test_every_member_of_the_part_is_there_as_declared(
    part: type[Any], port: type[Any], implementation: type[Any]
) -> None:
    for name in members(part):
        declared = getattr(part, name)
        found = getattr(implementation, name, None)
        assert found is not None, f"{implementation.__name__} has no {name}"
        assert inspect.iscoroutinefunction(found), f"{implementation.__name__}.{name}"
        assert parameters(found) == parameters(declared), f"{implementation.__name__}.{name}"
    if implementation is not port:
        assert issubclass(implementation, part)  # runtime_checkable: by member names
