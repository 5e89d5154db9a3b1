"""EngineCore: what every serving mode shares — the robots it serves (robot.py), request
intake and limits, prefix building, the frame clock, emitting chunks and text. The modes
(oxygen.py, baselines.py) differ only in how one control frame's work is laid out over the
KV cache; only the OxyGen loop serves several robots in one frame.

A frame whose work raises (the model throws) ends every open language request at once with
finish_reason engine_error and frees its pages, then re-raises: the caller reports it."""

import contextlib
import itertools
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Sequence

from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.cache.page_table import PageTable
from oxygen_ros.engine.action_task import ActionTask
from oxygen_ros.engine.clock import MonotonicClock
from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.engine.cost_model import StepCostModel
from oxygen_ros.engine.dialogue_task import DialogueTask
from oxygen_ros.engine.frame_timing import FrameTiming
from oxygen_ros.engine.inbox import Cancel, Inbox, NewDialogue
from oxygen_ros.engine.memory_task import MemoryTask
from oxygen_ros.engine.observation import Observation
from oxygen_ros.engine.outputs import ActionChunk, FrameReport, TextChunk
from oxygen_ros.engine.pool_size import allocate_cache, prefix_tokens
from oxygen_ros.engine.request import COMPLETED, LanguageRequest, Status
from oxygen_ros.engine.robot import Robot
from oxygen_ros.engine.robot_names import robot_names
from oxygen_ros.engine.scheduler import Scheduler
from oxygen_ros.model.normalization import Normalization
from oxygen_ros.model.pi05 import Pi05Model
from oxygen_ros.model.prefix import Prefix, build_prefix
from oxygen_ros.model.prompt import pi05_prompt_tokens
from oxygen_ros.model.sampling import sample
from oxygen_ros.model.tokenizer import tokenizer_for

Callback = Optional[Callable[[object], None]]


@dataclass(frozen=True)
class Served:
    """One robot's share of a control frame."""
    robot: Robot
    frame_id: int
    observation: Observation
    prefix: Prefix


