"""The inference node's diagnostics: its numbers and its level and message (no ROS)."""

from collections import Counter
from typing import Iterable, Mapping, Optional, Sequence

from oxygen_ros.engine.frame_timing import percentile

BAD_INPUTS = {"future_stamp", "stale_stamp", "malformed_observation", "unknown_camera",
              "duplicate_camera", "bad_image", "wrong_image_size", "no_usable_camera",
              "missing_camera", "joint_names_mismatch", "joint_state_mismatch",
              "non_finite_state", "empty_instruction", "long_instruction", "empty_request",
              "truncated_request", "non_finite_chunk", "non_finite_command", "internal_error"}
# what else warns: an answer cut where the KV pool ran out (raise num_pages), an
# observation stamped ahead of this host's clock by a step or more (used, its plan late)
PROBLEMS = BAD_INPUTS | {"dialogue_kv_full", "clock_ahead"}
STUCK_FACTOR = 4     # a frame this many times the longest recent one (and over a plan) hangs


class Health:
    """Level ("OK", "WARN" or "ERROR") and message per diagnostics period; a problem
    (deadline miss, bad input, an answer the KV pool cut) warns in the period it was
    counted in, naming each kind and how many (also in the ERROR of a robot without fresh
    observations, where they may say why: bad input that dropped them), a failed engine
    frame (the model raised) is an ERROR with its error text in that period."""

    def __init__(self):
        self._reported_problems: Counter = Counter()
        self.failed_frames = 0
        self.last_error = ""
        self._reported_failures = 0
        self._meets_targets: Optional[bool] = None

    def frame_failed(self, error: BaseException) -> None:
        """The engine thread's frame raised (its requests ended with engine_error)."""
        self.failed_frames += 1
        self.last_error = f"{type(error).__name__}: {error}"

    def capacity_notice(self, capacity) -> Optional[tuple[str, str]]:
        """(log level, text) saying what this machine can deliver: the first time it is
        known, then only when it changes."""
        if capacity is None or capacity.meets_targets == self._meets_targets:
            return None
        self._meets_targets = capacity.meets_targets
        if capacity.meets_targets:
            return "info", f"real-time: {capacity.describe()}"
        return "warning", f"real-time targets cannot be met: {capacity.describe()}"

    def values(self) -> dict:
        return {"failed_frames": self.failed_frames, "last_engine_error": self.last_error}

    def verdict(self, *, engine_running: bool, control_running: bool, active: bool, stale: bool,
                targets_missed: Optional[str], deadline_misses: int,
                counters: Mapping[str, int], refused: str = "",
                control_silent_s: Optional[float] = None,
                stuck: Optional[str] = None) -> tuple[str, str]:
        """targets_missed: what the machine can deliver when it cannot meet the targets;
        refused: why admission refused the robot ("": served); control_silent_s: how long
        the running control process has not reported, once overdue; stuck: why the engine's
        current frame counts as stuck (stuck_frame)."""
        counters = dict(counters)      # one copy: callbacks on other threads add keys
        problems = Counter({k: n for k, n in counters.items() if k in PROBLEMS},
                           deadline_misses=deadline_misses)
        new_problems, self._reported_problems = problems - self._reported_problems, problems
        failures, self._reported_failures = (self.failed_frames - self._reported_failures,
                                             self.failed_frames)
        if not engine_running:
            return "ERROR", "engine thread stopped"
        if refused:
            return "ERROR", refused
        if not control_running:
            return "ERROR", "control process stopped: no commands"
        if control_silent_s is not None:
            return "ERROR", (f"control process silent for {control_silent_s:.1f} s: its "
                             "commands are unknown")
        if failures:
            return "ERROR", f"{failures} engine frames failed: {self.last_error}"
        if stuck:
            return "ERROR", stuck
        if not active:
            return "OK", "inactive: no commands"
        named = ", ".join(f"{n} {kind}" for kind, n in sorted(new_problems.items()))
        if stale:    # with the problems of the period: bad input that dropped them, if any
            return "ERROR", "no fresh observations: actions stopped" + (
                f" ({named} in this period)" if named else "")
        if targets_missed is not None:
            return "WARN", f"real-time targets cannot be met: {targets_missed}"
        if new_problems:
            return "WARN", named
        return "OK", "ok"


