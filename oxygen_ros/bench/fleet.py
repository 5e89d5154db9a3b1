"""bench-fleet: N demo robots served by one fleet server against N single-robot servers
(separate processes, each with its own model, as N launch files would start them) on the
same machine, for N = 1, 2, 4, 8, the two modes interleaved. Each run is the main job
(demo_job.py) with N robots: per robot, commands Hz, held fraction, deadline misses, chunk
latency, answers; per run, language tokens/s, KV peak, the servers' peak RSS. A robot is
at targets when it is served (not refused), holds at most 2 % of its commands, misses no
deadline and has every request answered whole (eos or length). The headline, per mode:
the most robots it kept at targets in one run (max_robots_at_targets), and the largest N
with every robot at targets (largest_fleet_all_at_targets). Then one more fleet run of N
robots (default 4) whose last robot's camera_ingest is killed half a bag after its first
command: how the others fare (camera_killed)."""

import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional

from oxygen_ros.bench.report import pyplot, save_figure
from oxygen_ros.engine.request import COMPLETED
from oxygen_ros.ros.demo_job import DemoJob, run_robots
from oxygen_ros.ros.demo_summary import refusals

MODES = ("fleet", "separate")
HELD_TARGET = 0.02
PER_ROBOT = ("commands_hz", "fresh_commands_hz", "held_command_fraction", "deadline_misses",
             "chunk_latency_ms_p50", "chunk_latency_ms_max", "chunk_age_ms", "action_path_ms_p95",
             "dialogue_answers", "dialogue_endings", "dialogue_requests", "answer_accuracy",
             "memory_accuracy", "action_error", "refused", "times_shed", "camera_killed")


@dataclass
class FleetRun:
    mode: str
    robots: int
    per_robot: dict = field(default_factory=dict)     # robot -> PER_ROBOT values
    tokens_per_s: float = 0.0
    kv_bytes_peak: int = 0
    rss_bytes: int = 0
    wall_s: float = 0.0
    robots_at_targets: int = 0
    at_targets: bool = False          # every robot
    camera_killed_at_s: Optional[float] = None   # the last robot's cameras died then


def whole_answers(robot: dict) -> int:
    """Answers that ended whole (eos or length); one cut short by a timeout, a full queue or
    the robot's refusal is not an answer."""
    return sum(robot["dialogue_endings"].get(reason, 0) for reason in COMPLETED)


def robot_at_targets(robot: dict) -> bool:
    """Served, held ≤ 2 %, no deadline miss, commands out, every request answered whole."""
    return (not robot["refused"] and (robot["held_command_fraction"] or 0.0) <= HELD_TARGET
            and not robot["deadline_misses"] and robot["commands_hz"] > 0
            and whole_answers(robot) >= (robot["dialogue_requests"] or 0))


def at_targets(per_robot: dict) -> bool:
    return all(robot_at_targets(robot) for robot in per_robot.values())


def measure(mode: str, robots: int, ros_args: list, seed: int, duration_s: float,
            memory_period_s: float, camera_killed_at_s: Optional[float] = None) -> FleetRun:
    started = time.monotonic()
    # bag None: fresh bags of worlds seed .. seed+N-1 each run, scored against their worlds
    summaries, rss = run_robots(DemoJob(ros_args, None, seed, duration_s, None,
                                        memory_period_s, robots, separate=mode == "separate",
                                        live=False, camera_killed_at_s=camera_killed_at_s))
    run = FleetRun(mode, robots, rss_bytes=rss, wall_s=time.monotonic() - started,
                   camera_killed_at_s=camera_killed_at_s)
    run.per_robot = {name: {key: s.get(key) for key in PER_ROBOT}
                     for name, s in summaries.items()}
    # one engine (fleet) or one per robot (separate): its language tokens and KV peak
    engines = list(summaries.values())[:1] if mode == "fleet" else summaries.values()
    run.tokens_per_s = sum(s["language_tokens"] or 0 for s in engines) / duration_s
    run.kv_bytes_peak = sum(s["kv_bytes_peak"] or 0 for s in engines)
    run.robots_at_targets = sum(robot_at_targets(r) for r in run.per_robot.values())
    run.at_targets = at_targets(run.per_robot)
    return run


def run(counts=(1, 2, 4, 8), ros_args: Optional[list] = None, seed: int = 0,
        duration_s: float = 8.0, memory_period_s: float = 4.0, camera_killed: int = 4,
        progress: Optional[Callable[[FleetRun], None]] = None) -> dict:
    """Both modes for each N, interleaved (fleet then separate at each N); then, unless
    camera_killed is 0, the fleet of that many with the last robot's camera killed half
    a bag after its first command."""
    runs = []
    for count in counts:
        for mode in MODES:
            runs.append(measure(mode, count, ros_args or [], seed, duration_s, memory_period_s))
            if progress:
                progress(runs[-1])
    if camera_killed:
        runs.append(measure("fleet", camera_killed, ros_args or [], seed, duration_s,
                            memory_period_s, camera_killed_at_s=duration_s / 2))
        if progress:
            progress(runs[-1])
    return result(runs)


def others(run: FleetRun) -> dict:
    """A camera-killed run, over the robots whose cameras lived: the slowest fresh-command
    rate, how many kept their targets, their answers (and how many were right)."""
    rows = [r for r in run.per_robot.values() if not r["camera_killed"]]
    return {"robots": run.robots, "killed_at_s": run.camera_killed_at_s,
            "others_fresh_commands_hz_min": min((r["fresh_commands_hz"] or 0.0 for r in rows),
                                                default=0.0),
            "others_at_targets": sum(map(robot_at_targets, rows)), "others": len(rows),
            "others_answers": sum(map(whole_answers, rows)),
            "others_requests": sum(r["dialogue_requests"] or 0 for r in rows),
            "others_answer_accuracy": _average([r["answer_accuracy"] for r in rows]),
            "others_memory_accuracy": _average([r["memory_accuracy"] for r in rows])}


