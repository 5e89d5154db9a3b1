"""Scheduler: which language requests run this frame, how many tokens fit the frame's
budget, and whom to preempt when pages run short. Actions are not scheduled: they always run."""

from collections import deque
from typing import Optional

from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.engine.cost_model import StepCostModel
from oxygen_ros.engine.request import LanguageRequest, Status


class Scheduler:
    def __init__(self, config: EngineConfig, costs: StepCostModel):
        self.config = config
        self.costs = costs
        self.waiting: deque[LanguageRequest] = deque()
        self.running: list[LanguageRequest] = []
        self.owed_tokens = 0          # decode steps language lost to throttling

    def submit(self, request: LanguageRequest) -> None:
        self.waiting.append(request)

    def next_waiting(self) -> Optional[LanguageRequest]:
        """Preempted requests resume first (highest priority first), then arrivals in order."""
        if not self.waiting:
            return None
        return max(self.waiting, key=lambda r: (r.status is Status.PREEMPTED, r.priority,
                                                -r.arrival, -r.id))

    def start(self, request: LanguageRequest) -> None:
        self.waiting.remove(request)
        request.status = Status.RUNNING
        self.running.append(request)

    def finish(self, request: LanguageRequest, reason: str) -> None:
        self.running.remove(request)
        request.status = Status.FINISHED
        request.finish_reason = reason

    def victim(self) -> Optional[LanguageRequest]:
        """The running request to preempt: lowest priority, then the latest arrival."""
        if not self.running:
            return None
        return min(self.running, key=lambda r: (r.priority, -r.arrival, -r.id))

    def preempt(self, request: LanguageRequest) -> None:
        self.running.remove(request)
        request.status = Status.PREEMPTED
        request.preemptions += 1
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
