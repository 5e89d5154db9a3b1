"""OxygenEngine: the OxyGen loop. Per control frame: prefill the newest observation once
(reusing cached pages), run the action expert over it and emit the chunk at once; then, in
what is left of the frame's budget, attach new language requests to this frame's prefix by
reference and advance every running request — whatever frame it started on — by up to k
tokens in batched decode steps. Language is throttled or preempted; actions never wait."""

import math

import numpy as np

from oxygen_ros.cache.page_table import PageTable
from oxygen_ros.engine.engine import EngineCore
from oxygen_ros.engine.request import LanguageRequest, Status
from oxygen_ros.model.prefix import Prefix, build_prefix


class OxygenEngine(EngineCore):
    mode = "oxygen"

    def __init__(self, model, config, calibrate: bool = True, **kwargs):
        super().__init__(model, config, **kwargs)
        self.cache = self.new_cache()
        if calibrate:
            self.calibrate()

    def calibrate(self, prompt_tokens: int = 8, steps: int = 3) -> None:
        """Measure a prefill, a request prompt and decode steps (batch 1 and 4) on a blank
        observation, so the first frames budget language from measurements, not guesses."""
        size = self.model.config.vision.image_size
        images = {name: np.zeros((size, size, 3), np.uint8) for name in self.config.camera_names}
        prefix = build_prefix(self.model.config, self.config.camera_names, images,
                              self.tokenizer.encode("calibration"))
        started = self.clock.now()
        table = self.model.prefill(prefix, self.cache, owner="calibration", reuse=False)
        self.costs.observe_prefill(prefix.num_tokens, self.clock.now() - started)
        forks = [self.cache.fork(table, "calibration") for _ in range(4)]
        self.cache.free(table)
        tokens = [self.eos_id or 0] * prompt_tokens
        for fork in forks:
            self.cache.reserve(fork, prompt_tokens + 2 * steps)
            started = self.clock.now()
            self.model.extend(fork, tokens, self.cache)
            self.costs.observe_extend(prompt_tokens, self.clock.now() - started)
        for batch in (forks[:1], forks):
            for _ in range(steps):
                started = self.clock.now()
                self.model.decode(batch, [tokens[0]] * len(batch), self.cache)
                self.costs.observe_decode(len(batch), self.clock.now() - started)
        for fork in forks:
            self.cache.free(fork)
        self.cache.pool.reset_peak()

    def cache_of(self, request: LanguageRequest):
        return self.cache

    def run_frame(self, frame_id, observation, prefix, start):
        table = self.prefill_for_actions(prefix)
        actions = self.actions.run([table], self.cache, frame_id)
        chunk = self.emit_chunk(frame_id, observation, actions, start)
        self.costs.prior = chunk.latency_s
        _, allowed = self.language(table, prefix, frame_id, start)
        self.cache.free(table)
        return chunk, allowed

    def idle_step(self, frame_start: float | None = None) -> int:
        """A frame without an observation (the watchdog stopped actions): running requests
        keep decoding on their own prefixes; new ones wait for the next observation.
        Returns the tokens decoded."""
        start = self.clock.now() if frame_start is None else frame_start
        self._events = []
        self._drain_inbox()
        before = self.counters["tokens"]
        self.language(None, None, -1, start)
        return self.counters["tokens"] - before

    def prefill_for_actions(self, prefix: Prefix) -> PageTable:
        """The frame's prefix pages, preempting language until they fit: actions never fail
        for lack of pages (the pool is checked at start-up to hold one prefix)."""
        while True:
            computed = self.model.counters["prefix_tokens_computed"]
            started = self.clock.now()
            table = self.model.prefill(prefix, self.cache)
            if table is not None:
                self.costs.observe_prefill(self.model.counters["prefix_tokens_computed"] - computed,
                                           self.clock.now() - started)
                return table
            victim = self.scheduler.victim()
            if victim is None:
                raise RuntimeError("KV pool cannot hold the observation prefix")
            self.preempt(victim)

    def preempt(self, request: LanguageRequest) -> None:
        self.release(request)
        self.scheduler.preempt(request)
        self.counters["preemptions"] += 1

    def language(self, frame_table: PageTable | None, prefix: Prefix | None, frame_id: int,
                 start: float) -> tuple[int, int]:
        """This frame's language work within its budget; (decode steps run, steps allowed).
        Without a frame table (idle frames) only preempted requests can be attached."""
        period = self.config.control_period_s
        budget_end = (start + period - self.config.language_margin_s) if period else math.inf

        def fits(cost: float) -> bool:
            return self.clock.now() + cost <= budget_end

        # 1. attach waiting requests: new ones to this frame's prefix (a fork: no copy),
        #    preempted ones to their own frame's prefix (recomputed or found in the index)
        while (request := self.scheduler.next_waiting()) is not None:
            if frame_table is None and request.status is not Status.PREEMPTED:
                break
            if request.status is Status.PREEMPTED:  # may have to recompute its frame's prefix
                cost = (self.costs.prefill(request.prefix.num_tokens)
                        + self.costs.extend(len(request.tokens_to_recompute())))
            else:
                cost = self.costs.extend(len(request.prompt))
            if not fits(cost) or not self._attach(request, frame_table, prefix, frame_id):
                break

        # 2. batched decode steps over the running requests: all of them if the budget
        #    allows, else the largest batch that fits (highest priority, oldest first)
        cap = self.scheduler.step_cap()
        steps = 0
        while steps < cap and self.scheduler.running:
            queue = sorted(self.scheduler.running, key=lambda r: (-r.priority, r.arrival, r.id))
            size = next((n for n in range(len(queue), 0, -1) if fits(self.costs.decode(n))), 0)
            if size < len(queue):
                self.counters["throttled_frames"] += 1
            if size == 0:
                break
            batch = self._make_room(queue[:size])
            if not batch:
                continue
            started = self.clock.now()
            logits = self.model.decode([r.table for r in batch], [r.next_token for r in batch],
                                       self.cache)
            self.costs.observe_decode(len(batch), self.clock.now() - started)
            for request, row in zip(batch, logits):
                self.take_token(request, row[None])
            steps += 1
            if size < len(queue):
                break  # throttled: the rest of this frame belongs to the next frame's actions
        self.scheduler.account(steps)
        return steps, cap

    def _attach(self, request: LanguageRequest, frame_table: PageTable, prefix: Prefix,
                frame_id: int) -> bool:
        if request.status is Status.PREEMPTED:
            base = self.model.prefill(request.prefix, self.cache, owner=request.kind)
            if base is None:
                return False
            attached = self.attach(request, base, self.cache)
            self.cache.free(base)
            return attached
        request.frame_id, request.prefix = frame_id, prefix
        return self.attach(request, frame_table, self.cache)

    def _make_room(self, batch: list[LanguageRequest]) -> list[LanguageRequest]:
        """Reserve one slot for each request of `batch`, preempting the lowest priority
        running requests while the pool is short; the requests of `batch` that got room."""
        for request in batch:
            while request.status is Status.RUNNING and not self.cache.reserve(request.table, 1):
                self.preempt(self.scheduler.victim())
        return [r for r in batch if r.status is Status.RUNNING]

    def kv_peak_bytes(self) -> int:
        return self.cache.pool.peak_bytes + self.cache.actions.bytes

    def reset_peaks(self) -> None:
        self.cache.pool.reset_peak()

    def pages_in_use(self) -> int:
        return self.cache.pool.used_pages
