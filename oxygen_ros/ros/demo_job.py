"""The main job (`oxygen-ros demo`, `make run`): camera_ingest and inference each in its
own process as the launch file runs them, a bag replayed through them from a third, and
the outputs watched like a user's subscriber: live stats, a summary line, a summary JSON.

With several robots (`--robots N`): N tabletop worlds (seeds seed, seed+1, …), N robots
robot_0 … robot_N-1, each with its camera_ingest under /robot_i (as `humanoid.launch.py
namespace:=robot_i inference:=remote` runs it) and its bag replayed under /robot_i/, one
inference process serving them all (`robots`, as fleet.launch.py); a summary per robot
and a fleet line. `camera_killed_at_s`: the last robot's camera_ingest is killed that long
after the robot's first command, as a robot whose cameras die mid-run: the others must not
notice."""

import json
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.signals import SignalHandlerOptions

from oxygen_ros.demo import score
from oxygen_ros.process_memory import peak_rss_bytes
from oxygen_ros.ros import launch_plan, rcl_yaml
from oxygen_ros.ros.demo_bag import DemoBagSpec, write_demo_bag
from oxygen_ros.ros.demo_summary import (answered, demo_summary, fleet_line,
                                         missing_outputs, summary_line)
from oxygen_ros.ros.monitor import OutputMonitor
from oxygen_ros.ros.node_processes import (node_command, params_file, run_config, start_ingests,
                                           start_nodes, stop_children)
from oxygen_ros.ros.run_node import ignore_stop_signals, install_stop_signals, spin_until

DEFAULT_DEMO_BAG = "build/demo_bag"
READY_S = 300.0     # until every server reports: N separate servers load and calibrate
REPLAY_WAIT_S = 60  # a replay waits this long for its subscribers


@dataclass
class DemoJob:
    ros_args: list            # --params-file and -p overrides for both nodes
    bag: Optional[str]        # an existing bag to replay as it is; None: the demo bag
    seed: int = 0
    duration_s: float = 12.0
    summary_path: Optional[str] = None
    memory_period_s: float = 4.0   # the nodes' memory_period_s: the scored windows
    robots: int = 1                # several: one inference process serves them all
    separate: bool = False         # instead one inference process per robot (bench-fleet)
    live: bool = True              # live stats each second, answers, summary lines
    camera_killed_at_s: Optional[float] = None   # after the last robot's first command
    commands: bool = True          # the nodes publish commands (not a dry run)
    params_file: Optional[str] = None   # the summary's YAML; None: ros_args's
    overrides: Optional[dict] = None    # the summary's -p options: node -> name -> value

    def robot_names(self) -> list[str]:
        """robot_0, robot_1, …; one robot has no name (no namespace) unless separate or
        quiet (bench-fleet: the same names in every mode)."""
        if self.robots == 1 and not self.separate and self.live:
            return [""]
        return launch_plan.demo_robot_names(self.robots)


