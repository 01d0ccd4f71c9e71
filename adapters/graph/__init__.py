"""GraphStore adapters: SQLite (the embedded default); NebulaGraph joins here later."""

from adapters.graph.sqlite_schema import SCHEMA_VERSION
from adapters.graph.sqlite_store import SQLiteGraphStore

__all__ = ["SCHEMA_VERSION", "SQLiteGraphStore"]