class EngineCore:
    mode = "core"
    serves_fleets = False         # several robots in one frame (the OxyGen loop only)

    def __init__(self, model: Pi05Model, config: EngineConfig, *, clock=None, tokenizer=None,
                 normalization: Optional[Normalization] = None, on_chunk: Callback = None,
                 on_text: Callback = None, on_memory: Callback = None,
                 dialogue_ids: Optional[Iterator[int]] = None, robots: Sequence[str] = ("",)):
        self.model, self.config = model, config
        self.normalization = normalization or Normalization()
        self.clock = clock or MonotonicClock()
        self.tokenizer = tokenizer or tokenizer_for(model.config)
        self.eos_id = getattr(self.tokenizer, "eos_id", None)
        names = robot_names(robots)
        if len(names) > 1 and not self.serves_fleets:
            raise ValueError(f"mode {self.mode} serves one robot, not {len(names)}")
        self.robots = {name: Robot(name, ActionTask(model, config),
                                   FrameTiming(config, model.config.action_horizon),
                                   MemoryTask(self.tokenizer, config, name))
                       for name in names}
        self.robot = self.robots[names[0]]      # the one a single-robot caller means
        self.dialogue = DialogueTask(self.tokenizer, config)
        self.costs = StepCostModel()
        self.scheduler = Scheduler(config)
        self.on_chunk, self.on_text, self.on_memory = on_chunk, on_text, on_memory
        self.counters = Counter()
        self.frames = 0
        # the ids clients see, in arrival order; a caller that outlives engines passes its own
        self._dialogue_ids = dialogue_ids or itertools.count(1)
        self.last_error = ""                          # the newest failed frame's error
        self._inbox = Inbox(config.max_pending_requests)
        self.max_prefix_tokens = prefix_tokens(model.config, len(config.camera_names))

    def new_cache(self, action_batch: int = 1) -> KVCache:
        return allocate_cache(self.model, self.config, action_batch)

    # -- the single robot's state (a fleet names its robots) ---------------------------------
    @property
    def actions(self) -> ActionTask:
        return self.robot.actions

    @property
    def timing(self) -> FrameTiming:
        return self.robot.timing

    @property
    def memory(self) -> MemoryTask:
        return self.robot.memory

    @property
    def next_frame_at(self) -> Optional[float]:
        """When the robot's next frame should start (engine clock; None before any)."""
        return self.robot.next_frame_at

    def robot_of(self, name: str) -> Robot:
        robot = self.robots.get(name)
        if robot is None:
            raise ValueError(f"robot {name!r} is not one this engine serves "
                             f"({sorted(self.robots)})")
        return robot

    # -- intake (thread-safe) --------------------------------------------------------------
    def submit_dialogue(self, text: str, max_tokens: Optional[int] = None,
                        robot: Optional[str] = None, held: bool = False) -> int:
        """Queue a dialogue request from any thread, about `robot`'s newest observation
        (default: the single robot); its id comes back with every text chunk (dialogue ids
        count 1, 2, 3, ... in arrival order). It takes one of the robot's
        max_pending_requests places, or ends queue_full if none is free; `held`: it takes
        the place hold_place() held for it. White space alone is refused (ValueError); the
        node refuses invisible characters alone too."""
        if not text.strip():
            raise ValueError("a dialogue request needs text: a blank one asks nothing")
        name = self.robot.name if robot is None else self.robot_of(robot).name
        full = not held and not self._inbox.take_place(name)
        request_id = next(self._dialogue_ids)
        self._inbox.put(NewDialogue(request_id, text, max_tokens, self.clock.now(), name, full))
        return request_id

    def hold_place(self, robot: str = "") -> bool:
        """Hold one of `robot`'s places for a request to come (an accepted Ask goal, any
        thread); False if none is free. Hand it to submit_dialogue(held=True) or back."""
        return self._inbox.take_place(self.robot_of(robot).name)

    def give_back_place(self, robot: str = "") -> None:
        """A held place will not be used."""
        self._inbox.give_place(self.robot_of(robot).name)

    def cancel_dialogue(self, request_id: int) -> None:
        """End a dialogue request from any thread (finish_reason cancelled, pages freed at the
        engine's next step); nothing happens if it has already ended."""
        self._inbox.put(Cancel(request_id))

    def drain(self) -> None:
        """Take new requests and cancellations now (engine thread; frames do it too)."""
        for message in self._inbox.take():
            if isinstance(message, Cancel):
                self._cancel(message.request_id)
            else:
                self._take_in(message)

    def _take_in(self, new: NewDialogue) -> None:
        """A new dialogue request waits to attach, or ends at once: robot_refused when
        admission refused the robot (or shed it at run time), queue_full when its robot had
        max_pending_requests already as it came (each robot its own limit, so one robot's
        burst cannot starve another)."""
        request = self.dialogue.request(new.request_id, new.text, new.arrival, new.max_tokens,
                                        new.robot)
        self.counters["dialogue_requests"] += 1
        self.count(new.robot, "truncated_requests", request.truncated)
        reason = ("robot_refused" if self.robots[new.robot].refused else
                  "queue_full" if new.full else "")
        if reason:
            if not new.full:
                self._inbox.give_place(new.robot)
            self.count(new.robot, "rejected_requests")
            request.status = Status.FINISHED
            request.finish_reason = reason
            self._text(request, "", final=True)
            return
        self.scheduler.submit(request)

    def count(self, robot: str, key: str, count: int = 1) -> None:
        """Count in the engine's counters and in the robot's own share."""
        self.counters[key] += count
        self.robots[robot].counters[key] += count

    def _cancel(self, request_id: int) -> None:
        for request in (*self.scheduler.running, *self.scheduler.waiting):
            if request.kind == "dialogue" and request.id == request_id:
                self.count(request.robot, "cancelled_requests")
                self._finish(request, "cancelled")
                return

    def _expire(self) -> None:
        for request in self.scheduler.expired(self.clock.now()):
            self.count(request.robot, "timed_out_requests")
            self._finish(request, "timeout")

    # -- one control frame -------------------------------------------------------------------
    def step(self, observation: Observation, frame_start: Optional[float] = None) -> FrameReport:
        """Run one control frame on the newest observation: its chunk, then language until
        the next frame is due. frame_start is when the frame began (default now);
        observation.stamp must be on the same clock for the plan deadline to mean anything."""
        return self.serve([observation], frame_start)[0]

    def serve(self, observations: Sequence[Observation],
              frame_start: Optional[float] = None) -> list[FrameReport]:
        """One control frame for several robots (at most one observation each): their
        chunks, then language until the earliest next frame any robot needs."""
        began = self.clock.now()
        start = began if frame_start is None else frame_start
        robots = [self.robot_of(observation.robot) for observation in observations]
        if len(set(map(id, robots))) != len(robots):
            raise ValueError("one frame serves each robot at most once")
        for robot in robots:
            if robot.refused:
                raise ValueError(f"robot {robot.name!r} {robot.refused}")
        frame_ids = range(self.frames, self.frames + len(robots))
        self.frames += len(robots)
        for robot, observation in zip(robots, observations):
            robot.timing.observe_age(start - observation.stamp)
        self.drain()
        self._expire()
        for robot, observation in zip(robots, observations):
            memory = robot.memory.observe(observation, began)
            if memory is not None:
                self.scheduler.submit(memory)
        served = [Served(robot, frame_id, observation, self.build_prefix(observation))
                  for robot, observation, frame_id in zip(robots, observations, frame_ids)]
        before = Counter(self.counters)
        with self.failing_ends_requests():
            chunks = self.run_frames(served, start, began)
        self.counters["frames"] += len(served)
        reports = []
        for share, chunk in zip(served, chunks):
            share.robot.next_frame_at = share.robot.timing.next_start(start)
            reports.append(FrameReport(
                share.frame_id, latency_s=self.clock.now() - start, chunk=chunk,
                tokens=self.counters["tokens"] - before["tokens"],
                preempted=self.counters["preemptions"] - before["preemptions"],
                active_requests=len(self.scheduler.running), pages_in_use=self.pages_in_use(),
                next_frame_at=share.robot.next_frame_at, robot=share.robot.name))
        return reports

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
                self.count(request.robot, "failed_requests")
                self._finish(request, "engine_error")
            raise

    def run_frames(self, served: Sequence[Served], start: float,
                   began: float) -> list[ActionChunk]:
        """The mode's frame for these robots: emit their chunks (returned), then language."""
        (share,) = served       # modes that serve one robot
        return [self.run_frame(share.frame_id, share.observation, share.prefix, start, began)]

    def run_frame(self, frame_id: int, observation: Observation, prefix: Prefix,
                  start: float, began: float) -> ActionChunk:
        """A single-robot mode's frame: emit the action chunk (returned), then language."""
        raise NotImplementedError

    def build_prefix(self, observation: Observation) -> Prefix:
        config = self.model.config
        state = self.normalization.normalize_state(observation.state)
        tokens, cut = pi05_prompt_tokens(self.tokenizer, observation.instruction, state,
                                         config.state_dim, config.max_prompt_tokens,
                                         config.state_prompt)
        self.count(observation.robot, "truncated_instructions", cut)
        return build_prefix(config, self.config.camera_names, observation.images, tokens)

    # -- shared pieces -----------------------------------------------------------------------
    def chunk_actions(self, table: PageTable, cache: KVCache, frame_id: int,
                      observation: Observation, began: float):
        """The frame's chunk (normalized), for the single robot."""
        return self.robot.actions.run([table], cache, frame_id, observation.stamp,
                                      self.takeover_delay(self.robot, observation, began))

    @staticmethod
    def takeover_delay(robot: Robot, observation: Observation, began: float) -> float:
        """How long after its observation a chunk begun at `began` takes over: at the latest
        when the robot's longest recent action path is over (as lerobot's latency tracker
        does); with RTC, the steps until then are frozen."""
        return began - observation.stamp + robot.timing.action_path_max()

    def emit_chunk(self, frame_id: int, observation: Observation, actions, start: float,
                   began: float, robots: int = 1) -> ActionChunk:
        """The chunk of a frame of `robots` robots is out: the plan in force (late if after
        the previous plan needed it), unless NaN or inf: the node drops it (non_finite_chunk)."""
        robot = self.robot_of(observation.robot)
        arrival = self.clock.now()
        robot.timing.observe_action_path(arrival - began, robots)
        late = robot.actions.adopted and robot.timing.chunk_arrived(observation.stamp, arrival)
        actions = self.normalization.unnormalize_actions(actions)
        guided = robot.actions.guided
        frozen = robot.actions.inference_delay if guided else 0
        chunk = ActionChunk(frame_id, observation.stamp, actions, arrival - start, late=late,
                            rtc=guided, inference_delay=frozen, robot=robot.name)
        self.counters["deadline_misses"] += late
        self.count(robot.name, "rtc_chunks", guided)
        # out after its frozen steps (beyond rounding): the switch is not inside them
        self.count(robot.name, "rtc_late_switches", guided and arrival - observation.stamp
                   > frozen * self.config.action_dt_s + 1e-9)
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
        if request.kind == "dialogue":
            self._inbox.give_place(request.robot)
        self._text(request, request.stream.flush(), final=True)
        if request.table is not None:
            self.release(request)
        if request.kind == "memory":
            memory = self.robots[request.robot].memory
            if reason in COMPLETED:
                self._emit(memory.finished(request), self.on_memory)
            else:
                memory.abandon()

    def release(self, request: LanguageRequest) -> None:
        """Hand a request's pages back (its cache is the mode's; see cache_of)."""
        self.cache_of(request).free(request.table)
        request.table = None

    def cache_of(self, request: LanguageRequest) -> KVCache:
        raise NotImplementedError

    def _text(self, request: LanguageRequest, text: str, final: bool) -> None:
        self._emit(TextChunk(request.id, request.kind, request.seq, text, final,
                             request.finish_reason if final else "", request.frame_id,
                             request.robot),
                   self.on_text)
        request.seq += 1

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
                + len(self._inbox))

    def pending_dialogue_of(self, robot: str) -> int:
        """`robot`'s dialogue requests waiting, running or not taken in yet, and places held
        for requests to come (any thread)."""
        return self._inbox.places_taken(robot)

    @property
    def pending_requests(self) -> int:
        return len(self.scheduler) + len(self._inbox)
