"""Vector stores: Milvus (a server, or Milvus Lite in a local data directory)."""

from adapters.vector.milvus_store import MilvusVectorStore

__all__ = ["MilvusVectorStore"]
