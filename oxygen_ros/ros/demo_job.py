"""The main job (`oxygen-ros demo`, `make run`): camera_ingest and inference each in its
own process as the launch file runs them, a bag replayed through them from a third, and
the outputs watched like a user's subscriber: live stats, a summary line, a summary JSON."""

import json
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.signals import SignalHandlerOptions

from oxygen_ros.demo import score
from oxygen_ros.ros.bag import DemoBagSpec, write_demo_bag
from oxygen_ros.ros.monitor import OutputMonitor
from oxygen_ros.ros.node_processes import start_nodes, stop_children
from oxygen_ros.ros.run_node import ignore_stop_signals, install_stop_signals, spin_until

INFERENCE_STATUS = "oxygen_ros: inference"
DEFAULT_DEMO_BAG = "build/demo_bag"
SUMMARY_FROM_DIAGNOSTICS = (
    "frames", "deadline_misses", "commands", "held_commands", "held_command_fraction",
    "chunk_latency_ms_p50", "chunk_latency_ms_max", "action_path_ms_p95", "frame_period_s",
    "frame_period_s_measured", "predicted_frame_period_s", "predicted_held_fraction",
    "language_share", "chunk_age_ms", "language_floor", "language_tokens",
    "dialogue_requests", "timed_out_requests", "rejected_requests", "torch_threads",
    "kv_bytes_peak", "meets_targets", "chunk_switch", "rtc_chunks", "rtc_late_switches")


@dataclass
class DemoJob:
    ros_args: list            # --params-file and -p overrides for both nodes
    bag: Optional[str]        # an existing bag to replay as it is; None: the demo bag
    seed: int = 0
    duration_s: float = 12.0
    summary_path: Optional[str] = None
    memory_period_s: float = 4.0   # the nodes' memory_period_s: the scored windows


class DemoProgress:
    """One line of live stats per second (from what the monitor receives: commands, chunks,
    text, the inference node's /diagnostics), each finished answer once; ends the demo once
    the replay has ended and every request is answered (at most `drain_s` later)."""

    def __init__(self, monitor, replay, drain_s: float = 30.0):
        self.monitor, self.replay = monitor, replay
        self.drain_s = drain_s
        self.shown = 0
        self.replay_ended_at = None
        self.final_diagnostics = 0

    def __call__(self, elapsed: float) -> bool:
        monitor = self.monitor
        diag = monitor.diagnostics.get(INFERENCE_STATUS, {})
        print(f"[{elapsed:5.1f}s] actions {monitor.command_rate():5.1f} Hz (held "
              f"{diag.get('held_command_fraction', '-')}) | chunks {monitor.chunks:3d} | "
              f"chunk latency p50 {diag.get('chunk_latency_ms_p50', '-')} ms | deadline "
              f"misses {diag.get('deadline_misses', '-')} | tokens/s "
              f"{diag.get('tokens_per_s', '-')} | KV pages {diag.get('kv_pages_in_use', '-')}"
              f" | dialogue done {len(monitor.finished_dialogue)} | memory "
              f"{len(monitor.summaries)}", flush=True)
        for request_id, text in monitor.finished_dialogue[self.shown:]:
            print(f"          dialogue {request_id}: {text[:70]!r}", flush=True)
        self.shown = len(monitor.finished_dialogue)
        if self.replay.poll() is None:
            return True
        self.replay_ended_at = self.replay_ended_at or elapsed
        waited = elapsed - self.replay_ended_at
        answered = (diag.get("pending_requests") == "0"
                    and len(monitor.finished_dialogue) >= int(diag.get("dialogue_requests", 0)))
        if answered and waited >= 1.0:
            self.final_diagnostics += 1   # one more /diagnostics period: the final counters
        return self.final_diagnostics < 2 and waited < self.drain_s


def _diagnostic_value(text: Optional[str]):
    if text is None:
        return None
    if text in ("True", "False"):
        return text == "True"
    try:
        return float(text) if "." in text else int(text)
    except ValueError:
        return text                 # a name, e.g. chunk_switch


