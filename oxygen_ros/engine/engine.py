"""EngineCore: what every serving mode shares — tasks, request intake and limits, prefix
building, the frame clock, emitting chunks and text. The modes (oxygen.py, baselines.py)
differ only in how one control frame's work is laid out over the KV cache.

A frame whose work raises (the model throws) ends every open language request at once with
finish_reason engine_error and frees its pages, then re-raises: the caller reports it."""

import contextlib
import itertools
import queue
from collections import Counter
from typing import Callable, Iterator, Optional

from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.cache.page_table import PageTable
from oxygen_ros.engine.action_task import ActionTask
from oxygen_ros.engine.clock import MonotonicClock
from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.engine.cost_model import StepCostModel
from oxygen_ros.engine.dialogue_task import DialogueTask
from oxygen_ros.engine.frame_timing import FrameTiming
from oxygen_ros.engine.memory_task import MemoryTask
from oxygen_ros.engine.observation import Observation
from oxygen_ros.engine.outputs import ActionChunk, FrameReport, TextChunk
from oxygen_ros.engine.request import Cancel, LanguageRequest, NewDialogue, Status
from oxygen_ros.engine.scheduler import Scheduler
from oxygen_ros.model.normalization import Normalization
from oxygen_ros.model.pi05 import Pi05Model
from oxygen_ros.model.prefix import Prefix, build_prefix
from oxygen_ros.model.prompt import pi05_prompt
from oxygen_ros.model.sampling import sample
from oxygen_ros.model.tokenizer import ByteTokenizer

Callback = Optional[Callable[[object], None]]


def tokenizer_for(model: Pi05Model):
    if model.config.tokenizer == "bytes":
        return ByteTokenizer()
    raise ValueError(f"model tokenizer {model.config.tokenizer!r} needs a tokenizer file")


