"""The SQLite graph store's schema: its migrations, applied in order by SQLiteGraphStore.

Kept apart from the store so the queries and the table definitions each stay readable.
"""

from __future__ import annotations

SCHEMA_VERSION = 1

# Migration i takes a file from schema version i to i + 1; they run in order, each statement in
# one transaction with the version bump. Append new ones; never edit a released one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE documents (
            kb TEXT NOT NULL,
            source TEXT NOT NULL,
            title TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            chunk_count INTEGER NOT NULL,
            metadata TEXT NOT NULL,  -- a JSON object
            indexed_at REAL NOT NULL,  -- unix time of the put
            PRIMARY KEY (kb, source)
        ) WITHOUT ROWID""",
        # A rowid table: chunk texts are large, which WITHOUT ROWID tables handle badly.
        """CREATE TABLE chunks (
            kb TEXT NOT NULL,
            id TEXT NOT NULL,
            source TEXT NOT NULL,
            ordinal INTEGER NOT NULL,
            text TEXT NOT NULL,
            heading TEXT NOT NULL,
            tokens INTEGER NOT NULL,
            PRIMARY KEY (kb, id),
            FOREIGN KEY (kb, source) REFERENCES documents (kb, source)
        )""",
        "CREATE INDEX chunks_by_source ON chunks (kb, source, ordinal)",
        """CREATE TABLE entities (
            kb TEXT NOT NULL,
            key TEXT NOT NULL,  -- normalise_name(name): what mentions merge on
            name TEXT NOT NULL,  -- the first-seen display name
            type TEXT NOT NULL,
            community INTEGER,
            PRIMARY KEY (kb, key)
        ) WITHOUT ROWID""",
        # `id` orders descriptions first-seen first, and (unlike a bare rowid) survives VACUUM.
        """CREATE TABLE entity_descriptions (
            id INTEGER PRIMARY KEY,
            kb TEXT NOT NULL,
            entity_key TEXT NOT NULL,
            chunk_id TEXT NOT NULL,
            description TEXT NOT NULL,  -- empty: the chunk only names it (a relation endpoint)
            UNIQUE (kb, entity_key, chunk_id, description),
            FOREIGN KEY (kb, entity_key) REFERENCES entities (kb, key),
            FOREIGN KEY (kb, chunk_id) REFERENCES chunks (kb, id)
        )""",
        # Covering: deleting a document finds what its chunks touched without reading rows.
        "CREATE INDEX entity_descriptions_by_chunk"
        " ON entity_descriptions (kb, chunk_id, entity_key)",
        # Keywords are not kept here: they are merged from the descriptions when read, so they
        # can never disagree with what survives a deletion.
        """CREATE TABLE relations (
            kb TEXT NOT NULL,
            src_key TEXT NOT NULL,
            tgt_key TEXT NOT NULL,
            PRIMARY KEY (kb, src_key, tgt_key),
            CHECK (src_key < tgt_key),
            FOREIGN KEY (kb, src_key) REFERENCES entities (kb, key),
            FOREIGN KEY (kb, tgt_key) REFERENCES entities (kb, key)
        ) WITHOUT ROWID""",
        "CREATE INDEX relations_by_target ON relations (kb, tgt_key, src_key)",
        """CREATE TABLE relation_descriptions (
            id INTEGER PRIMARY KEY,
            kb TEXT NOT NULL,
            src_key TEXT NOT NULL,
            tgt_key TEXT NOT NULL,
            chunk_id TEXT NOT NULL,
            keywords TEXT NOT NULL,
            description TEXT NOT NULL,
            UNIQUE (kb, src_key, tgt_key, chunk_id, description),
            FOREIGN KEY (kb, src_key, tgt_key) REFERENCES relations (kb, src_key, tgt_key),
            FOREIGN KEY (kb, chunk_id) REFERENCES chunks (kb, id)
        )""",
        "CREATE INDEX relation_descriptions_by_chunk"
        " ON relation_descriptions (kb, chunk_id, src_key, tgt_key)",
    ),
)
assert len(MIGRATIONS) == SCHEMA_VERSION