def demo_summary(monitor) -> dict:
    """What a user judges the demo by, as an outside subscriber sees it: command rate as
    received, answers and summaries received, and the inference node's final
    /diagnostics (held commands, deadline misses, latencies, predictions)."""
    times = list(monitor.command_times)
    diag = monitor.diagnostics.get(INFERENCE_STATUS, {})
    return {
        "commands_hz": (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0,
        "commands_received": len(times),
        "action_chunks": monitor.chunks,
        "dialogue_answers": len(monitor.finished_dialogue),
        "memory_summaries": len(monitor.summaries),
    } | {key: _diagnostic_value(diag.get(key)) for key in SUMMARY_FROM_DIAGNOSTICS}


def _number(value, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _scored(summary: dict, key: str, rows: str) -> str:
    """e.g. "0.67 (4/6)": an accuracy and the right / scored rows it comes from."""
    right = sum(row["correct"] for row in summary[rows])
    return f"{_number(summary[key])} ({right}/{len(summary[rows])})"


def summary_line(summary: dict) -> str:
    return (f"summary: {summary['frames']} frames, {summary['action_chunks']} action chunks, "
            f"{summary['commands_received']} commands ({summary['commands_hz']:.1f} Hz, "
            f"held fraction {summary['held_command_fraction']}), "
            f"{summary['deadline_misses']} deadline misses, chunk latency p50 "
            f"{summary['chunk_latency_ms_p50']} ms, {summary['language_tokens']} language "
            f"tokens, {summary['dialogue_answers']}/{summary['dialogue_requests']} dialogue "
            f"answers, {summary['memory_summaries']} memory summaries, "
            f"{summary['torch_threads']} torch threads"
            + (f"; answer accuracy {_scored(summary, 'answer_accuracy', 'answers')}, "
               f"memory accuracy {_scored(summary, 'memory_accuracy', 'memory')}, "
               f"action error {_number(summary['action_error'], 3)}"
               if "answer_accuracy" in summary else ""))


def _forward_replay_output(replay, clock: dict) -> None:
    """Echo the replay's lines; keep the wall time of bag time 0 it reports."""
    for line in replay.stdout:
        print(line, end="", flush=True)
        if line.startswith("replay clock:"):
            clock["bag_zero_wall"] = float(line.rsplit(" ", 1)[1])


def _prepare_bag(job: DemoJob) -> tuple[Path, Optional[DemoBagSpec]]:
    """The bag to replay, and the spec of its world when the outputs are to be scored: a
    fresh bag of --seed's world unless an existing bag was named."""
    bag = Path(job.bag or DEFAULT_DEMO_BAG)
    if bag.exists() and job.bag:
        return bag, None
    import shutil
    shutil.rmtree(bag, ignore_errors=True)
    spec = DemoBagSpec(duration_s=job.duration_s, seed=job.seed)
    write_demo_bag(bag, spec)
    print(f"wrote demo bag {bag} (world {job.seed})", flush=True)
    return bag, spec


def run_demo(job: DemoJob) -> int:
    bag, spec = _prepare_bag(job)
    nodes = start_nodes(job.ros_args)
    rclpy.init(args=["oxygen-ros-demo"], signal_handler_options=SignalHandlerOptions.NO)
    stop = install_stop_signals()   # Ctrl-C reaches the nodes too: they stop cleanly
    monitor = OutputMonitor()
    # the replay starts once both nodes subscribe (the model loads and calibrates first)
    replay = subprocess.Popen([sys.executable, "-m", "oxygen_ros.cli", "replay", str(bag),
                               "--restamp", "--wait-for-subscribers", "120", "--delay", "0.5"],
                              stdout=subprocess.PIPE, text=True)
    clock: dict = {}
    threading.Thread(target=_forward_replay_output, args=(replay, clock), daemon=True).start()
    executor = SingleThreadedExecutor()
    executor.add_node(monitor)
    try:
        spin_until(executor, stop, every_second=DemoProgress(monitor, replay))
    finally:
        ignore_stop_signals()
        stop_children([replay], grace_s=5.0)
        stop_children(nodes)
        _report(job, monitor, spec, clock.get("bag_zero_wall"))
        executor.shutdown()
        monitor.destroy_node()
        rclpy.try_shutdown()
    return 0 if monitor.chunks > 0 and monitor.command_times else 1


def _params_file(ros_args: list) -> Optional[str]:
    return next((ros_args[i + 1] for i, arg in enumerate(ros_args[:-1])
                 if arg == "--params-file"), None)


def _report(job: DemoJob, monitor, spec: Optional[DemoBagSpec],
            bag_zero_wall: Optional[float]) -> None:
    summary = demo_summary(monitor) | {"params_file": _params_file(job.ros_args),
                                        "memory_period_s": job.memory_period_s}
    if spec is not None:
        summary |= score.score_run(spec.seed, spec.duration_s, spec.camera_hz, job.memory_period_s,
                                   dict(monitor.finished_dialogue), monitor.dialogue_stamps,
                                   monitor.summaries, monitor.commands, bag_zero_wall)
        for line in score.answer_lines(summary["answers"]):
            print(line, flush=True)
    print(summary_line(summary), flush=True)
    if job.summary_path:
        Path(job.summary_path).parent.mkdir(parents=True, exist_ok=True)
        Path(job.summary_path).write_text(json.dumps(summary, indent=2) + "\n")
        print(f"wrote {job.summary_path}", flush=True)