class EngineCore:
    mode = "core"

    def __init__(self, model: Pi05Model, config: EngineConfig, *, clock=None, tokenizer=None,
                 normalization: Optional[Normalization] = None, on_chunk: Callback = None,
                 on_text: Callback = None, on_memory: Callback = None,
                 dialogue_ids: Optional[Iterator[int]] = None):
        self.model, self.config = model, config
        self.normalization = normalization or Normalization()
        self.clock = clock or MonotonicClock()
        self.tokenizer = tokenizer or tokenizer_for(model)
        self.eos_id = getattr(self.tokenizer, "eos_id", None)
        self.actions = ActionTask(model, config)
        self.dialogue = DialogueTask(self.tokenizer, config)
        self.memory = MemoryTask(self.tokenizer, config)
        self.costs = StepCostModel()
        self.scheduler = Scheduler(config)
        self.timing = FrameTiming(config, model.config.action_horizon)
        self.on_chunk, self.on_text, self.on_memory = on_chunk, on_text, on_memory
        self.counters = Counter()
        self.frames = 0
        self.next_frame_at: Optional[float] = None   # engine clock; None before any frame
        # the ids clients see, in arrival order; a caller that outlives engines passes its own
        self._dialogue_ids = dialogue_ids or itertools.count(1)
        self.last_error = ""                          # the newest failed frame's error
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self.max_prefix_tokens = (len(config.camera_names) * model.config.image_tokens_per_camera
                                  + model.config.max_prompt_tokens)

    def new_cache(self, action_batch: int = 1) -> KVCache:
        cache = KVCache.for_model(self.model.config, self.config.num_pages, self.config.page_size,
                                  action_batch, self.model.dtype, self.model.device)
        needed = cache.pages_for(self.max_prefix_tokens) + 1
        if needed > self.config.num_pages:
            raise ValueError(f"num_pages={self.config.num_pages} cannot hold one observation "
                             f"prefix ({self.max_prefix_tokens} tokens = {needed} pages of "
                             f"{self.config.page_size}); raise num_pages")
        return cache

    # -- intake (thread-safe) --------------------------------------------------------------
    def submit_dialogue(self, text: str, max_tokens: Optional[int] = None) -> int:
        """Queue a dialogue request from any thread; its id comes back with every text chunk
        (dialogue ids count 1, 2, 3, ... in arrival order)."""
        request_id = next(self._dialogue_ids)
        self._inbox.put(NewDialogue(request_id, text, max_tokens, self.clock.now()))
        return request_id

    def cancel_dialogue(self, request_id: int) -> None:
        """End a dialogue request from any thread (finish_reason cancelled, pages freed at the
        engine's next step); nothing happens if it has already ended."""
        self._inbox.put(Cancel(request_id))

    def drain(self) -> None:
        """Take new requests and cancellations now (engine thread; frames do it too)."""
        self._drain_inbox()

    def _drain_inbox(self) -> None:
        while True:
            try:
                message = self._inbox.get_nowait()
            except queue.Empty:
                return
            if isinstance(message, Cancel):
                self._cancel(message.request_id)
            else:
                self._take_in(message)

    def _take_in(self, new: NewDialogue) -> None:
        request = self.dialogue.request(new.request_id, new.text, new.arrival, new.max_tokens)
        self.counters["dialogue_requests"] += 1
        self.counters["truncated_requests"] += request.truncated
        pending = sum(r.kind == "dialogue" for r in (*self.scheduler.waiting,
                                                     *self.scheduler.running))
        if pending >= self.config.max_pending_requests:
            self.counters["rejected_requests"] += 1
            request.status = Status.FINISHED
            request.finish_reason = "queue_full"
            self._text(request, "", final=True)
            return
        self.scheduler.submit(request)

    def _cancel(self, request_id: int) -> None:
        for request in (*self.scheduler.running, *self.scheduler.waiting):
            if request.kind == "dialogue" and request.id == request_id:
                self.counters["cancelled_requests"] += 1
                self._finish(request, "cancelled")
                return

    def _expire(self) -> None:
        for request in self.scheduler.expired(self.clock.now()):
            self.counters["timed_out_requests"] += 1
            self._finish(request, "timeout")

    # -- one control frame -------------------------------------------------------------------
    def step(self, observation: Observation, frame_start: Optional[float] = None) -> FrameReport:
        """Run one control frame on the newest observation: its chunk, then language until
        the next frame is due. frame_start is when the frame began (default now);
        observation.stamp must be on the same clock for the plan deadline to mean anything."""
        began = self.clock.now()
        start = began if frame_start is None else frame_start
        frame_id = self.frames
        self.frames += 1
        self.timing.observe_age(start - observation.stamp)
        self._drain_inbox()
        self._expire()
        memory = self.memory.observe(observation, frame_id, began)
        if memory is not None:
            self.scheduler.submit(memory)
        prefix = self.build_prefix(observation)
        before = Counter(self.counters)
        with self.failing_ends_requests():
            chunk = self.run_frame(frame_id, observation, prefix, start, began)
        self.counters["frames"] += 1
        self.next_frame_at = self.timing.next_start(start)
        return FrameReport(
            frame_id, latency_s=self.clock.now() - start, chunk=chunk,
            tokens=self.counters["tokens"] - before["tokens"],
            preempted=self.counters["preemptions"] - before["preemptions"],
            active_requests=len(self.scheduler.running), pages_in_use=self.pages_in_use(),
            next_frame_at=self.next_frame_at)

    @contextlib.contextmanager
    def failing_ends_requests(self):
        """Work that raises ends every open language request with engine_error (their state
        is unknown, and a failure that repeats would hold them until request_timeout_s)."""
        try:
            yield
        except Exception as error:
            self.counters["failed_frames"] += 1
            self.last_error = f"{type(error).__name__}: {error}"
            for request in (*self.scheduler.running, *self.scheduler.waiting):
                self.counters["failed_requests"] += 1
                self._finish(request, "engine_error")
            raise

    def run_frame(self, frame_id: int, observation: Observation, prefix: Prefix,
                  start: float, began: float) -> ActionChunk:
        """The mode's frame: emit the action chunk (returned), then do language work."""
        raise NotImplementedError

    def build_prefix(self, observation: Observation) -> Prefix:
        config = self.model.config
        state = self.normalization.normalize_state(observation.state)
        prompt = pi05_prompt(observation.instruction, state, config.state_dim)
        return build_prefix(config, self.config.camera_names, observation.images,
                            self.tokenizer.encode(prompt))

    # -- shared pieces -----------------------------------------------------------------------
    def chunk_actions(self, table: PageTable, cache: KVCache, frame_id: int,
                      observation: Observation, began: float):
        """The frame's chunk (normalized). It is expected to take over at the latest when
        the longest recent action path after `began` is over (as lerobot's latency tracker
        does): with RTC, the steps until then are frozen."""
        delay_s = began - observation.stamp + self.timing.action_path_max()
        return self.actions.run([table], cache, frame_id, observation.stamp, delay_s)

    def emit_chunk(self, frame_id: int, observation: Observation, actions, start: float,
                   began: float) -> ActionChunk:
        """The frame's chunk is out: it becomes the plan in force (late if it arrived after
        the previous plan needed its successor)."""
        arrival = self.clock.now()
        self.timing.observe_action_path(arrival - began)
        late = self.timing.chunk_arrived(observation.stamp, arrival)
        actions = self.normalization.unnormalize_actions(actions)
        guided = self.actions.guided
        frozen = self.actions.inference_delay if guided else 0
        chunk = ActionChunk(frame_id, observation.stamp, actions, arrival - start, late=late,
                            rtc=guided, inference_delay=frozen)
        self.counters["deadline_misses"] += late
        self.counters["rtc_chunks"] += guided
        # took over after its frozen steps: the switch is not inside the frozen part
        self.counters["rtc_late_switches"] += (
            guided and arrival - observation.stamp > frozen * self.config.action_dt_s)
        self._emit(chunk, self.on_chunk)
        return chunk

    def _emit(self, event, callback: Callback) -> None:
        if callback is not None:
            callback(event)

    def attach(self, request: LanguageRequest, base: PageTable, cache: KVCache) -> None:
        """Give a request its own table forked from `base` (the frame prefix it reads, by
        reference: no copy); feed() then runs its tokens through the model."""
        request.table = cache.fork(base, request.kind)
        request.fed = 0
        self.scheduler.start(request)

    def feed(self, request: LanguageRequest, count: int, cache: KVCache) -> bool:
        """Run the request's next `count` unfed tokens (prompt, or what a resumed request
        recomputes); the last piece of a new prompt samples the first token. False
        (nothing changed) if the pool is short."""
        tokens = request.to_feed()[request.fed:request.fed + count]
        if not cache.reserve(request.table, len(tokens)):
            return False
        started = self.clock.now()
        logits = self.model.extend(request.table, tokens, cache)
        self.costs.observe_extend(len(tokens), self.clock.now() - started)
        request.fed += len(tokens)
        if not request.unfed and not request.generated:
            self.take_token(request, logits[None])
        return True

    def take_token(self, request: LanguageRequest, logits) -> bool:
        """Sample the next token from logits [1, V], stream it; True when the request is done."""
        token = int(sample(logits, self.config.temperature, self.config.top_p,
                           request.generator)[0])
        request.generated.append(token)
        request.fed = len(request.to_feed())
        self.counters["tokens"] += 1
        is_eos = self.config.stop_at_eos and token == self.eos_id
        if not is_eos:
            piece = request.stream.push(token)
            if piece:
                self._text(request, piece, final=False)
        if is_eos or len(request.generated) >= request.max_tokens:
            self._finish(request, "eos" if is_eos else "length")
            return True
        return False

    def _finish(self, request: LanguageRequest, reason: str) -> None:
        """End a request: its last text with the reason, its pages back, its summary out."""
        self.scheduler.finish(request, reason)
        self._text(request, request.stream.flush(), final=True)
        if request.table is not None:
            self.release(request)
        if request.kind == "memory":
            if reason in ("eos", "length"):
                self._emit(self.memory.finished(request), self.on_memory)
            else:
                self.memory.abandon()

    def release(self, request: LanguageRequest) -> None:
        """Hand a request's pages back (its cache is the mode's; see cache_of)."""
        self.cache_of(request).free(request.table)
        request.table = None

    def cache_of(self, request: LanguageRequest) -> KVCache:
        raise NotImplementedError

    def _text(self, request: LanguageRequest, text: str, final: bool) -> None:
        self._emit(TextChunk(request.id, request.kind, request.seq, text, final,
                             request.finish_reason if final else "", request.frame_id),
                   self.on_text)
        request.seq += 1

    def decode_to_completion(self, request: LanguageRequest, cache: KVCache) -> None:
        """Decode one request alone until it finishes (the baselines' language path)."""
        while request.status is Status.RUNNING:
            if not cache.reserve(request.table, 1):
                raise RuntimeError(f"{self.mode}: KV pool exhausted while decoding request "
                                   f"{request.id}; raise num_pages")
            logits = self.model.decode([request.table], [request.next_token], cache)
            self.take_token(request, logits)

    def pages_in_use(self) -> int:
        raise NotImplementedError

    def kv_peak_bytes(self) -> int:
        raise NotImplementedError

    def reset_peaks(self) -> None:
        raise NotImplementedError

    @property
    def pending_dialogue(self) -> int:
        """Dialogue requests waiting or running, and those not taken in yet."""
        return (sum(r.kind == "dialogue" for r in (*self.scheduler.waiting,
                                                   *self.scheduler.running))
                + self._inbox.qsize())

    @property
    def pending_requests(self) -> int:
        return len(self.scheduler) + self._inbox.qsize()