def _average(values: list) -> Optional[float]:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def result(all_runs: list) -> dict:
    runs = [r for r in all_runs if r.camera_killed_at_s is None]
    killed = [others(r) for r in all_runs if r.camera_killed_at_s is not None]
    best = {mode: max([r.robots_at_targets for r in runs if r.mode == mode], default=0)
            for mode in MODES}
    whole = {mode: max([r.robots for r in runs if r.mode == mode and r.at_targets], default=0)
             for mode in MODES}
    by = {(r.mode, r.robots): r for r in runs}
    ratios = {}
    if ("fleet", 4) in by and ("fleet", 1) in by:
        one = _mean(by[("fleet", 1)], "action_path_ms_p95")
        ratios["fleet_action_path_4_vs_1"] = _mean(by[("fleet", 4)], "action_path_ms_p95") / one
        ratios["fleet_rss_4_vs_1"] = by[("fleet", 4)].rss_bytes / by[("fleet", 1)].rss_bytes
    if ("fleet", 4) in by and ("separate", 4) in by:
        ratios["separate_rss_4_vs_fleet_4"] = (by[("separate", 4)].rss_bytes
                                               / by[("fleet", 4)].rss_bytes)
    return {"max_robots_at_targets": best, "largest_fleet_all_at_targets": whole,
            "fleet_vs_separate_robots": (best["fleet"] / best["separate"]
                                         if best["separate"] else None),
            "ratios": ratios, "camera_killed": killed[0] if killed else None,
            "runs": [asdict(r) for r in all_runs]}


def _mean(run: FleetRun, key: str) -> float:
    values = [r[key] for r in run.per_robot.values() if r[key] is not None and not r["refused"]]
    return sum(values) / len(values) if values else float("nan")


def _worst(run: FleetRun, key: str, pick=max) -> float:
    values = [r[key] or 0 for r in run.per_robot.values()]
    return pick(values) if values else float("nan")


def line(run: FleetRun) -> str:
    refused, shed, _ = refusals(run.per_robot.values())
    answers = sum(map(whole_answers, run.per_robot.values()))
    requests = sum(r["dialogue_requests"] or 0 for r in run.per_robot.values())
    killed = (f", camera of robot_{run.robots - 1} killed at {run.camera_killed_at_s:g} s"
              if run.camera_killed_at_s is not None else "")
    return (f"{run.mode:>8} N={run.robots}{killed}: commands ≥ "
            f"{_worst(run, 'commands_hz', min):5.1f} Hz, held ≤ "
            f"{_worst(run, 'held_command_fraction'):.3f}, misses "
            f"{sum(r['deadline_misses'] or 0 for r in run.per_robot.values())}, refused "
            f"{refused} at start-up, shed {shed}, answers {answers}/{requests}, chunk latency "
            f"p50 {_mean(run, 'chunk_latency_ms_p50'):.0f} ms, action path p95 "
            f"{_mean(run, 'action_path_ms_p95'):.0f} ms, tokens/s {run.tokens_per_s:.0f}, "
            f"KV peak {run.kv_bytes_peak / 2**20:.1f} MiB, RSS {run.rss_bytes / 2**20:.0f} MiB"
            f" — {run.robots_at_targets}/{run.robots} at targets")


def table(data: dict) -> str:
    rows = [line(FleetRun(**r)) for r in data["runs"]]
    killed = data.get("camera_killed")
    if killed:
        rows.append(f"robot_{killed['robots'] - 1}'s camera killed at {killed['killed_at_s']:g} s:"
                    f" the other {killed['others']} kept ≥ "
                    f"{killed['others_fresh_commands_hz_min']:.1f} Hz fresh commands, "
                    f"{killed['others_at_targets']}/{killed['others']} at targets, answers "
                    f"{killed['others_answers']}/{killed['others_requests']}")
    best, whole = data["max_robots_at_targets"], data["largest_fleet_all_at_targets"]
    rows.append(f"most robots at targets: fleet {best['fleet']}, separate {best['separate']}; "
                f"largest N all at targets: fleet {whole['fleet']}, separate "
                f"{whole['separate']}" + "".join(f"; {k} {v:.2f}"
                                                  for k, v in data["ratios"].items()))
    return "\n".join(rows)


def plot(data: dict, path: str) -> None:
    plt = pyplot()
    figure, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for mode, style in zip(MODES, ("o-", "s--")):
        runs = [FleetRun(**r) for r in data["runs"]
                if r["mode"] == mode and r["camera_killed_at_s"] is None]
        counts = [r.robots for r in runs]
        axes[0].plot(counts, [_worst(r, "held_command_fraction") for r in runs], style,
                     label=mode)
        axes[1].plot(counts, [_mean(r, "chunk_latency_ms_p50") for r in runs], style,
                     label=mode)
        axes[2].plot(counts, [r.rss_bytes / 2**20 for r in runs], style, label=mode)
    axes[0].axhline(HELD_TARGET, color="gray", lw=0.8)
    counts = sorted({r["robots"] for r in data["runs"]})
    for axis, title in zip(axes, ("worst held fraction", "chunk latency p50 (ms)",
                                  "servers' peak RSS (MiB)")):
        axis.set_xlabel("robots")
        axis.set_xticks(counts)
        axis.set_title(title)
        axis.legend()
    save_figure(figure, path)
