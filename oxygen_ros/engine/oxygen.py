"""OxygenEngine: the OxyGen loop. Per control frame: prefill the served robots' newest
observations once, in one batched pass (reusing cached pages), run the action expert over
them in one batched pass (each robot's chunk continuing its own plan) and emit the chunks
at once; then, until the next frame any robot needs is due (FrameTiming), attach new
language requests to their robot's newest prefix by reference, feed their prompts, and
advance every running request — whatever robot and frame it started on — by up to k
tokens in batched decode steps.

Actions never wait for language; language never starves: whatever the estimates say,
every frame feeds one piece of the oldest prompt and takes one batched decode step.

Which robots are served — at start-up and at run time — is RunTimeAdmission's (admission.py)."""

import math
from typing import Callable, Optional, Sequence

import numpy as np

from oxygen_ros.cache.page_table import PageTable
from oxygen_ros.engine.action_task import run_together
from oxygen_ros.engine.admission import RunTimeAdmission
from oxygen_ros.engine.engine import Served
from oxygen_ros.engine.request import LanguageRequest, Status
from oxygen_ros.engine.robot import Robot
from oxygen_ros.engine.shared_cache import SharedCacheEngine
from oxygen_ros.model.prefix import Prefix, build_prefix

PROMPT_PIECE = 64   # tokens of a prompt a frame's guaranteed minimum feeds


