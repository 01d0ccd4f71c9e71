"""An in-memory graph behind the fake graphd, answering exactly the statements Tacit's NebulaGraph
store sends, so the GraphStore contract suite can run that store over the wire here.

It is not an nGQL engine. It recognises the store's statements — reads by their exact text
(every read's text is fixed; values come as parameters), writes by the shapes the builders
produce — and anything else is an error, so a statement the store starts sending without the
model knowing it fails loudly instead of reading as empty. Semantics modelled after
NebulaGraph 3.x: INSERT overwrites a vertex's tag unless IF NOT EXISTS; an edge is keyed by
(source, destination, rank); DELETE VERTEX ... WITH EDGE removes every edge touching it; MATCH
returns rows only for patterns that match (so a count of zero is no row).

Whether real NebulaGraph parses these statements and agrees on their meaning is what the
contract suite checks against a real server (TACIT_TEST_NEBULA_ADDRESS).
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from nebula3.common.ttypes import ErrorCode

from adapters.graph import nebula_statements as ngql
from tests.fakes.fake_graphd import Call, Result

Props = dict[str, Any]
EdgeKey = tuple[str, str, int]

_USE_PREFIX = re.compile(r"^\s*USE\s+`?\w+`?\s*;\s*", re.IGNORECASE)
_INSERT_VERTEX = re.compile(
    r"^INSERT VERTEX( IF NOT EXISTS)? `(\w+)`\(([^)]*)\) VALUES (.*)$", re.DOTALL
)
_INSERT_EDGE = re.compile(r"^INSERT EDGE IF NOT EXISTS `(\w+)`\(([^)]*)\) VALUES (.*)$", re.DOTALL)
_VERTEX_ROW = re.compile(r'"(\w+)":\(([^)]*)\)')
_EDGE_ROW = re.compile(r'"(\w+)"->"(\w+)"@(\d+):\(([^)]*)\)')
_DELETE_VERTEX = re.compile(r"^DELETE VERTEX (.*) WITH EDGE$")
_DELETE_EDGE = re.compile(r"^DELETE EDGE `(\w+)` (.*)$")
_SCHEMA = re.compile(r"^(CREATE (TAG|EDGE|TAG INDEX|EDGE INDEX) IF NOT EXISTS `(\w+)`)")


@dataclass
class Space:
    vertices: dict[str, dict[str, Props]] = field(default_factory=dict)  # tag -> vid -> props
    edges: dict[str, dict[EdgeKey, Props]] = field(default_factory=dict)  # type -> key -> props
    schema: dict[str, set[str]] = field(default_factory=dict)  # kind -> names

    def tag(self, name: str) -> dict[str, Props]:
        return self.vertices.setdefault(name, {})

    def edge(self, name: str) -> dict[EdgeKey, Props]:
        return self.edges.setdefault(name, {})


class GraphModel:
    """Answers a Call with a Result, or None when the statement is not a data statement."""

    def __init__(self) -> None:
        self._spaces: dict[str, Space] = {}
        self._lock = threading.Lock()
        self._reads: dict[str, Callable[[Space, dict[str, Any]], Result]] = {
            ngql.documents([]).text: self._documents,
            ngql.chunks([]).text: self._chunks,
            ngql.entities([]).text: self._entities,
            ngql.entity_mentions([]).text: self._entity_mentions,
            ngql.degrees([]).text: self._degrees,
            ngql.neighbours([], 1).text: self._neighbours,
            ngql.relations_among([]).text: self._relations_among,
            ngql.community_members([]).text: self._community_members,
            ngql.chunk_mentions([]).text: self._chunk_mentions,
            ngql.relation_supports([], []).text: self._relation_supports,
            ngql.entities_mentioned_by([]).text: self._entities_mentioned_by,
            ngql.relations_supported_by([]).text: self._relations_supported_by,
            ngql.entities_still_mentioned([]).text: self._entities_still_mentioned,
            ngql.entities_still_related([]).text: self._entities_still_related,
            ngql.chunks_of_source("").text: self._chunks_of_source,
            ngql.ALL_DOCUMENTS.text: self._all_documents,
            ngql.ALL_ENTITIES.text: self._all_entities,
            ngql.ALL_RELATION_SUPPORTS.text: self._all_relation_supports,
        }
        for tag in ngql.TAGS:
            self._reads[ngql.count_vertices(tag).text] = self._counter("vertex", tag)
        for edge in ngql.EDGES:
            self._reads[ngql.count_edges(edge).text] = self._counter("edge", edge)

    def __call__(self, call: Call) -> Result | None:
        statement = _USE_PREFIX.sub("", call.statement).strip()
        if not call.space or statement.upper().startswith(("SHOW SPACES", "SHOW HOSTS", "USE ")):
            return None  # outside a space: the fake graphd's own answers
        with self._lock:
            space = self._spaces.setdefault(call.space, Space())
            try:
                return self._answer(space, statement, call.parameters)
            except KeyError as exc:
                return Result(error_code=ErrorCode.E_SEMANTIC_ERROR, error_msg=f"unknown {exc}")

    def _answer(self, space: Space, statement: str, params: dict[str, Any]) -> Result:
        read = self._reads.get(statement)
        if read is not None:
            return read(space, params)
        if (schema := _SCHEMA.match(statement)) is not None:
            space.schema.setdefault(schema.group(2).lower(), set()).add(schema.group(3))
            return Result()
        if statement.startswith("FETCH PROP ON") or (
            statement.startswith("LOOKUP ON") and statement.endswith("| LIMIT 1")
        ):
            return Result()  # the store's schema probes: here the schema is visible at once
        if statement in _SHOW:
            names = sorted(space.schema.get(_SHOW[statement], set()))
            return Result(("Name",), [[n] for n in names])
        if (insert := _INSERT_VERTEX.match(statement)) is not None:
            guard, tag, columns, rows = insert.groups()
            names = _columns(columns)
            for vid, values in _VERTEX_ROW.findall(rows):
                props = dict(zip(names, _values(values, params), strict=True))
                if not (guard and vid in space.tag(tag)):
                    space.tag(tag)[vid] = props
            return Result()
        if (insert := _INSERT_EDGE.match(statement)) is not None:
            edge, columns, rows = insert.groups()
            names = _columns(columns)
            for src, dst, rank, values in _EDGE_ROW.findall(rows):
                props = dict(zip(names, _values(values, params), strict=True))
                space.edge(edge).setdefault((src, dst, int(rank)), props)
            return Result()
        if (delete := _DELETE_VERTEX.match(statement)) is not None:
            doomed = set(re.findall(r'"(\w+)"', delete.group(1)))
            for vertices in space.vertices.values():
                for vid in doomed & vertices.keys():
                    del vertices[vid]
            for edges in space.edges.values():
                for key in [k for k in edges if k[0] in doomed or k[1] in doomed]:
                    del edges[key]
            return Result()
        if (delete := _DELETE_EDGE.match(statement)) is not None:
            for src, dst, rank in re.findall(r'"(\w+)"->"(\w+)"@(\d+)', delete.group(2)):
                space.edge(delete.group(1)).pop((src, dst, int(rank)), None)
            return Result()
        return Result(
            error_code=ErrorCode.E_SYNTAX_ERROR, error_msg=f"the model does not know: {statement}"
        )

    # --- reads -------------------------------------------------------------------------------

    @staticmethod
    def _fetch(space: Space, tag: str, vids: Iterable[str], fields: tuple[str, ...]) -> Result:
        vertices = space.tag(tag)
        return Result(fields, [[vertices[v][f] for f in fields] for v in vids if v in vertices])

    def _documents(self, space: Space, params: dict[str, Any]) -> Result:
        return self._fetch(space, "doc", params["vids"], _DOC_FIELDS)

    def _chunks(self, space: Space, params: dict[str, Any]) -> Result:
        return self._fetch(space, "chunk", params["vids"], _CHUNK_FIELDS)

    def _entities(self, space: Space, params: dict[str, Any]) -> Result:
        return self._fetch(space, "entity", params["vids"], _ENTITY_FIELDS)

    def _all_documents(self, space: Space, params: dict[str, Any]) -> Result:
        return self._fetch(space, "doc", list(space.tag("doc")), _DOC_FIELDS)

    def _all_entities(self, space: Space, params: dict[str, Any]) -> Result:
        return self._fetch(space, "entity", list(space.tag("entity")), _ENTITY_FIELDS)

    def _chunks_of_source(self, space: Space, params: dict[str, Any]) -> Result:
        chunks = space.tag("chunk").values()
        rows = [[c["id"], c["ordinal"]] for c in chunks if c["source"] == params["source"]]
        return Result(("id", "ordinal"), rows)

    def _mentions(self, space: Space) -> Iterable[tuple[Props, Props, Props]]:
        """(chunk, entity, edge props) of every mentions edge between existing vertices."""
        chunks, entities = space.tag("chunk"), space.tag("entity")
        for (src, dst, _), props in space.edge("mentions").items():
            if src in chunks and dst in entities:
                yield chunks[src], entities[dst], props

    def _supports(self, space: Space) -> Iterable[tuple[str, str, Props, Props, Props]]:
        chunks, entities = space.tag("chunk"), space.tag("entity")
        for (src, dst, _), props in space.edge("supports").items():
            if src in chunks and dst in entities:
                yield src, dst, chunks[src], entities[dst], props

    def _related(self, space: Space) -> Iterable[tuple[str, str]]:
        entities = space.tag("entity")
        for src, dst, _ in space.edge("related"):
            if src in entities and dst in entities:
                yield src, dst

    def _entity_mentions(self, space: Space, params: dict[str, Any]) -> Result:
        wanted = {space.tag("entity")[v]["key"] for v in params["vids"] if v in space.tag("entity")}
        rows = [
            [e["key"], c["id"], m["description"], m["seq"]]
            for c, e, m in self._mentions(space)
            if e["key"] in wanted
        ]
        return Result(("key", "chunk_id", "description", "seq"), rows)

    def _degrees(self, space: Space, params: dict[str, Any]) -> Result:
        wanted, counts = set(params["vids"]), Counter[str]()
        for src, dst in self._related(space):
            counts.update(v for v in (src, dst) if v in wanted)
        entities = space.tag("entity")
        return Result(("key", "degree"), [[entities[v]["key"], n] for v, n in counts.items()])

    def _neighbours(self, space: Space, params: dict[str, Any]) -> Result:
        frontier, links = set(params["vids"]), Counter[str]()
        entities = space.tag("entity")
        for src, dst in self._related(space):
            if src in frontier:
                links[entities[dst]["key"]] += 1
            if dst in frontier:
                links[entities[src]["key"]] += 1
        ranked = sorted(links.items(), key=lambda item: (-item[1], item[0]))[: params["limit"]]
        return Result(("key", "links"), [list(item) for item in ranked])

    def _chunk_mentions(self, space: Space, params: dict[str, Any]) -> Result:
        chunks = space.tag("chunk")
        wanted = {chunks[v]["id"] for v in params["vids"] if v in chunks}
        rows = [
            [c["id"], e["key"], m["seq"]] for c, e, m in self._mentions(space) if c["id"] in wanted
        ]
        return Result(("chunk_id", "key", "seq"), rows)

    def _community_members(self, space: Space, params: dict[str, Any]) -> Result:
        wanted = set(params["communities"])
        rows = [[e["key"]] for e in space.tag("entity").values() if e["community"] in wanted]
        return Result(("key",), rows)

    def _relations_among(self, space: Space, params: dict[str, Any]) -> Result:
        wanted, entities = set(params["vids"]), space.tag("entity")
        rows = [
            [entities[s]["key"], entities[d]["key"]]
            for s, d in self._related(space)
            if s in wanted and d in wanted
        ]
        return Result(("src", "tgt"), rows)

    def _relation_supports(self, space: Space, params: dict[str, Any]) -> Result:
        vids, keys = set(params["vids"]), set(params["keys"])
        rows = [
            [e["key"], s["tgt_key"], c["id"], s["keywords"], s["description"], s["seq"]]
            for _, dst, c, e, s in self._supports(space)
            if dst in vids and s["tgt_key"] in keys
        ]
        return Result(("src", "tgt", "chunk_id", "keywords", "description", "seq"), rows)

    def _all_relation_supports(self, space: Space, params: dict[str, Any]) -> Result:
        rows = [[e["key"], s["tgt_key"], c["id"]] for _, _, c, e, s in self._supports(space)]
        return Result(("src", "tgt", "chunk_id"), rows)

    def _entities_mentioned_by(self, space: Space, params: dict[str, Any]) -> Result:
        wanted = {space.tag("chunk")[v]["id"] for v in params["vids"] if v in space.tag("chunk")}
        keys = {e["key"] for c, e, _ in self._mentions(space) if c["id"] in wanted}
        return Result(("key",), [[k] for k in sorted(keys)])

    def _relations_supported_by(self, space: Space, params: dict[str, Any]) -> Result:
        wanted = set(params["vids"])
        pairs = {
            (e["key"], s["tgt_key"]) for src, _, _, e, s in self._supports(space) if src in wanted
        }
        return Result(("src", "tgt"), [list(p) for p in sorted(pairs)])

    def _entities_still_mentioned(self, space: Space, params: dict[str, Any]) -> Result:
        entities = space.tag("entity")
        wanted = {entities[v]["key"] for v in params["vids"] if v in entities}
        keys = {e["key"] for _, e, _ in self._mentions(space) if e["key"] in wanted}
        return Result(("key",), [[k] for k in sorted(keys)])

    def _entities_still_related(self, space: Space, params: dict[str, Any]) -> Result:
        wanted, entities = set(params["vids"]), space.tag("entity")
        found = {v for s, d in self._related(space) for v in (s, d) if v in wanted}
        return Result(("key",), [[entities[v]["key"]] for v in sorted(found)])

    @staticmethod
    def _counter(kind: str, name: str) -> Callable[[Space, dict[str, Any]], Result]:
        def count(space: Space, params: dict[str, Any]) -> Result:
            n = len(space.tag(name)) if kind == "vertex" else len(space.edge(name))
            return Result(("n",), [[n]])

        return count


_SHOW = {
    "SHOW TAGS": "tag",
    "SHOW EDGES": "edge",
    "SHOW TAG INDEXES": "tag index",
    "SHOW EDGE INDEXES": "edge index",
}
_DOC_FIELDS = ("source", "title", "content_hash", "chunk_count", "metadata", "indexed_at")
_CHUNK_FIELDS = ("id", "source", "ordinal", "text", "heading", "tokens")
_ENTITY_FIELDS = ("key", "name", "type", "community")


def _columns(text: str) -> list[str]:
    return [c.strip().strip("`") for c in text.split(",")]


def _values(text: str, params: dict[str, Any]) -> list[Any]:
    """`$r0_1, $r0_2` -> the parameters' values; a literal here would be a bug in the store."""
    names = [v.strip() for v in text.split(",")]
    if not all(n.startswith("$") for n in names):
        raise KeyError(f"a literal value in an INSERT: {text}")
    return [params[n[1:]] for n in names]
