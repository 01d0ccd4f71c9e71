"""The VectorStore port on Milvus: one code path for a Milvus Lite file and a Milvus server.

`MilvusClient("<home>/milvus.db")` runs Milvus Lite in this process (a gRPC server on 127.0.0.1
over a data directory); `MilvusClient(uri="http://host:19530", token=...)` talks to a server.
Everything below is the same for both, except where a comment says "Lite".

Layout: one collection per kind of record (`<prefix>chunks`, `<prefix>entities`,
`<prefix>relations`), every knowledge base in the same collections, told apart by the scalar
field `kb` (the partition key: a server hashes KBs into partitions and searches only the one
holding the KB; filters on JSON fields are far too slow in Lite, so everything filtered on is a
plain VARCHAR).

Fields of a row:
- `pk`: primary key, the SHA-256 of (kb, record id). Hashing scopes ids to their KB (the same
  chunk id in two KBs must not overwrite each other), fits any id into a fixed 64 bytes, and
  leaves nothing to escape when deleting by id.
- `id`: the record's own id, verbatim (hits return it; any length up to 64 KiB).
- `kb`, `source` (the document, for deletion by document), `text` (truncated to 64 KiB of UTF-8
  on a character boundary: a server counts VARCHAR lengths in bytes; Lite counts characters,
  so bytes are the limit that holds for both), `vector` (FLOAT_VECTOR, cosine).
- chunks only, when Milvus runs BM25 (a server; see `lexical`): `text` runs through an
  analyzer into `sparse` by Milvus's BM25 function. With a Lite file, BM25 runs in this process
  (adapters/vector/bm25_index.py) and the collection has no `sparse` field.

The client is synchronous: every call runs in a worker thread (asyncio.to_thread).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
import numpy as np

from adapters.vector.analysis import DEFAULT_ANALYZER
from adapters.vector.bm25_index import BM25Indexes, analyse_texts
from adapters.vector.client_library import pymilvus
from adapters.vector.lite import close_lite, open_lite
from core.errors import ConfigError, StoreError, StoreUnavailable
from core.models import COLLECTIONS, Collection, VectorHit, VectorRecord
from core.ports import Vectors
from core.redact import redact_url

if TYPE_CHECKING:
    from pymilvus import MilvusClient

T = TypeVar("T")

# VARCHAR limits (bytes on a server). 65,535 is Milvus's largest max_length.
PK_BYTES = 64
KB_BYTES = 255
ID_BYTES = 65_535
SOURCE_BYTES = 65_535
TEXT_BYTES = 65_535

# Milvus refuses a top-k above 16,384.
MAX_LIMIT = 16_384

# Collections whose text is BM25-indexed. Only chunks are searched lexically (the retriever's
# BM25 list, core/retrieve/retriever.py); extending this list later needs new collections, so
# it is a decision, not a default.
LEXICAL_COLLECTIONS: tuple[Collection, ...] = ("chunks",)

# Build and search parameters of the index types this adapter knows.
_INDEX_BUILD: dict[str, dict[str, Any]] = {
    "HNSW": {"M": 16, "efConstruction": 200},
    "AUTOINDEX": {},
    "FLAT": {},
    "IVF_FLAT": {"nlist": 1024},
}

# One upsert request carries at most this many rows and roughly this many bytes: far below a
# server's gRPC message limit (64 MiB by default) even when every text is 64 KiB.
UPSERT_BATCH_ROWS = 1000
UPSERT_BATCH_BYTES = 16 * 1024 * 1024
# Deleting by id sends the primary keys in the request; keep each request moderate.
DELETE_BATCH_IDS = 1000
# fetch_vectors reads this many rows per page (a page of 512-d vectors is ~2 MB on the wire).
FETCH_PAGE_ROWS = 1000
# Lite: a collection is flushed once this many rows were written to it since its last flush.
# Lite's flush turns every unflushed row into Python objects before writing it out (a 512-d
# vector becomes 512 Python floats, ~20 KB a row): flushing a whole indexing run's rows at its
# end doubles the run's peak memory. 4,096 rows bound a flush to ~80 MB.
LITE_FLUSH_ROWS = 4096

_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,200}\Z")  # \Z: $ passes a final newline

_OUTPUT_FIELDS = ["id", "text", "source"]
_REQUIRED_FIELDS = {"pk", "kb", "id", "source", "text", "vector"}


def is_lite_uri(uri: str) -> bool:
    """pymilvus's own rule: a URI ending in `.db` is a Milvus Lite data directory."""
    return uri.endswith(".db")