class OxygenEngine(RunTimeAdmission, SharedCacheEngine):
    mode = "oxygen"
    serves_fleets = True

    def __init__(self, model, config, calibrate: bool = True, **kwargs):
        super().__init__(model, config, **kwargs)
        self.fleet_paths: dict[int, list[float]] = {}   # robots in a frame -> action paths
        self.admission_marks: dict[str, int] = {}      # robot -> its paths at the last change
        self.room_frames = 0     # the first running robot's frames in a row that left room
        self.guided_graphs = []        # CUDA: the RTC-guided loop, per robot-count bucket
        if model.device.type == "cuda":
            self._speed_up()
        elif config.torch_compile:
            model.compile_passes()     # calibrate() compiles them: settled after it
        if calibrate:
            self.calibrate()

    def _speed_up(self) -> None:
        """CUDA only: compiled MLP blocks and CUDA graphs over this engine's cache."""
        from oxygen_ros.engine.rtc_graph import GuidedActionRunner, robot_buckets
        from oxygen_ros.model.cuda_graphs import CudaGraphs

        config = self.config
        if config.torch_compile:
            self.model.compile_blocks()
        if config.cuda_graphs:
            longest = (self.max_prefix_tokens + config.max_request_tokens + 64
                       + max(config.dialogue_max_tokens, config.memory_max_tokens))
            self.model.graphs = CudaGraphs(self.model, self.cache, longest)
            settings = self.robot.actions.rtc
            if settings is not None and settings.guidance == "error":
                self.guided_graphs = [
                    GuidedActionRunner(self.model, self.model.graphs, settings, rows=rows)
                    for rows in robot_buckets(len(self.robots))]

    def calibrate(self, prompt_tokens: int = 8, steps: int = 3, action_paths: int = 3) -> None:
        """Measure the action path (prefill of a new observation + denoising) for 1, 2, ...
        robots in one frame, a request prompt and decode steps (batch 1 and 4) on a blank
        observation, so the first frames are scheduled from warm measurements (each kind's
        first, cold call is dropped: with torch_compile on a CPU, the one that compiles);
        then admit the robots the measurements can serve."""
        size = self.model.config.vision.image_size
        images = {name: np.zeros((size, size, 3), np.uint8) for name in self.config.camera_names}
        prefix = build_prefix(self.model.config, self.config.camera_names, images,
                              self.tokenizer.encode("calibration"))
        robots = list(self.robots.values())
        self.fleet_paths = {count: [] for count in range(1, len(robots) + 1)}
        for count, samples in self.fleet_paths.items():
            for run in range(action_paths):
                started = self.clock.now()
                tables = self.model.prefill_many([prefix] * count, self.cache,
                                                 owner="calibration", reuse=False)
                if count == 1:   # the rate of one prefix: a preempted request's resume cost
                    self.costs.observe_prefill(prefix.num_tokens, self.clock.now() - started)
                run_together([robot.actions for robot in robots[:count]], tables, self.cache,
                             [-1] * count, [None] * count, [0.0] * count, self.guided_graphs)
                if run:  # the first is the cold one
                    samples.append(self.clock.now() - started)
                for table in tables[1:]:
                    self.cache.free(table)
                if run < action_paths - 1 or count < len(robots):
                    self.cache.free(tables[0])
        table = tables[0]
        forks = [self.cache.fork(table, "calibration") for _ in range(4)]
        self.cache.free(table)
        tokens = [self.eos_id or 0] * prompt_tokens
        for fork in forks:      # the first decodes steps + 1 alone, then steps + 1 with all
            if not self.cache.reserve(fork, prompt_tokens + 2 * (steps + 1)):
                raise ValueError(f"num_pages {self.config.num_pages} cannot hold the start-up "
                                 "measurement of language steps: raise num_pages")
            started = self.clock.now()
            self.model.extend(fork, tokens, self.cache)
            self.costs.observe_extend(prompt_tokens, self.clock.now() - started)
        for batch in (forks[:1], forks):
            for step in range(steps + 1):     # each batch size's first step may be cold
                started = self.clock.now()
                self.model.decode(batch, [tokens[0]] * len(batch), self.cache)
                if step:
                    self.costs.observe_decode(len(batch), self.clock.now() - started)
        for fork in forks:
            self.cache.free(fork)
        self.cache.pool.reset_peak()
        self.model.settle_compiled()
        self.admit()
        served = [robot for robot in robots if not robot.refused]
        for robot in robots:     # the served are served together: their action path
            for seconds in self.fleet_paths[len(served)]:
                robot.timing.observe_action_path(seconds, len(served))
        self.mark_admission()

    @property
    def newest(self) -> Optional[tuple[PageTable, Prefix, int]]:
        """The single robot's newest prefix (table, prefix, frame id): new requests attach
        to it, also between frames."""
        return self.robot.newest

    def run_frames(self, served: Sequence[Served], start, began):
        # the previous prefixes stay indexed: unchanged pages are found again, not recomputed
        for share in served:
            self.release_newest(share.robot)
        tables = self.prefill_for_actions([share.prefix for share in served])
        try:
            actions = run_together(
                [share.robot.actions for share in served], tables, self.cache,
                [share.frame_id for share in served],
                [share.observation.stamp for share in served],
                [self.takeover_delay(share.robot, share.observation, began) for share in served],
                self.guided_graphs)
            chunks = [self.emit_chunk(share.frame_id, share.observation, chunk, start, began,
                                      len(served)) for share, chunk in zip(served, actions)]
        except Exception:
            for table in tables:      # not yet newest prefixes: nobody else frees them
                self.cache.free(table)
            raise
        for share, table in zip(served, tables):
            share.robot.newest = (table, share.prefix, share.frame_id)
        actions_done = self.clock.now()
        self.language(self.language_until(served, start, actions_done))
        for share in served:
            share.robot.timing.observe_language(self.clock.now() - actions_done)
        self.review_admission([share.robot for share in served])
        return chunks

    def language_until(self, served: Sequence[Served], start: float,
                       actions_done: float) -> float:
        """The served robots' language end (FrameTiming), and no later than the next frame
        of any other robot whose plan is in force, or the end of the language floor where
        that frame was due already (it waits for a newer observation, which may not come
        for a while: a slow or paused camera)."""
        until = min(share.robot.timing.language_until(start, actions_done) for share in served)
        floor_end = actions_done + min(share.robot.timing.floor_s for share in served)
        others = [max(robot.next_frame_at, floor_end) if robot.next_frame_at <= start
                  else robot.next_frame_at for robot in self.robots.values()
                  if robot.timing.plan_stamp is not None and robot.next_frame_at is not None
                  and all(robot is not share.robot for share in served)]
        return min([until, *others])

    def idle_step(self, until: float | None = None,
                  interrupted: Optional[Callable[[], bool]] = None) -> int:
        """Language without a new chunk (no fresh observation, or none newer than the plan
        in force): a memory window that elapsed meanwhile opens, running requests decode, new
        ones attach to the newest prefix seen (the answer is about the last thing seen) or,
        before any, wait. Runs until `until` (default one frame period from now) or, past
        the floor's steps, until `interrupted()` (an observation came); returns the tokens
        decoded."""
        self.drain()
        self._expire()
        for robot in self.robots.values():
            memory = None if robot.refused else robot.memory.due(self.clock.now())
            if memory is not None:
                self.scheduler.submit(memory)
        if until is None:
            period = self.config.frame_period_s
            until = self.clock.now() + period if period else math.inf
        before = self.counters["tokens"]
        with self.failing_ends_requests():
            self.language(until, interrupted)
        return self.counters["tokens"] - before

    def has_language_work(self) -> bool:
        return (bool(len(self.scheduler)) or len(self._inbox) > 0
                or any(robot.memory.is_due() for robot in self.robots.values()
                       if not robot.refused))

    def release_newest(self, robot: Optional[Robot] = None) -> None:
        """Unpin a robot's newest prefix, or every robot's (requests forked from one keep
        their pages)."""
        for each in (self.robots.values() if robot is None else (robot,)):
            if each.newest is not None:
                self.cache.free(each.newest[0])
                each.newest = None

    def prefill_for_actions(self, prefixes: Sequence[Prefix]) -> list[PageTable]:
        """The frame's prefix pages, one batched prefill for its robots, preempting language
        until they fit: actions never fail for lack of pages (the pool is checked at start-up
        to hold one prefix per robot and a request's own)."""
        while True:
            computed = self.model.counters["prefix_tokens_computed"]
            started = self.clock.now()
            tables = self.model.prefill_many(prefixes, self.cache)
            if tables is not None:
                if len(prefixes) == 1:    # a batch's per-token rate is not one prefix's
                    self.costs.observe_prefill(
                        self.model.counters["prefix_tokens_computed"] - computed,
                        self.clock.now() - started)
                return tables
            victim = self.scheduler.victim()
            if victim is None:
                raise RuntimeError("KV pool cannot hold the frame's observation prefixes")
            self.preempt(victim)

    def preempt(self, request: LanguageRequest) -> None:
        self.release(request)
        self.scheduler.preempt(request)
        self.counters["preemptions"] += 1

    def requests_of(self, robot: str) -> dict:
        """`robot`'s requests: pending (its dialogue not ended, places held, its memory
        requests), running, and waiting_for_observation (none of its observations seen yet:
        they cannot attach)."""
        # one copy each: /diagnostics reads from its own thread
        running, waiting = tuple(self.scheduler.running), tuple(self.scheduler.waiting)
        mine = [r for r in running + waiting if r.robot == robot]
        return {"pending_requests": self.pending_dialogue_of(robot)
                + sum(r.kind == "memory" for r in mine),
                "running_requests": sum(r.robot == robot for r in running),
                "waiting_for_observation": 0 if self.robots[robot].observed
                else sum(r.status is Status.WAITING for r in mine)}

    def language(self, until: float,
                 interrupted: Optional[Callable[[], bool]] = None) -> None:
        """Language work until `until` (engine clock), or until `interrupted()`.
        The first prompt piece and the first decode step run whatever the estimates say:
        that is the floor that keeps every request moving, and it measures unknown work."""
        now = self.clock.now

        def stopped() -> bool:   # checked once per piece and per step, past the floor's
            return interrupted is not None and interrupted()

        def fits(cost) -> bool:
            return until == math.inf or (cost is not None and now() + cost <= until)

        # 1. prompts: finish feeding attached requests, then attach waiting ones — new
        #    ones to the newest prefix (a fork: no copy), preempted ones to their own
        guaranteed = True
        while (request := self.scheduler.feeding()
               or self.scheduler.next_waiting(self._can_attach)) is not None:
            if not guaranteed and stopped():
                break
            if request.table is None:
                if not (guaranteed or fits(self._resume_cost(request))):
                    break
                if not self._attach(request):
                    break
            per_token = self.costs.extend_per_token()
            count = request.unfed
            if not fits(None if per_token is None else per_token * count):
                affordable = 0 if per_token is None else int((until - now()) / per_token)
                count = min(count, max(affordable, PROMPT_PIECE if guaranteed else 0))
            if count <= 0:
                break
            if not self.feed(request, count, self.cache):
                if self.scheduler.running != [request]:
                    break   # pages come back as the others end or are preempted
                self.out_of_pages(request)
            guaranteed = False

        # 2. batched decode steps over the running requests: all of them if the budget
        #    allows (the first step always), else the largest batch that fits
        cap = self.scheduler.step_cap()
        steps = 0
        while steps < cap and (queue := self.scheduler.decodable()):
            if steps and stopped():
                break    # a frame is ready: not a throttled one
            if steps == 0:
                size = len(queue)
            else:
                size = next((n for n in range(len(queue), 0, -1)
                             if fits(self.costs.decode(n))), 0)
            if size < len(queue):
                self.counters["throttled_frames"] += 1
            if size == 0:
                break
            batch = self._make_room(queue[:size])
            if not batch:
                continue
            started = now()
            logits = self.model.decode([r.table for r in batch], [r.next_token for r in batch],
                                       self.cache)
            self.costs.observe_decode(len(batch), now() - started)
            for request, row in zip(batch, logits):
                self.take_token(request, row[None])
            steps += 1
            if size < len(queue):
                break  # throttled: the rest of this frame belongs to the next frame's actions
        self.scheduler.account(steps)

    def _can_attach(self, request: LanguageRequest) -> bool:
        return (request.status is Status.PREEMPTED
                or self.robots[request.robot].newest is not None)

    def _resume_cost(self, request: LanguageRequest):
        if request.status is not Status.PREEMPTED:
            return 0.0
        return self.costs.prefill(request.prefix.num_tokens)

    def _attach(self, request: LanguageRequest) -> bool:
        """Fork the request's base: its own frame's prefix if it was preempted (recomputed
        or found in the index), else the newest one. False if there is none or no pages."""
        if request.status is Status.PREEMPTED:
            base = self.model.prefill(request.prefix, self.cache, owner=request.kind)
            if base is None:
                return False
            self.attach(request, base, self.cache)
            self.cache.free(base)
            return True
        newest = self.robots[request.robot].newest
        if newest is None:
            return False
        table, prefix, frame_id = newest
        request.frame_id, request.prefix = frame_id, prefix
        self.attach(request, table, self.cache)
        return True

    def _make_room(self, batch: list[LanguageRequest]) -> list[LanguageRequest]:
        """Reserve one slot for each request of `batch`, preempting the lowest priority
        running requests while the pool is short; the requests of `batch` that got room."""
        for request in batch:
            while request.status is Status.RUNNING and not self.cache.reserve(request.table, 1):
                if self.scheduler.running == [request]:
                    self.out_of_pages(request)
                else:
                    self.preempt(self.scheduler.victim())
        return [r for r in batch if r.status is Status.RUNNING]

    def out_of_pages(self, request: LanguageRequest) -> None:
        """The only running request cannot grow: the pool beside the robots' newest prefixes
        is all its own, so no preemption can make room (it would resume and run out again,
        holding every request behind it). It ends kv_full, its answer cut there."""
        self.count(request.robot, "kv_full_requests")
        self._finish(request, "kv_full")
