"""Baselines with the same model, weights, tasks and outputs as the OxyGen loop.

isolated: each task owns a private KV cache and prefills its own copy of the observation;
    the tasks run one after another and each language request is decoded alone to its end
    in the frame it arrived — how separate openpi-style servers would serve three tasks.
shared_kv: one prefill per frame shared by every task (cross-task KV sharing), but each
    request is still decoded alone to its end, one after another (no batching).
"""

from oxygen_ros.engine.engine import EngineCore
from oxygen_ros.engine.request import LanguageRequest, Status
from oxygen_ros.engine.shared_cache import SharedCacheEngine


class _SequentialLanguage(EngineCore):
    """Both baselines answer each request alone, start to end, in the frame it arrived."""

    def answer_alone(self, request: LanguageRequest, base, cache, frame_id, prefix) -> None:
        request.frame_id, request.prefix = frame_id, prefix
        self.attach(request, base, cache)
        if not self.feed(request, request.unfed, cache):
            raise RuntimeError(f"{self.mode}: KV pool exhausted; raise num_pages")
        self.decode_to_completion(request, cache)

    def decode_to_completion(self, request: LanguageRequest, cache) -> None:
        """Decode one request alone until it finishes."""
        while request.status is Status.RUNNING:
            if not cache.reserve(request.table, 1):
                raise RuntimeError(f"{self.mode}: KV pool exhausted while decoding request "
                                   f"{request.id}; raise num_pages")
            logits = self.model.decode([request.table], [request.next_token], cache)
            self.take_token(request, logits)


class SharedKVEngine(_SequentialLanguage, SharedCacheEngine):
    mode = "shared_kv"

    def run_frame(self, frame_id, observation, prefix, start, began):
        table = self.model.prefill(prefix, self.cache)
        if table is None:
            raise RuntimeError("shared_kv: KV pool cannot hold the observation prefix")
        try:   # the frame's prefix goes back even when the model raises
            chunk = self.emit_chunk(frame_id, observation,
                                    self.chunk_actions(table, self.cache, frame_id, observation,
                                                       began), start, began)
            while (request := self.scheduler.next_waiting()) is not None:
                self.answer_alone(request, table, self.cache, frame_id, prefix)
        finally:
            self.cache.free(table)
        return chunk


class IsolatedEngine(_SequentialLanguage):
    mode = "isolated"

    def __init__(self, model, config, **kwargs):
        super().__init__(model, config, **kwargs)
        self.caches = {"action": self.new_cache(action_batch=1),
                       "dialogue": self.new_cache(action_batch=0),
                       "memory": self.new_cache(action_batch=0)}

    def cache_of(self, request: LanguageRequest):
        return self.caches[request.kind]

    def run_frame(self, frame_id, observation, prefix, start, began):
        action_cache = self.caches["action"]
        table = self._own_prefill(prefix, action_cache, "action")
        try:   # each private prefix goes back even when the model raises
            chunk = self.emit_chunk(frame_id, observation,
                                    self.chunk_actions(table, action_cache, frame_id,
                                                       observation, began), start, began)
        finally:
            action_cache.free(table)
        while (request := self.scheduler.next_waiting()) is not None:
            cache = self.caches[request.kind]
            table = self._own_prefill(prefix, cache, request.kind)
            try:
                self.answer_alone(request, table, cache, frame_id, prefix)
            finally:
                cache.free(table)
        return chunk

    def _own_prefill(self, prefix, cache, owner):
        table = self.model.prefill(prefix, cache, owner=owner, reuse=False)
        if table is None:
            raise RuntimeError("isolated: KV pool cannot hold the observation prefix")
        return table

    def pages_in_use(self) -> int:
        return sum(c.pool.used_pages for c in self.caches.values())

    def kv_peak_bytes(self) -> int:
        """Each task's private cache peaks on its own; together they need the sum."""
        return sum(c.pool.peak_bytes + c.actions.bytes for c in self.caches.values())

    def reset_peaks(self) -> None:
        for cache in self.caches.values():
            cache.pool.reset_peak()