def record_pk(kb: str, record_id: str) -> str:
    """The primary key of a record: unique per (kb, id), 64 hex characters."""
    # JSON of the pair is injective, whatever characters kb and id contain.
    payload = json.dumps([kb, record_id], ensure_ascii=False).encode("utf-8", "surrogatepass")
    return hashlib.sha256(payload).hexdigest()


def truncate_utf8(text: str, max_bytes: int) -> str:
    """`text` cut to at most `max_bytes` of UTF-8, never inside a character.

    Lone surrogates (text decoded badly upstream) become '?': Milvus accepts valid UTF-8 only.
    """
    data = text.encode("utf-8", "replace")
    if len(data) <= max_bytes:
        return data.decode("utf-8")
    # Cutting bytes can split the last character; decoding with "ignore" drops that fragment.
    return data[:max_bytes].decode("utf-8", "ignore")


def quote(value: str) -> str:
    """`value` as a double-quoted string literal of a Milvus filter expression.

    Milvus Lite 3.2 has no filter templating (`filter_params` fails to parse), so values are
    escaped. Both parsers accept these escapes; neither accepts a raw line break in a literal.
    Every other character (quotes of the other kind, control characters, any Unicode) is
    taken as it is.
    """
    escaped = (
        value.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
    )
    return f'"{escaped}"'


# -- the store --------------------------------------------------------------------------------