def stuck_frame(running_s: Optional[float], recent_s: Sequence[float],
                horizon_s: float) -> Optional[str]:
    """Why the engine thread's frame in progress, `running_s` old (None: none is), counts as
    stuck — it has run longer than a whole plan (horizon_s) and STUCK_FACTOR times the
    longest of the recent frames (`recent_s`): a frame that hangs rather than raises — or
    None."""
    longest = max(recent_s, default=0.0)
    if running_s is None or running_s <= max(horizon_s, STUCK_FACTOR * longest):
        return None
    return (f"an engine frame has run for {running_s:.1f} s (the longest of the last "
            f"{len(recent_s)} took {longest:.2f} s): no new chunk meanwhile, the commands "
            "repeat the last step of the plan in force")


def real_time_report(engine, timing, counters: Mapping[str, int], frame_starts: Iterable[float],
                     chunk_latencies: Iterable[float], torch_threads: int) -> dict:
    """One robot's real-time contract in numbers (timing: its FrameTiming; counters: its
    own), as /diagnostics and the demo summary give it."""
    capacity = timing.capacity()
    commands, held = counters["commands"], counters["held_commands"]
    starts = list(frame_starts)
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    latencies = list(chunk_latencies)
    report = {
        "frame_period_s": engine.config.frame_period_s,
        "frame_period_s_measured": percentile(gaps, 50) if gaps else 0.0,
        "deadline_misses": counters["deadline_misses"],
        "commands": commands,
        "held_commands": held,
        "held_command_fraction": held / commands if commands else 0.0,
        "chunk_latency_ms_p50": percentile(latencies, 50) * 1e3 if latencies else 0.0,
        "chunk_latency_ms_max": max(latencies) * 1e3 if latencies else 0.0,
        "action_path_ms_p95": timing.action_path_p95() * 1e3,
        "language_floor": engine.config.language_floor,
        "torch_threads": torch_threads,
        "chunk_switch": engine.config.chunk_switch,
    }
    if capacity is not None:
        report |= {
            "predicted_frame_period_s": capacity.frame_period_s,
            "predicted_held_fraction": capacity.predicted_held_fraction,
            "language_share": capacity.language_share,
            "chunk_age_ms": capacity.chunk_age_s * 1e3,
            "meets_targets": capacity.meets_targets,
        }
    return report


def longest_gap(times: Sequence[float], since: float) -> float:
    """The longest interval between consecutive times that ends after `since` (0 with fewer
    than two times): how late the control timer ran, as the node itself saw it."""
    return max((b - a for a, b in zip(times, times[1:]) if b > since), default=0.0)


# a robot's share of the engine's counters, in its status
ROBOT_COUNTERS = ("timed_out_requests", "rejected_requests",
                  "truncated_requests",         # over max_request_tokens
                  "truncated_instructions",     # over max_prompt_tokens
                  "cancelled_requests", "kv_full_requests", "rtc_chunks", "rtc_late_switches")


def robot_values(engine, robot: str) -> dict:
    """One robot's requests (OxygenEngine.requests_of) and its share of the engine's
    counters, for its /diagnostics status."""
    share = engine.robot_of(robot).counters
    return engine.requests_of(robot) | {key: share[key] for key in ROBOT_COUNTERS}


def engine_values(engine) -> dict:
    """The KV pool and the engine's counters that no one robot owns, for /diagnostics."""
    pool = engine.cache.pool
    return {
        "kv_pages_in_use": pool.used_pages,
        "kv_pages_total": pool.num_pages,
        "kv_bytes_in_use": pool.bytes_in_use,
        "kv_bytes_peak": pool.peak_bytes,
        "frames": engine.counters["frames"],
        "language_tokens": engine.counters["tokens"],
        "preemptions": engine.counters["preemptions"],
        "throttled_frames": engine.counters["throttled_frames"],
        "robots_shed": engine.counters["robots_shed"],            # admission at run time
        "robots_readmitted": engine.counters["robots_readmitted"],
        "compiled_calls_run_eager": engine.model.eager_calls,     # torch_compile on a CPU
    } | kv_bytes_by_owner(pool)


KV_OWNERS = ("prefix", "dialogue", "memory")   # always in /diagnostics, 0 when none


def kv_bytes_by_owner(pool) -> dict:
    """kv_bytes_<owner>: the pool's bytes per owner, each of KV_OWNERS always (a monitor
    sees 0, not a gap) and any other owner while it holds pages."""
    held = pool.bytes_by_owner()
    return {f"kv_bytes_{owner}": held.pop(owner, 0) for owner in KV_OWNERS} | {
        f"kv_bytes_{owner}": n for owner, n in held.items()}