class DemoProgress:
    """One line of live stats per second per robot (from what its monitor receives:
    commands, chunks, text, its /diagnostics status), each finished answer once; ends the
    demo once every replay has ended and every request is answered (at most `drain_s`
    later)."""

    def __init__(self, monitors, replays, drain_s: float = 30.0, live: bool = True,
                 replay_limit_s: float = float("inf")):
        self.monitors, self.replays, self.live = monitors, replays, live
        self.replay_limit_s = replay_limit_s   # a replay still running then is stuck
        self.drain_s = drain_s
        self.shown = [0] * len(monitors)
        self.replay_ended_at = None
        self.final_diagnostics = 0

    def __call__(self, elapsed: float) -> bool:
        for index, monitor in enumerate(self.monitors if self.live else ()):
            diag = monitor.diagnostics.get(monitor.status_name, {})
            name = f"{monitor.robot}: " if monitor.robot else ""
            print(f"[{elapsed:5.1f}s] {name}actions {monitor.command_rate():5.1f} Hz (held "
                  f"{diag.get('held_command_fraction', '-')}) | chunks {monitor.chunks:3d} | "
                  f"chunk latency p50 {diag.get('chunk_latency_ms_p50', '-')} ms | deadline "
                  f"misses {diag.get('deadline_misses', '-')} | tokens/s "
                  f"{diag.get('tokens_per_s', '-')} | KV pages {diag.get('kv_pages_in_use', '-')}"
                  f" | dialogue done {len(monitor.finished_dialogue)} | memory "
                  f"{len(monitor.summaries)}", flush=True)
            for request_id, text in monitor.finished_dialogue[self.shown[index]:]:
                ended = score.ending(monitor.finish_reasons.get(request_id))
                print(f"          {name}dialogue {request_id}: {text[:70]!r}{ended}", flush=True)
            self.shown[index] = len(monitor.finished_dialogue)
        if elapsed < self.replay_limit_s and any(r.poll() is None for r in self.replays):
            return True
        self.replay_ended_at = self.replay_ended_at or elapsed
        waited = elapsed - self.replay_ended_at
        if all(answered(monitor) for monitor in self.monitors) and waited >= 1.0:
            self.final_diagnostics += 1   # one more /diagnostics period: the final counters
        return self.final_diagnostics < 2 and waited < self.drain_s


def _forward_replay_output(replay, clock: dict, key: str, echo: bool,
                           ready: threading.Event) -> None:
    """Echo the replay's lines (when `echo`); set `ready` when it waits to start; keep the
    wall time of bag time 0 it reports."""
    for line in replay.stdout:
        if line.startswith("ready:"):
            ready.set()
            continue
        if echo:
            print(line, end="", flush=True)
        if line.startswith("replay clock:"):
            clock[key] = float(line.rsplit(" ", 1)[1])


def _prepare_bag(job: DemoJob, index: int) -> tuple[Path, Optional[DemoBagSpec]]:
    """Robot `index`'s bag to replay, and the spec of its world when the outputs are to be
    scored: a fresh bag of world seed + index unless an existing bag was named."""
    bag = Path(job.bag or DEFAULT_DEMO_BAG)
    if bag.exists() and job.bag:
        return bag, None
    if job.robots > 1:
        bag = bag.with_name(f"{bag.name}_robot_{index}")
    import shutil
    shutil.rmtree(bag, ignore_errors=True)
    spec = DemoBagSpec(duration_s=job.duration_s, seed=job.seed + index)
    write_demo_bag(bag, spec)
    if job.live:
        print(f"wrote demo bag {bag} (world {spec.seed})", flush=True)
    return bag, spec


def start_servers(ros_args: list, robots: list[str], directory: Path, separate: bool = False,
                  output=None) -> list:
    """One inference process serving the robots (separate: one per robot, as N launch
    files would start them). A renamed node finds its YAML section under its own name
    (launch_plan.with_overrides; the file's key would not reach it)."""
    if not separate:
        return [subprocess.Popen(node_command("inference", "inference_node") + ros_args
                                 + ["-p", f"robots:=[{', '.join(robots)}]"],
                                 stdout=output, stderr=output)]
    config, overrides = run_config(ros_args), _overrides(ros_args)
    servers = []
    for robot in robots:
        server_yaml = directory / f"inference_{robot}.yaml"
        server_yaml.write_text(launch_plan.with_overrides(
            config, {"inference": overrides | {"robots": [robot]}},
            {"inference": f"/inference_{robot}"}))
        servers.append(subprocess.Popen(
            node_command("inference", "inference_node")
            + ["--ros-args", "--params-file", str(server_yaml),
               "-r", f"__node:=inference_{robot}"], stdout=output, stderr=output))
    return servers


def _overrides(ros_args: list) -> dict:
    """The inference node's -p inference:NAME:=VALUE overrides, typed as rcl types them."""
    found = {}
    for flag, item in zip(ros_args, ros_args[1:]):
        target, sep, value = item.partition(":=")
        if flag == "-p" and sep and target.startswith("inference:"):
            found[target.removeprefix("inference:")] = rcl_yaml.load(value)
    return found