class MilvusVectorStore:
    """VectorStore on Milvus Lite (a `.db` path) or a Milvus server (an http(s) URI).

    index_type: "FLAT" (default for Lite), "AUTOINDEX" (default for a server: Milvus picks and
    tunes the index), "HNSW" or "IVF_FLAT". Chosen when a collection is created; collections
    that exist keep theirs. Lite defaults to exact search because its HNSW buys nothing there:
    Lite's own per-search overhead dominates, so an HNSW search is no faster than an exact one
    at a KB's size (bench/bench_lite_index.py), and building HNSW when Lite flushes an indexing
    run's rows raises the indexer's peak memory.
    analyzer: the BM25 analyzer of chunk text (DEFAULT_ANALYZER: jieba, for zh+en).
    lexical: where BM25 runs. "memory": an in-process bm25s index per KB, kept in step with
    upsert and delete and persisted in `lexical_path` (default `<uri>.bm25/<prefix>`) — the
    default for a Lite file, whose own BM25 costs more per search than a whole retrieval
    should (one process owns a Lite file, so nobody else writes behind the index's back).
    "milvus": Milvus's BM25 function over the analysed text field — the default for a server,
    which other processes write to too. "auto" picks by the URI. A Lite collection made for
    "milvus" works with "memory" (its index is then built from the stored texts), and the
    reverse is a StoreError at the first lexical search.
    consistency_level: "Strong" gives read-your-writes: a search right after an upsert (the
    CLI indexing then answering, the tests, the bot learning a document mid-conversation) sees
    it. On a server that costs waiting for the latest timestamp (milliseconds); "Bounded" would
    save that and may miss writes of the last second or so. Lite is always consistent.
    hnsw_ef: HNSW's search breadth (at least the limit). On 10k random 512-d vectors, Lite's
    recall@10 is 0.55 / 0.70 / 0.87 at ef 64 / 128 / 256 for +0.3 ms; recall@1 is 1.0 from 128.
    """

    def __init__(
        self,
        uri: str,
        token: str = "",
        collection_prefix: str = "tacit_",
        *,
        index_type: str | None = None,
        analyzer: Mapping[str, Any] | None = None,
        consistency_level: str = "Strong",
        hnsw_ef: int = 128,
        timeout: float = 10.0,
        lexical: str = "auto",
        lexical_path: str | Path | None = None,
    ) -> None:
        if not _PREFIX.match(collection_prefix):
            raise ConfigError(
                f"vector collection prefix {collection_prefix!r} must be letters, digits and _, "
                "not starting with a digit"
            )
        self._lite = is_lite_uri(uri)
        self._uri = os.path.abspath(os.path.expanduser(uri)) if self._lite else uri
        self._token = token
        self._prefix = collection_prefix
        self._index_type = (index_type or ("FLAT" if self._lite else "AUTOINDEX")).upper()
        if self._index_type not in _INDEX_BUILD:
            raise ConfigError(
                f"unknown vector index type {index_type!r}: use one of {', '.join(_INDEX_BUILD)}"
            )
        self._analyzer = dict(analyzer) if analyzer is not None else dict(DEFAULT_ANALYZER)
        self._consistency = consistency_level
        self._hnsw_ef = hnsw_ef
        self._timeout = timeout
        self._client: MilvusClient | None = None
        self._open_lock = asyncio.Lock()
        self._ensure_lock = asyncio.Lock()
        # Collections known to exist (and loaded), by name. Missing ones are not remembered:
        # on a server, another process (the indexer) may create them at any time.
        self._dims: dict[str, int] = {}
        self._inspect_locks: dict[str, asyncio.Lock] = {}
        self._dirty: set[str] = set()  # Lite: collections written since their last flush
        self._unflushed: dict[str, int] = {}  # Lite: rows written since a collection's flush
        # Held while a flush runs: a read must not search a collection mid-flush, when Lite
        # can show the rows being moved into sealed segments in neither place.
        self._flush_lock = asyncio.Lock()
        self._closed = False
        if lexical not in ("auto", "memory", "milvus"):
            raise ConfigError(f"unknown lexical search {lexical!r}: use auto, memory or milvus")
        in_memory = lexical == "memory" or (lexical == "auto" and self._lite)
        self._bm25: BM25Indexes | None = None
        if in_memory:
            root = lexical_path or (f"{self._uri}.bm25/{collection_prefix}" if self._lite else None)
            if root is None:
                raise ConfigError("lexical search in memory on a server needs lexical_path")
            self._bm25 = BM25Indexes(root, self._chunk_texts)

    @property
    def uri(self) -> str:
        return self._uri

    @property
    def is_lite(self) -> bool:
        return self._lite

    @property
    def index_type(self) -> str:
        return self._index_type

    @property
    def lexical_in_memory(self) -> bool:
        return self._bm25 is not None

    def collection_name(self, collection: Collection) -> str:
        if collection not in COLLECTIONS:
            raise ValueError(f"unknown collection {collection!r}")
        return f"{self._prefix}{collection}"

    # -- the port -----------------------------------------------------------------------------

    async def ensure(self, dim: int) -> None:
        """Create missing collections (with their indexes) and load them."""
        if dim <= 0:
            raise ValueError(f"vector dimension must be positive, got {dim}")
        client = await self._connect()
        async with self._ensure_lock:  # two creators of one collection: the second fails
            for collection in COLLECTIONS:
                name = self.collection_name(collection)
                existing = await self._call(f"check collection {name}", self._inspect, client, name)
                if existing is None:
                    self._check_analyzer_available(collection)
                    await self._call(
                        f"create collection {name}", self._create, client, collection, dim
                    )
                    # Read back: on a server another process may have created it first.
                    existing = await self._call(
                        f"check collection {name}", self._inspect, client, name
                    )
                if existing == dim:
                    self._dims[name] = dim
                else:
                    raise StoreError(
                        f"The vector collection {name} at {self._display_uri()} holds "
                        f"{existing}-dimensional vectors, but the embedder makes {dim}-dimensional "
                        "ones (the embedder changed since these documents were indexed). "
                        "Re-index into a fresh data home, or drop the vector collections "
                        "and index again."
                    )

    async def upsert(
        self, collection: Collection, kb: str, records: Sequence[VectorRecord]
    ) -> None:
        if not records:
            return
        name = self.collection_name(collection)
        dim = await self._dim(name)
        if dim is None:
            raise StoreError(
                f"The vector collection {name} does not exist: call ensure(dim) before upserting."
            )
        self._check_kb(kb)
        # Milvus rejects (or arbitrarily resolves) one primary key twice in a request: the last
        # record with an id wins, as a sequence of single upserts would have it.
        latest: dict[str, VectorRecord] = {}
        for record in records:
            latest.pop(record.id, None)
            latest[record.id] = record
        unique = list(latest.values())
        matrix = self._as_matrix([r.vector for r in unique], dim, what="record vectors")
        rows: list[dict[str, Any]] = []
        for record, vector in zip(unique, matrix, strict=True):
            rows.append(
                {
                    "pk": record_pk(kb, record.id),
                    "kb": kb,
                    "id": self._bounded(record.id, ID_BYTES, "record id"),
                    "source": self._bounded(record.source, SOURCE_BYTES, "record source"),
                    "text": truncate_utf8(record.text, TEXT_BYTES),
                    "vector": vector,
                }
            )
        client = await self._connect()
        lexical = self._bm25 if collection in LEXICAL_COLLECTIONS else None
        if lexical is None:
            for batch in _batches(rows, dim):
                await self._call(f"upsert into {name}", client.upsert, name, batch)
        else:
            # The index is marked stale on disk first; the text is cut while Milvus writes.
            await lexical.prepare_change(kb)
            stored = [VectorRecord(r["id"], (), r["text"], r["source"]) for r in rows]

            async def write() -> None:
                for batch in _batches(rows, dim):
                    await self._call(f"upsert into {name}", client.upsert, name, batch)

            _, terms = await asyncio.gather(write(), analyse_texts([r.text for r in stored]))
            await lexical.put(kb, stored, terms)
        if self._lite:
            # Flushed on the next read, or here once LITE_FLUSH_ROWS rows wait: a bounded
            # flush keeps an indexing run's memory flat (and costs no more CPU than one flush
            # of everything at the end).
            self._dirty.add(name)
            self._unflushed[name] = self._unflushed.get(name, 0) + len(rows)
            if self._unflushed[name] >= LITE_FLUSH_ROWS:
                async with self._flush_lock:
                    if name in self._dirty:
                        await self._flush(client, name)

    async def search(
        self, collection: Collection, kb: str, vectors: Vectors, *, limit: int = 10
    ) -> list[list[VectorHit]]:
        name = self.collection_name(collection)
        queries = np.asarray(vectors, dtype=np.float32)
        if queries.ndim == 1:
            queries = queries.reshape(1, -1)
        if queries.shape[0] == 0:
            return []
        dim = await self._dim(name)
        if dim is None or limit <= 0:
            return [[] for _ in range(queries.shape[0])]
        queries = self._as_matrix(list(queries), dim, what="query vectors")
        client = await self._prepare_read(name)
        limit = min(limit, MAX_LIMIT)
        params: dict[str, Any] = {"metric_type": "COSINE"}
        if self._index_type == "HNSW":
            params["params"] = {"ef": max(self._hnsw_ef, limit)}  # HNSW needs ef >= k
        elif self._index_type == "IVF_FLAT":
            params["params"] = {"nprobe": 32}
        raw = await self._call(
            f"search {name}",
            client.search,
            name,
            data=list(queries),
            filter=f"kb == {quote(kb)}",
            limit=limit,
            output_fields=_OUTPUT_FIELDS,
            search_params=params,
            anns_field="vector",
        )
        # COSINE distances from Milvus are similarities already (1 = same direction); float32
        # rounding can step just outside [-1, 1].
        return [_hits(per_query, _clamp_cosine) for per_query in raw]

    async def delete(
        self,
        collection: Collection,
        kb: str,
        *,
        ids: Sequence[str] | None = None,
        source: str | None = None,
    ) -> None:
        name = self.collection_name(collection)
        if ids is not None and not ids:
            return  # an empty id list deletes nothing (not the whole KB)
        if await self._dim(name) is None:
            return
        client = await self._connect()
        lexical = self._bm25 if collection in LEXICAL_COLLECTIONS else None
        if lexical is not None:
            await lexical.prepare_change(kb)
        await self._delete(client, name, kb, ids, source)
        if lexical is not None:
            await lexical.remove(kb, ids, source)
        if self._lite:
            self._dirty.add(name)

    async def _delete(
        self,
        client: MilvusClient,
        name: str,
        kb: str,
        ids: Sequence[str] | None,
        source: str | None,
    ) -> None:
        if ids is not None and source is None:
            pks = sorted({record_pk(kb, i) for i in ids})
            for start in range(0, len(pks), DELETE_BATCH_IDS):
                chunk = pks[start : start + DELETE_BATCH_IDS]
                await self._call(f"delete from {name}", client.delete, name, ids=chunk)
        else:
            where = [f"kb == {quote(kb)}"]
            if source is not None:
                where.append(f"source == {quote(source)}")
            if ids is None:
                await self._call(
                    f"delete from {name}", client.delete, name, filter=" and ".join(where)
                )
            else:  # by id, within one document
                pks = sorted({record_pk(kb, i) for i in ids})
                for start in range(0, len(pks), DELETE_BATCH_IDS):
                    listed = ", ".join(quote(pk) for pk in pks[start : start + DELETE_BATCH_IDS])
                    expr = " and ".join([*where, f"pk in [{listed}]"])
                    await self._call(f"delete from {name}", client.delete, name, filter=expr)

    async def count(self, collection: Collection, kb: str) -> int:
        name = self.collection_name(collection)
        if await self._dim(name) is None:
            return 0
        client = await self._prepare_read(name)
        if self._lite:
            return await self._call(f"count {name}", self._lite_count, client, name, kb)
        rows = await self._call(
            f"count {name}",
            client.query,
            name,
            filter=f"kb == {quote(kb)}",
            output_fields=["count(*)"],
        )
        return int(rows[0]["count(*)"]) if rows else 0

    @staticmethod
    def _lite_count(client: MilvusClient, name: str, kb: str) -> int:
        """Sync: a KB's rows in a Lite collection, without reading them all at once.

        Lite answers a filtered count(*) by turning every matching row, vector and all, into
        Python objects (seconds and hundreds of MB on a large KB). Its row count of the whole
        collection reads only the keys, so when no other KB has a row there (asked
        with a query that stops at the first) that is the answer; otherwise the KB's keys are
        counted page by page, which keeps memory bounded.
        """
        other = client.query(name, filter=f"kb != {quote(kb)}", limit=1, output_fields=["pk"])
        if not other:
            return int(client.get_collection_stats(name)["row_count"])
        iterator = client.query_iterator(
            name, batch_size=FETCH_PAGE_ROWS, filter=f"kb == {quote(kb)}", output_fields=["pk"]
        )
        count = 0
        try:
            while page := iterator.next():
                count += len(page)
        finally:
            iterator.close()
        return count

    async def fetch_vectors(
        self, collection: Collection, kb: str, *, limit: int | None = None
    ) -> list[VectorRecord]:
        name = self.collection_name(collection)
        if (limit is not None and limit <= 0) or await self._dim(name) is None:
            return []
        client = await self._prepare_read(name)
        return await self._call(
            f"read the vectors of {name}",
            self._read_pages,
            client,
            name,
            kb,
            limit,
            (*_OUTPUT_FIELDS, "vector"),
            _vector_record,
        )

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._bm25 is not None:
            await self._bm25.save()  # failures are logged: the next open rebuilds the index
        async with self._open_lock:
            client, self._client = self._client, None
        if client is None:
            return
        if self._lite:
            await asyncio.to_thread(close_lite, self._uri, client)
        else:
            await asyncio.to_thread(client.close)

    # -- beyond the port ----------------------------------------------------------------------

    async def server_version(self) -> str:
        """The server's version ("milvus_lite-…" for a Lite file); connects if need be."""
        client = await self._connect()
        return str(await self._call("report its version", client.get_server_version))

    async def lexical_search(
        self, collection: Collection, kb: str, queries: Sequence[str], *, limit: int = 10
    ) -> list[list[VectorHit]]:
        """BM25 over the analysed text, per query, best first; scores are positive BM25 scores.

        A query with no searchable term (empty, only punctuation) has no hits.
        """
        if collection not in LEXICAL_COLLECTIONS:
            raise StoreError(
                f"Lexical search covers {', '.join(LEXICAL_COLLECTIONS)}, not {collection}."
            )
        name = self.collection_name(collection)
        results: list[list[VectorHit]] = [[] for _ in queries]
        asked = [(i, q) for i, q in enumerate(queries) if q.strip()]
        if not asked or limit <= 0:
            return results
        # A saved in-process index answers without opening the store (a one-shot `tacit ask`
        # then never starts Milvus Lite); otherwise the collection must exist to search it.
        saved = self._bm25 is not None and await self._bm25.opened(kb)
        if not saved and await self._dim(name) is None:
            return results
        if self._bm25 is not None:
            found = await self._bm25.search(kb, [q for _, q in asked], limit=limit)
            for (i, _), hits in zip(asked, found, strict=True):
                results[i] = hits
            return results
        client = await self._prepare_read(name)
        raw = await self._call(
            f"lexical search {name}",
            client.search,
            name,
            data=[truncate_utf8(q, TEXT_BYTES) for _, q in asked],
            filter=f"kb == {quote(kb)}",
            limit=min(limit, MAX_LIMIT),
            output_fields=_OUTPUT_FIELDS,
            search_params={"metric_type": "BM25"},
            anns_field="sparse",
        )
        # A server reports BM25 scores (higher is better); Lite reports distances, the negated
        # score. BM25 scores are never negative, so the magnitude is the score either way.
        for (i, _), per_query in zip(asked, raw, strict=True):
            results[i] = [hit for hit in _hits(per_query, abs) if hit.score > 0]
        return results

    async def drop(self) -> None:
        """Drop this store's collections (every KB in them). ensure() creates them afresh."""
        client = await self._connect()
        async with self._ensure_lock:
            for collection in COLLECTIONS:
                name = self.collection_name(collection)
                await self._call(f"drop {name}", _drop_if_present, client, name)
                self._dims.pop(name, None)
                self._dirty.discard(name)
                self._unflushed.pop(name, None)
            if self._bm25 is not None:
                await self._bm25.clear()

    # -- internals ----------------------------------------------------------------------------

    def _display_uri(self) -> str:
        return redact_url(self._uri)

    async def _connect(self) -> MilvusClient:
        if self._closed:
            raise StoreError("The vector store is closed.")
        if self._client is not None:
            return self._client
        async with self._open_lock:
            if self._client is None:
                self._client = await asyncio.to_thread(self._open)
            return self._client

    def _open(self) -> MilvusClient:
        if self._lite:
            Path(self._uri).parent.mkdir(parents=True, exist_ok=True)
            return open_lite(self._uri, self._timeout)
        milvus = pymilvus()
        try:
            return milvus.MilvusClient(uri=self._uri, token=self._token, timeout=self._timeout)
        except milvus.MilvusException as exc:
            raise StoreUnavailable(
                f"Cannot reach the Milvus server at {self._display_uri()}: {exc.message}"
            ) from exc

    async def _call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a client call in a worker thread; Milvus's errors become Tacit's."""
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except (StoreError, ConfigError):
            raise
        except pymilvus().MilvusException as exc:
            unavailable = exc.code == 2 or "unavailable" in str(exc.message).lower()
            cls = StoreUnavailable if unavailable else StoreError
            raise cls(f"Milvus failed to {what} ({self._display_uri()}): {exc.message}") from exc
        except grpc.RpcError as exc:
            raise StoreUnavailable(
                f"Milvus failed to {what} ({self._display_uri()}): {exc}"
            ) from exc

    async def _dim(self, name: str) -> int | None:
        """The collection's dimension, or None when it does not exist. Loads it once."""
        if name in self._dims:
            return self._dims[name]
        # One inspection per collection at a time: a second load_collection racing the first
        # puts a Lite collection back into 'loading' under a search already under way.
        async with self._inspect_locks.setdefault(name, asyncio.Lock()):
            if name in self._dims:
                return self._dims[name]
            client = await self._connect()
            dim = await self._call(f"check collection {name}", self._inspect, client, name)
            if dim is not None:
                self._dims[name] = dim
            return dim

    def _inspect(self, client: MilvusClient, name: str) -> int | None:
        """Sync: the dimension of an existing collection (loading it), None if there is none."""
        if not client.has_collection(name):
            return None
        described = client.describe_collection(name)
        fields = {f["name"]: f for f in described.get("fields", [])}
        if not fields.keys() >= _REQUIRED_FIELDS:
            raise StoreError(
                f"The collection {name} at {self._display_uri()} was not made by Tacit (its "
                f"fields are {', '.join(sorted(fields))}). Use another vector collection "
                "prefix, or drop it."
            )
        dim = int(fields["vector"]["params"]["dim"])
        if not client.list_indexes(name):  # created, then interrupted before its indexes
            client.create_index(name, self._index_params(sparse="sparse" in fields), sync=False)
        # A collection is released after a restart (Lite) or a release (server): load it to
        # search it. Loading a loaded collection is a no-op.
        client.load_collection(name)
        if self._lite:
            # Lite replays its write-ahead log into the in-memory table, which every search
            # scans row by row in Python (slow past a few thousand rows); flushed rows get the
            # index.
            client.flush(name)
        return dim

    async def _chunk_texts(self, kb: str) -> list[tuple[str, str, str]]:
        """(id, source, text) of every chunk of a KB: what the in-process BM25 index is
        rebuilt from."""
        name = self.collection_name("chunks")
        if await self._dim(name) is None:
            return []
        client = await self._prepare_read(name)
        return await self._call(
            f"read the texts of {name}",
            self._read_pages,
            client,
            name,
            kb,
            None,
            _OUTPUT_FIELDS,
            _text_row,
        )

    @staticmethod
    def _read_pages(
        client: MilvusClient,
        name: str,
        kb: str,
        limit: int | None,
        fields: Sequence[str],
        convert: Callable[[dict[str, Any]], T],
    ) -> list[T]:
        """Sync: a KB's rows, page by page, each converted as its page arrives. A query
        iterator pages by primary key, so neither the 16,384-row cap of one query nor offset
        paging (which rescans every skipped row) limits how many are read. pymilvus hands a
        vector over as a list of Python floats (~16 KB for 512-d, 8x its float32 array): kept
        until the last page, a KB's entity and relation vectors took gigabytes at 10k chunks."""
        iterator = client.query_iterator(
            name,
            batch_size=FETCH_PAGE_ROWS,
            limit=-1 if limit is None else limit,
            filter=f"kb == {quote(kb)}",
            output_fields=list(fields),
        )
        rows: list[T] = []
        try:
            while page := iterator.next():
                rows.extend(convert(row) for row in page)
        finally:
            iterator.close()
        return rows

    def _check_analyzer_available(self, collection: Collection) -> None:
        tokenizer = self._analyzer.get("tokenizer")
        name = tokenizer.get("type") if isinstance(tokenizer, dict) else tokenizer
        cuts_here = self._bm25 is not None or (self._lite and name == "jieba")
        if (
            cuts_here
            and collection in LEXICAL_COLLECTIONS
            and importlib.util.find_spec("jieba") is None
        ):
            raise ConfigError(
                "Milvus Lite needs the `jieba` package to analyse chunk text for lexical "
                "search: pip install jieba"
            )

    def _create(self, client: MilvusClient, collection: Collection, dim: int) -> None:
        """Sync: create one collection with its indexes (AsyncMilvusClient cannot)."""
        name = self.collection_name(collection)
        lexical = collection in LEXICAL_COLLECTIONS and self._bm25 is None
        milvus = pymilvus()
        DataType = milvus.DataType
        schema = milvus.MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("pk", DataType.VARCHAR, is_primary=True, max_length=PK_BYTES)
        schema.add_field("kb", DataType.VARCHAR, max_length=KB_BYTES, is_partition_key=True)
        schema.add_field("id", DataType.VARCHAR, max_length=ID_BYTES)
        schema.add_field("source", DataType.VARCHAR, max_length=SOURCE_BYTES)
        if lexical:
            schema.add_field(
                "text",
                DataType.VARCHAR,
                max_length=TEXT_BYTES,
                enable_analyzer=True,
                analyzer_params=self._analyzer,
            )
            schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
            schema.add_function(
                milvus.Function(
                    name=f"{name}_bm25",
                    function_type=milvus.FunctionType.BM25,
                    input_field_names=["text"],
                    output_field_names=["sparse"],
                )
            )
        else:
            schema.add_field("text", DataType.VARCHAR, max_length=TEXT_BYTES)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
        try:
            client.create_collection(name, schema=schema, consistency_level=self._consistency)
        except milvus.MilvusException:
            # Another process may have created it meanwhile (a server); the caller reads back
            # what exists and checks it.
            if client.has_collection(name):
                return
            raise
        # sync=False: pymilvus would otherwise poll every index of the (empty) collection until
        # built, sleeping 0.5 s a time; loading waits for what it needs.
        client.create_index(name, self._index_params(sparse=lexical), sync=False)
        client.load_collection(name)

    def _index_params(self, *, sparse: bool) -> Any:
        index = pymilvus().MilvusClient.prepare_index_params()
        index.add_index(
            "vector",
            index_type=self._index_type,
            metric_type="COSINE",
            params=dict(_INDEX_BUILD[self._index_type]),
        )
        if sparse:
            index.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
        return index

    async def _prepare_read(self, name: str) -> MilvusClient:
        client = await self._connect()
        if name in self._dirty or self._flush_lock.locked():
            # Lite searches unflushed rows by a per-row Python scan; flushing once after a
            # burst of writes moves them into indexed segments (a server needs no flush).
            # Concurrent readers wait for that one flush rather than racing it.
            async with self._flush_lock:
                if name in self._dirty:
                    await self._flush(client, name)
        return client

    async def _flush(self, client: MilvusClient, name: str) -> None:
        self._dirty.discard(name)
        self._unflushed.pop(name, None)
        await self._call(f"flush {name}", client.flush, name)

    def _check_kb(self, kb: str) -> None:
        if not kb or len(kb.encode("utf-8", "replace")) > KB_BYTES:
            raise StoreError(f"A knowledge base name must be 1 to {KB_BYTES} bytes, got {kb!r}.")

    @staticmethod
    def _bounded(value: str, max_bytes: int, what: str) -> str:
        if len(value.encode("utf-8", "replace")) > max_bytes:
            raise StoreError(f"A {what} longer than {max_bytes} bytes cannot be stored.")
        return truncate_utf8(value, max_bytes)

    @staticmethod
    def _as_matrix(rows: Sequence[Any], dim: int, *, what: str) -> np.ndarray:
        try:
            matrix = np.asarray(rows, dtype=np.float32)
        except ValueError as exc:  # ragged rows
            raise StoreError(f"The {what} are not all {dim}-dimensional.") from exc
        if matrix.ndim != 2 or matrix.shape[1] != dim:
            raise StoreError(
                f"The {what} have shape {matrix.shape}; the collection holds {dim}-dimensional "
                "vectors."
            )
        if not np.isfinite(matrix).all():
            raise StoreError(f"The {what} contain NaN or infinite values.")
        return matrix


