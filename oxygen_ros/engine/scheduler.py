"""Scheduler: which language requests wait, feed their prompts or decode; how many decode
steps a frame may take; whom to preempt when pages run short; which requests have waited
too long. Actions are not scheduled: they always run. With several robots, each robot's
requests take turns with the others' (a burst from one does not go first as a block).
Priority orders requests that wait together; it does not let a steady stream of questions
starve a summary: a request that a newer one of higher priority overtook attaches next."""

from collections import Counter, deque
from typing import Callable, Optional

from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.engine.request import LanguageRequest, Status


class Scheduler:
    def __init__(self, config: EngineConfig):
        self.config = config
        self.waiting: deque[LanguageRequest] = deque()
        self.running: list[LanguageRequest] = []
        self.owed_tokens = 0          # decode steps language lost to throttling

    def __len__(self) -> int:
        return len(self.waiting) + len(self.running)

    def submit(self, request: LanguageRequest) -> None:
        self.waiting.append(request)

    def next_waiting(self, ready: Callable[[LanguageRequest], bool] = lambda r: True
                     ) -> Optional[LanguageRequest]:
        """Among the waiting requests that are ready to attach: preempted ones resume first,
        then arrivals; in each, the highest priority (or that of a newer request that
        overtook it) first, then the robot with the fewest running requests, in arrival
        order."""
        candidates = [r for r in self.waiting if ready(r)]
        if not candidates:
            return None
        running = Counter(r.robot for r in self.running)
        return max(candidates, key=lambda r: (r.status is Status.PREEMPTED,
                                              max(r.priority, r.overtaken_by),
                                              -running[r.robot], -r.arrival, -r.id))

    def feeding(self) -> Optional[LanguageRequest]:
        """An attached request whose prompt is not all in its table yet (oldest first)."""
        return min((r for r in self.running if r.unfed), default=None,
                   key=lambda r: (r.arrival, r.id))

    def decodable(self) -> list[LanguageRequest]:
        """Requests ready for a decode step: highest priority first; within a priority the
        robots take turns (each one's oldest, then each one's second, ...)."""
        ordered = sorted((r for r in self.running if r.decodable),
                         key=lambda r: (-r.priority, r.arrival, r.id))
        turns: Counter = Counter()
        rank = {}
        for request in ordered:
            rank[request] = turns[(request.robot, request.priority)]
            turns[(request.robot, request.priority)] += 1
        return sorted(ordered, key=lambda r: (-r.priority, rank[r], r.arrival, r.id))

    def start(self, request: LanguageRequest) -> None:
        self.waiting.remove(request)
        for older in self.waiting:
            if older.arrival < request.arrival and older.priority < request.priority:
                older.overtaken_by = max(older.overtaken_by, request.priority)
        request.status = Status.RUNNING
        self.running.append(request)

    def finish(self, request: LanguageRequest, reason: str) -> None:
        (self.running if request in self.running else self.waiting).remove(request)
        request.status = Status.FINISHED
        request.finish_reason = reason

    def expired(self, now: float) -> list[LanguageRequest]:
        """Requests older than request_timeout_s (0: none ever expire)."""
        timeout = self.config.request_timeout_s
        if not timeout:
            return []
        return [r for r in (*self.running, *self.waiting) if now - r.arrival > timeout]

    def victim(self) -> Optional[LanguageRequest]:
        """The running request to preempt: lowest priority, then the latest arrival."""
        if not self.running:
            return None
        return min(self.running, key=lambda r: (r.priority, -r.arrival, -r.id))

    def preempt(self, request: LanguageRequest) -> None:
        self.running.remove(request)
        request.status = Status.PREEMPTED
        request.preemptions += 1
        request.fed = 0
        self.waiting.appendleft(request)

    def step_cap(self) -> int:
        """Decode steps this frame may take: k, plus what earlier frames owe, up to the cap."""
        return min(self.config.max_tokens_per_frame,
                   self.config.tokens_per_frame + self.owed_tokens)

    def account(self, steps_taken: int) -> None:
        if not self.running and not self.waiting:
            self.owed_tokens = 0
        else:
            self.owed_tokens = max(0, self.owed_tokens + self.config.tokens_per_frame - steps_taken)