class StartFailed(RuntimeError):
    """A node process of the run exited before it reported: nothing was replayed."""


def run_demo(job: DemoJob) -> int:
    """0 when every robot got action chunks and (unless a dry run) commands; else 1, saying
    what was missing or which process exited before it reported."""
    try:
        summaries, _ = run_robots(job)
    except StartFailed as error:
        print(f"oxygen-ros demo: {error}", file=sys.stderr, flush=True)
        return 1
    missing = missing_outputs(summaries, job.commands)
    if missing:
        print(f"oxygen-ros demo: {'; '.join(missing)}", file=sys.stderr, flush=True)
    return 1 if missing else 0


def run_robots(job: DemoJob) -> tuple[dict, int]:
    """Run the job: each robot's summary (by name) and the inference processes' peak
    resident memory, together (bytes). StartFailed when a node process exits before it
    reports (nothing is replayed or summarized)."""
    robots = job.robot_names()
    bags = [_prepare_bag(job, index) for index in range(len(robots))]
    params = tempfile.TemporaryDirectory(prefix="oxygen-fleet-")   # robots' YAMLs
    rclpy.init(args=["oxygen-ros-demo"], signal_handler_options=SignalHandlerOptions.NO)
    stop = install_stop_signals()   # Ctrl-C reaches the nodes too: they stop cleanly
    monitors = [OutputMonitor(robot) for robot in robots]
    executor = SingleThreadedExecutor()
    for monitor in monitors:
        executor.add_node(monitor)
    clock: dict = {}
    replays: list = []
    servers: list = []
    ingests: list = []
    finished = threading.Event()
    deadline = time.monotonic() + READY_S
    started = False

    def wait_for(names: list[str]) -> None:
        while (not stop.is_set() and time.monotonic() < deadline
               and not all(name in monitors[0].diagnostics for name in names)):
            _check_running(ingests, servers, robots, job.live)
            executor.spin_once(timeout_sec=0.1)
    try:
        if robots == [""]:    # as humanoid.launch.py runs one robot
            ingest, inference = start_nodes(job.ros_args)
            servers, ingests = [inference], [ingest]
        else:
            # the robots' camera_ingest first: the server calibrates on a machine at rest
            output = None if job.live else subprocess.DEVNULL
            ingests = start_ingests(job.ros_args, robots, Path(params.name), output,
                                    (job.overrides or {}).get("camera_ingest", {}))
            wait_for([f"oxygen_ros: camera_ingest/{robot}" for robot in robots])
            servers = start_servers(job.ros_args, robots, Path(params.name), job.separate,
                                    output)
        # the replays start together once every robot's server reports (models loaded and
        # calibrated): a robot's numbers do not include another server's start-up
        wait_for([monitor.status_name for monitor in monitors])
        started = True
        if job.camera_killed_at_s is not None:
            threading.Thread(target=_kill_when_served, daemon=True,
                             args=(ingests[-1], monitors[-1], job.camera_killed_at_s,
                                   finished)).start()
        ready = []
        for robot, (bag, _) in zip(robots, bags):
            replays.append(subprocess.Popen(
                [sys.executable, "-m", "oxygen_ros.cli", "replay", str(bag), "--restamp",
                 "--wait-for-subscribers", str(REPLAY_WAIT_S), "--delay", "0.5",
                 "--namespace", robot, "--start-on-stdin"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
            ready.append(threading.Event())
            threading.Thread(target=_forward_replay_output, daemon=True,
                             args=(replays[-1], clock, robot, job.live, ready[-1])).start()
        _start_together(replays, ready, executor, stop)
        # each bag's length, the replay's own wait for subscribers, and a margin
        limit = job.duration_s + REPLAY_WAIT_S + 30.0
        spin_until(executor, stop, every_second=DemoProgress(
            monitors, replays, live=job.live, replay_limit_s=limit))
    finally:
        ignore_stop_signals()
        finished.set()
        rss = sum(peak_rss_bytes(server.pid) for server in servers)
        stop_children(replays, grace_s=5.0)
        stop_children(servers + ingests)
        summaries = _report(job, monitors, [spec for _, spec in bags], clock) if started \
            else {}
        executor.shutdown()
        for monitor in monitors:
            monitor.destroy_node()
        rclpy.try_shutdown()
        params.cleanup()
    return summaries, rss


def _start_together(replays: list, ready: list, executor, stop: threading.Event) -> None:
    """Start the replays' first messages at once, when each is ready (its subscribers
    found; on a loaded machine one can take seconds longer to start than another), or
    when one has ended, or after REPLAY_WAIT_S and a margin."""
    deadline = time.monotonic() + REPLAY_WAIT_S + 30.0
    while not (all(r.is_set() for r in ready) or stop.is_set()
               or time.monotonic() > deadline
               or any(replay.poll() is not None for replay in replays)):
        executor.spin_once(timeout_sec=0.05)
    for replay in replays:
        try:
            replay.stdin.write("\n")
            replay.stdin.close()
        except OSError:       # it has ended
            pass


def _check_running(ingests: list, servers: list, robots: list[str], live: bool) -> None:
    """StartFailed naming the first node process that has exited (while waiting for the
    nodes to report, none should)."""
    named = [(ingest, "camera_ingest" + (f" of {robot}" if robot else ""))
             for ingest, robot in zip(ingests, robots)]
    named += [(server, "inference" if len(servers) == 1 else f"inference_{robot}")
              for server, robot in zip(servers, robots)]
    for process, name in named:
        if process.poll() is not None:
            raise StartFailed(
                f"{name} (pid {process.pid}) exited with code {process.returncode} before "
                "it reported, so nothing was replayed" + (
                    ": its error is printed above" if live else
                    "; `oxygen-ros demo` with the same options prints its error"))


def _kill_when_served(ingest: subprocess.Popen, monitor, after_s: float,
                      finished: threading.Event) -> None:
    """Kill a robot's camera_ingest after_s after its first command arrives (on a loaded
    machine a robot can take seconds to be served: killed before that, it never ran)."""
    while not monitor.commands:
        if finished.wait(0.05):
            return
    if not finished.wait(after_s):
        ingest.kill()


def _report(job: DemoJob, monitors, specs, clock: dict) -> dict:
    summaries = {}
    for monitor, spec in zip(monitors, specs):
        summary = demo_summary(monitor) | {"params_file": (job.params_file
                                                           or params_file(job.ros_args)),
                                            "overrides": job.overrides or {},
                                            "memory_period_s": job.memory_period_s,
                                            "camera_killed": (job.camera_killed_at_s is not None
                                                              and monitor is monitors[-1])}
        if spec is not None:
            summary |= score.score_run(spec.seed, spec.duration_s, spec.camera_hz,
                                       job.memory_period_s, dict(monitor.finished_dialogue),
                                       monitor.finish_reasons, monitor.dialogue_stamps,
                                       monitor.summaries, monitor.commands,
                                       clock.get(monitor.robot), monitor.missing_cameras)
            for line in score.answer_lines(summary["answers"]) if job.live else ():
                print(f"{monitor.robot}: {line}" if monitor.robot else line, flush=True)
        line = summary_line(summary)
        if job.live:
            print(f"{monitor.robot} {line}" if monitor.robot else line, flush=True)
        summaries[monitor.robot] = summary
    if job.robots > 1 and job.live:
        print(fleet_line(summaries), flush=True)
    if job.summary_path:
        document = summaries[""] if job.robots == 1 else {"robots": summaries}
        Path(job.summary_path).parent.mkdir(parents=True, exist_ok=True)
        Path(job.summary_path).write_text(json.dumps(document, indent=2) + "\n")
        print(f"wrote {job.summary_path}", flush=True)
    return summaries