def _drop_if_present(client: MilvusClient, name: str) -> None:
    if client.has_collection(name):
        client.drop_collection(name)


def _clamp_cosine(similarity: float) -> float:
    return min(1.0, max(-1.0, similarity))


def _hits(raw: Sequence[Any], score: Callable[[float], float]) -> list[VectorHit]:
    hits = [
        VectorHit(
            id=str(hit["entity"]["id"]),
            score=float(score(hit["distance"])),
            text=str(hit["entity"]["text"]),
            source=str(hit["entity"]["source"]),
        )
        for hit in raw
    ]
    hits.sort(key=lambda h: h.score, reverse=True)  # stable: Milvus's order breaks ties
    return hits


def _batches(rows: list[dict[str, Any]], dim: int) -> list[list[dict[str, Any]]]:
    """Rows split into requests of at most UPSERT_BATCH_ROWS rows and ~UPSERT_BATCH_BYTES."""
    batches: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    size = 0
    for row in rows:
        row_size = dim * 4 + sum(len(row[f]) for f in ("pk", "kb", "id", "source", "text")) * 3
        if current and (len(current) >= UPSERT_BATCH_ROWS or size + row_size > UPSERT_BATCH_BYTES):
            batches.append(current)
            current, size = [], 0
        current.append(row)
        size += row_size
    if current:
        batches.append(current)
    return batches


def _vector_record(row: dict[str, Any]) -> VectorRecord:
    return VectorRecord(
        id=str(row["id"]),
        vector=np.asarray(row["vector"], dtype=np.float32),
        text=str(row["text"]),
        source=str(row["source"]),
    )


def _text_row(row: dict[str, Any]) -> tuple[str, str, str]:
    return str(row["id"]), str(row["source"]), str(row["text"])
