"""GraphStore adapters: SQLite (the embedded default); NebulaGraph joins here later."""

from adapters.graph.sqlite_store import SCHEMA_VERSION, SQLiteGraphStore

__all__ = ["SCHEMA_VERSION", "SQLiteGraphStore"]
