"""SharedCacheEngine: an engine whose tasks all read and write one KV cache."""

from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.engine.engine import EngineCore
from oxygen_ros.engine.request import LanguageRequest


class SharedCacheEngine(EngineCore):
    """The oxygen loop and the shared_kv baseline: one cache for actions and language."""

    def __init__(self, model, config, **kwargs):
        super().__init__(model, config, **kwargs)
        self.cache = self.new_cache(action_batch=len(self.robots))

    def cache_of(self, request: LanguageRequest) -> KVCache:
        return self.cache

    def pages_in_use(self) -> int:
        return self.cache.pool.used_pages

    def kv_peak_bytes(self) -> int:
        return self.cache.pool.peak_bytes + self.cache.actions.bytes

    def reset_peaks(self) -> None:
        self.cache.pool.reset_peak()
