"""oxygen-ros command line: the demo and tools around the package."""

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Optional


def _ros_environment() -> None:
    """DDS traffic stays on this machine, over the package's Fast DDS profile (loopback,
    a shared-memory segment large enough for raw camera frames), unless the user set
    ROS_AUTOMATIC_DISCOVERY_RANGE or a Fast DDS profile of their own."""
    from oxygen_ros.resources import share_path

    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    if os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST":
        profile = share_path("config", "fastdds_localhost.xml")
        if profile.exists():
            os.environ.setdefault("FASTDDS_DEFAULT_PROFILES_FILE", str(profile))


def _ros_args(config: str, overrides: list[str]) -> list[str]:
    args = ["oxygen-ros", "--ros-args", "--params-file", config]
    for item in overrides:
        args += ["-p", item]
    return args


def _node_overrides(args: argparse.Namespace) -> list[str]:
    overrides = []
    if args.preset:
        overrides.append(f"inference:preset:={args.preset}")
    if args.dry_run is not None:
        overrides.append(f"inference:dry_run:={str(args.dry_run).lower()}")
    return overrides + list(args.param or [])


def cmd_run(args: argparse.Namespace) -> int:
    """camera_ingest and inference in one process (no launch_ros needed; the launch file and
    the demo run each node in its own process, which keeps image decoding off the engine's
    interpreter). Ctrl-C or SIGTERM stops both cleanly."""
    _ros_environment()
    from oxygen_ros.ros.camera_ingest import CameraIngest
    from oxygen_ros.ros.executor import YieldingMultiThreadedExecutor
    from oxygen_ros.ros.inference_node import InferenceNode
    from oxygen_ros.ros.run_node import run_nodes

    return run_nodes([CameraIngest, InferenceNode], _ros_args(args.config, _node_overrides(args)),
                     make_executor=lambda: YieldingMultiThreadedExecutor(num_threads=4),
                     duration=args.duration)


def cmd_replay(args: argparse.Namespace) -> int:
    """Replay a rosbag2 (MCAP or sqlite3) through rclpy on its recorded schedule."""
    _ros_environment()
    import rclpy
    from rclpy.node import Node
    from rclpy.signals import SignalHandlerOptions

    from rosbags.highlevel import AnyReaderError

    from oxygen_ros.ros.bag import BagReplayer, load_qos_overrides
    from oxygen_ros.ros.run_node import ignore_stop_signals, install_stop_signals

    remap = {}
    for item in args.remap or []:
        old, sep, new = item.partition(":=")
        if not sep:
            raise SystemExit(f"--remap takes OLD:=NEW, got {item!r}")
        remap[old] = new
    rclpy.init(args=["oxygen-ros-replay"], signal_handler_options=SignalHandlerOptions.NO)
    stop = install_stop_signals()   # Ctrl-C ends the replay where it is
    node = Node("oxygen_replay")
    replayer = None
    try:
        try:
            overrides = load_qos_overrides(args.qos_overrides) if args.qos_overrides else None
            replayer = BagReplayer(node, args.bag, rate=args.rate, loop=args.loop,
                                   start_offset_s=args.start_offset, remap=remap,
                                   restamp=args.restamp, clock_hz=args.clock,
                                   topics=args.topics, qos_overrides=overrides)
        except (ValueError, OSError, AnyReaderError) as error:
            return _usage_error("replay", str(error))
        print(f"replaying {args.bag} ({replayer.duration_s:.1f} s) at {args.rate}x", flush=True)
        if args.wait_for_subscribers:
            missing = replayer.wait_for_subscribers(args.wait_for_subscribers, stop)
            if missing:
                print(f"no subscriber yet on {missing}; replaying anyway", flush=True)
        stop.wait(args.delay)  # let subscribers discover the publishers
        # restamped header = wall time: this line maps it back to bag time
        print(f"replay clock: bag time {args.start_offset:g} s = wall time {time.time():.6f}",
              flush=True)
        stats = replayer.run(stop)
        print(f"published {stats.published} messages: {stats.by_topic}", flush=True)
    finally:
        ignore_stop_signals()
        if replayer is not None:
            replayer.close()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


def cmd_make_demo_bag(args: argparse.Namespace) -> int:
    """Write a synthetic multi-camera bag: moving scene, joint states, dialogue requests."""
    from oxygen_ros.ros.bag import DemoBagSpec, write_demo_bag

    width, _, height = args.size.partition("x")
    if not (width.isdigit() and height.isdigit() and int(width) > 0 and int(height) > 0):
        return _usage_error("make-demo-bag", f"--size {args.size!r}: expected WIDTHxHEIGHT, "
                                             "e.g. 640x480")
    if args.duration <= 0 or args.camera_hz <= 0:
        return _usage_error("make-demo-bag", "--duration and --camera-hz must be positive")
    if Path(args.path).exists():
        return _usage_error("make-demo-bag", f"{args.path} exists; choose a new path")
    spec = DemoBagSpec(duration_s=args.duration, camera_hz=args.camera_hz,
                       encoding=args.encoding, width=int(width), height=int(height),
                       grayscale=args.gray, storage=args.storage, seed=args.seed,
                       cameras=args.cameras)
    path = write_demo_bag(args.path, spec)
    topics = sorted({"/cameras/" + name + "/image_raw" for name in
                     ("base", "left_wrist", "right_wrist")[:spec.cameras]})
    suffix = "/compressed" if spec.encoding in ("jpeg", "png") else ""
    print(f"wrote {path}: {spec.duration_s:g} s, {spec.cameras} cameras {args.size} "
          f"{spec.encoding} at {spec.camera_hz:g} Hz ({spec.storage}) on "
          f"{', '.join(t + suffix for t in topics)}")
    return 0


def _usage_error(command: str, message: str) -> int:
    print(f"oxygen-ros {command}: {message}", file=sys.stderr)
    return 2


INFERENCE_STATUS = "oxygen_ros: inference"
DEFAULT_DEMO_BAG = "build/demo_bag"
DEMO_CHECKPOINT = "package://oxygen_ros/models/demo"


class _DemoProgress:
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


def _node_command(executable: str, module: str) -> list[str]:
    """A node's installed executable (it leaves quietly on Ctrl-C even while importing),
    else its module."""
    installed = Path(sys.prefix) / "lib" / "oxygen_ros" / executable
    return [str(installed)] if installed.exists() else [sys.executable, "-m",
                                                        f"oxygen_ros.ros.{module}"]


def _stop_child(child, timeout: float = 5.0) -> None:
    """SIGINT, then SIGKILL after `timeout` (rclpy traps SIGTERM)."""
    import subprocess

    if child.poll() is None:
        child.send_signal(signal.SIGINT)
    try:
        child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


SUMMARY_FROM_DIAGNOSTICS = (
    "frames", "deadline_misses", "commands", "held_commands", "held_command_fraction",
    "chunk_latency_ms_p50", "chunk_latency_ms_max", "action_path_ms_p95", "frame_period_s",
    "frame_period_s_measured", "predicted_frame_period_s", "predicted_held_fraction",
    "language_share", "chunk_age_ms", "language_floor", "language_tokens",
    "dialogue_requests", "timed_out_requests", "rejected_requests", "torch_threads",
    "kv_bytes_peak", "meets_targets", "chunk_switch", "rtc_chunks", "rtc_late_switches")


def demo_summary(monitor) -> dict:
    """What a user judges the demo by, as an outside subscriber sees it: command rate as
    received, answers and summaries received, and the inference node's final
    /diagnostics (held commands, deadline misses, latencies, predictions)."""
    times = list(monitor.command_times)
    diag = monitor.diagnostics.get(INFERENCE_STATUS, {})

    def value(key):
        text = diag.get(key)
        if text is None:
            return None
        if text in ("True", "False"):
            return text == "True"
        try:
            return float(text) if "." in text else int(text)
        except ValueError:
            return text                 # a name, e.g. chunk_switch

    return {
        "commands_hz": (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0,
        "commands_received": len(times),
        "action_chunks": monitor.chunks,
        "dialogue_answers": len(monitor.finished_dialogue),
        "memory_summaries": len(monitor.summaries),
    } | {key: value(key) for key in SUMMARY_FROM_DIAGNOSTICS}


def _number(value, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _scored(summary: dict, key: str, rows: str) -> str:
    """e.g. "0.67 (4/6)": an accuracy and the right / scored rows it comes from."""
    right = sum(row["correct"] for row in summary[rows])
    return f"{_number(summary[key])} ({right}/{len(summary[rows])})"


def score_against_world(summary: dict, monitor, spec, memory_period_s: float,
                        bag_zero_wall: Optional[float]) -> None:
    """Add the answers, memory summaries and executed commands judged against the world's
    ground truth (demo/score.py) to the summary, and print each answer beside its truth.
    An answer is judged against the world when the observation it read was taken (its
    DialogueChunk's header stamp, restamped by the replay: wall time of bag time 0 +
    seconds into the bag)."""
    from oxygen_ros.demo import score
    from oxygen_ros.demo.questions import demo_dialogue
    from oxygen_ros.demo.world import TabletopWorld

    world = TabletopWorld(spec.seed)
    answers = dict(monitor.finished_dialogue)
    dialogue = [(t, question) for t, question in demo_dialogue(world) if t < spec.duration_s]
    about = [score.frame_time(monitor.dialogue_stamps[i + 1] - bag_zero_wall, spec.camera_hz)
             if bag_zero_wall is not None and i + 1 in monitor.dialogue_stamps else None
             for i in range(len(dialogue))]
    rows = score.answer_scores(world, dialogue, [answers.get(i + 1)
                                                 for i in range(len(dialogue))], about)
    memory = score.memory_scores(world, monitor.summaries, memory_period_s)
    commands = ([(wall - bag_zero_wall, values) for wall, values in monitor.commands]
                if bag_zero_wall is not None else [])
    summary |= {"answer_accuracy": score.accuracy(rows), "memory_accuracy": score.accuracy(memory),
                "action_error": score.action_error(world, commands), "answers": rows,
                "memory": memory, "world_seed": spec.seed, "task": world.instruction}
    for row in rows:
        print(f"  at {row['t']:4.1f} s  asked: {row['question']!r}\n"
              f"           answer: {row['answer']!r}  (about the frame at {row['about_s']:.2f} s)"
              f"\n            truth: {row['truth']!r}"
              f"  ({'right' if row['correct'] else 'wrong'})", flush=True)


def _forward_replay_output(replay, clock: dict) -> None:
    """Echo the replay's lines; keep the wall time of bag time 0 it reports."""
    for line in replay.stdout:
        print(line, end="", flush=True)
        if line.startswith("replay clock:"):
            clock["bag_zero_wall"] = float(line.rsplit(" ", 1)[1])


def cmd_demo(args: argparse.Namespace) -> int:
    """The main job: replay the demo bag through camera_ingest -> inference on the CPU
    preset, each node in its own process as the launch file runs them; this process
    watches the outputs like a user's subscriber, prints live stats, a summary line and a
    summary JSON."""
    _ros_environment()
    import subprocess

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    from oxygen_ros.ros.bag import DemoBagSpec, write_demo_bag
    from oxygen_ros.ros.monitor import OutputMonitor
    from oxygen_ros.ros.run_node import ignore_stop_signals, install_stop_signals, spin_until

    bag = Path(args.bag or DEFAULT_DEMO_BAG)
    scored = not bag.exists() or not args.bag
    if scored:   # a fresh bag of the world whose ground truth the outputs are scored against
        import shutil
        shutil.rmtree(bag, ignore_errors=True)
        spec = DemoBagSpec(duration_s=args.duration, seed=args.seed)
        write_demo_bag(bag, spec)
        print(f"wrote demo bag {bag} (world {args.seed})", flush=True)
    # the demo shows every output: commands on, a memory summary every 4 s of sensor time
    overrides = (["inference:dry_run:=false", "inference:memory_period_s:=4.0"]
                 + _node_overrides(args))
    ros_args = _ros_args(args.config, overrides)[1:]
    nodes = [subprocess.Popen(_node_command(name, module) + ros_args)
             for name, module in (("camera_ingest", "camera_ingest"),
                                  ("inference", "inference_node"))]
    rclpy.init(args=["oxygen-ros-demo"], signal_handler_options=SignalHandlerOptions.NO)
    stop = install_stop_signals()   # Ctrl-C reaches the nodes too: they stop cleanly
    monitor = OutputMonitor()
    # the replay starts once both nodes subscribe (the model loads and calibrates first)
    replay = subprocess.Popen([sys.executable, "-m", "oxygen_ros.cli", "replay", str(bag),
                               "--restamp", "--wait-for-subscribers", "120", "--delay", "0.5"],
                              stdout=subprocess.PIPE, text=True)
    clock: dict = {}
    forward = threading.Thread(target=_forward_replay_output, args=(replay, clock), daemon=True)
    forward.start()
    progress = _DemoProgress(monitor, replay)
    executor = SingleThreadedExecutor()
    executor.add_node(monitor)
    try:
        spin_until(executor, stop, every_second=progress)
    finally:
        ignore_stop_signals()
        for child in [replay] + nodes:
            _stop_child(child)
        summary = demo_summary(monitor)
        if scored:
            score_against_world(summary, monitor, spec, 4.0, clock.get("bag_zero_wall"))
        print(f"summary: {summary['frames']} frames, {summary['action_chunks']} action chunks, "
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
                 if "answer_accuracy" in summary else ""), flush=True)
        if args.summary:
            Path(args.summary).parent.mkdir(parents=True, exist_ok=True)
            Path(args.summary).write_text(json.dumps(summary, indent=2) + "\n")
            print(f"wrote {args.summary}", flush=True)
        executor.shutdown()
        monitor.destroy_node()
        rclpy.try_shutdown()
    return 0 if monitor.chunks > 0 and monitor.command_times else 1


def cmd_bench_model(args: argparse.Namespace) -> int:
    """Model benchmark: chunk latency, decode tokens/s, distance from the bandwidth bound."""
    from dataclasses import asdict

    import torch

    from oxygen_ros.engine.threads import apply_torch_threads
    from oxygen_ros.bench import model as benchmark

    threads = apply_torch_threads(args.threads)
    print(f"torch threads: {threads} (the inference node's choice unless --threads)")
    result = benchmark.run(args.preset, args.device, getattr(torch, args.dtype),
                           batches=tuple(args.batches), repeats=args.repeats,
                           cuda_graphs=args.cuda_graphs)
    print(benchmark.report(result))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(asdict(result), handle, indent=2)
    return 0


def cmd_bench_ingest(args: argparse.Namespace) -> int:
    """Ingest benchmark: decode + resize per camera frame, raw and JPEG, 480p to 1080p."""

    from oxygen_ros.bench import ingest as ingest_benchmark

    rows = ingest_benchmark.run(args.size, args.resize_mode, args.repeats)
    print(ingest_benchmark.table(rows))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=2)
    return 0


def cmd_train_demo(args: argparse.Namespace) -> int:
    """Train the demo preset on tabletop worlds and save it as a lerobot pi05 checkpoint."""
    from oxygen_ros.demo.train import TrainConfig, train
    from oxygen_ros.engine.threads import apply_torch_threads

    # every bad option refused before half an hour of training, not after
    for option, value, least in (("--steps", args.steps, 1), ("--batch", args.batch, 1),
                                 ("--seeing-batch", args.seeing_batch, 1),
                                 ("--vision-steps", args.vision_steps, 0),
                                 ("--eval-worlds", args.eval_worlds, 1),
                                 ("--threads", args.threads, 0)):
        if value < least:
            return _usage_error("train-demo", f"{option} must be at least {least}, not {value}")
    for option, value in (("--lr", args.lr), ("--time-budget", args.time_budget)):
        if not value > 0:
            return _usage_error("train-demo", f"{option} must be above 0, not {value:g}")
    try:
        Path(args.out).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        return _usage_error("train-demo", f"--out {args.out}: {error.strerror}")
    apply_torch_threads(args.threads)
    config = TrainConfig(steps=args.steps, batch=args.batch, lr=args.lr, seed=args.seed,
                         time_budget_s=args.time_budget, eval_worlds=args.eval_worlds,
                         vision_steps=args.vision_steps, seeing_batch=args.seeing_batch,
                         precision=args.precision)
    manifest = train(Path(args.out), config,
                     progress=lambda text: print(text, end="", file=sys.stderr, flush=True))
    print(json.dumps(manifest, indent=2))
    return 0


def cmd_evaluate_demo(args: argparse.Namespace) -> int:
    """Judge a demo checkpoint on unseen tabletop worlds: every question at five moments,
    memory and actions (the manifest's metrics), and the demo's own questions on the frames
    make run answers them over."""
    from oxygen_ros.demo.evaluate import demo_moments, evaluate
    from oxygen_ros.engine.threads import apply_torch_threads
    from oxygen_ros.model.loading import load_model, resolve

    def refuse(message: str) -> int:
        print(f"oxygen-ros evaluate-demo: {message}", file=sys.stderr)
        return 2

    if args.worlds < 1:
        return refuse(f"--worlds must be at least 1, not {args.worlds}")
    if args.first_world < 0:
        return refuse(f"--first-world must be at least 0, not {args.first_world}")
    if args.json and not Path(args.json).resolve().parent.is_dir():
        return refuse(f"--json {args.json}: no such directory")
    try:
        apply_torch_threads(args.threads)
        loaded = load_model(checkpoint=args.checkpoint)
    except (ValueError, OSError) as error:       # CheckpointError is a ValueError
        return refuse(str(error))
    model = loaded.model.eval()
    if model.config.tokenizer != "bytes" or loaded.normalization.actions is None:
        return refuse(f"{args.checkpoint} is not a train-demo checkpoint (byte tokenizer and "
                      "action statistics)")
    result = {"checkpoint": args.checkpoint,
              "unseen_worlds": evaluate(model, loaded.normalization, worlds=args.worlds,
                                        first_world=args.first_world),
              "demo_moments": demo_moments(model, loaded.normalization, worlds=args.worlds,
                                           first_world=args.first_world)}
    measured, moments = result["unseen_worlds"], result["demo_moments"]
    last = args.first_world + args.worlds - 1
    print(f"unseen worlds {args.first_world}-{last}: answers {measured['answer_accuracy']:.3f} "
          f"({measured['questions']} questions), memory {measured['memory_accuracy']:.3f} "
          f"({measured['memory_requests']}), action error {measured['action_error']:.4f}",
          file=sys.stderr)
    path = resolve(args.checkpoint)
    manifest_path = (path if path.is_dir() else path.parent) / "manifest.json"
    if manifest_path.exists():
        shipped = json.loads(manifest_path.read_text())["metrics"]
        if args.first_world == 0 and shipped["worlds"] == args.worlds:
            result["manifest_metrics_match"] = all(
                abs(measured[key] - shipped[key]) < 1e-6
                for key in ("answer_accuracy", "memory_accuracy", "action_error"))
            print("the manifest's metrics: " + ("equal" if result["manifest_metrics_match"]
                                                else f"DIFFERENT (manifest: {shipped})"),
                  file=sys.stderr)
        else:
            print(f"the manifest's metrics: not compared (they judge worlds 0-"
                  f"{shipped['worlds'] - 1})", file=sys.stderr)
    print(f"demo questions on the frames make run answers them over: "
          f"{moments['answer_accuracy']:.3f} ({moments['questions']} questions)", file=sys.stderr)
    for moment, accuracy in moments["answer_accuracy_by_moment"].items():
        print(f"  at {moment}: {accuracy:.2f}", file=sys.stderr)
    if moments["misses"]:
        print("misses:", file=sys.stderr)
    for miss in moments["misses"]:
        print(f"  world {miss['world']} at {miss['t']:.2f} s: {miss['question']!r} -> "
              f"{miss['answer']!r} (truth {miss['truth']!r})", file=sys.stderr)
    text = json.dumps(result, indent=2) + "\n"
    if args.json:
        Path(args.json).write_text(text)
    else:
        print(text, end="")
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    """Describe a π0.5 checkpoint: format, dimensions, parameters, memory for weights + KV."""
    from oxygen_ros.model import checkpoint

    try:
        info = checkpoint.inspect(args.checkpoint, tuple(args.heads or ()) or None,
                                  args.vision_heads)
    except checkpoint.CheckpointError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    config = info.config
    element = {"float32": 4, "bfloat16": 2}[args.dtype]
    weight_bytes = info.num_parameters * element
    page_bytes = config.kv_bytes_per_token(element) * args.page_size
    kv_bytes = args.kv_pages * page_bytes
    action_tier = config.kv_bytes_per_token(element) * config.action_horizon
    vlm, expert, vision = config.vlm, config.expert, config.vision
    print(f"checkpoint  {info.path} ({info.format} layout)")
    print(f"parameters  {info.num_parameters / 1e6:.1f} M, stored as "
          + ", ".join(f"{n} x {d}" for d, n in sorted(info.dtypes.items())))
    print(f"vision      {vision.depth} layers x {vision.width} wide (mlp {vision.mlp_dim}, "
          f"{vision.num_heads} heads), {vision.image_size} px images in {vision.patch_size} px "
          f"patches = {vision.num_patches} tokens per camera")
    print(f"language    {vlm.depth} layers x {vlm.width} wide (mlp {vlm.mlp_dim}), "
          f"{vlm.num_heads} heads / {vlm.num_kv_heads} kv heads x {vlm.head_dim}, vocabulary "
          f"{config.vocab_size}")
    print(f"expert      {expert.depth} layers x {expert.width} wide (mlp {expert.mlp_dim})")
    print(f"actions     horizon {config.action_horizon} x {config.action_dim} dims, "
          f"{config.num_denoise_steps} denoise steps")
    print(f"memory ({args.dtype}): weights {weight_bytes / 2**30:.2f} GiB + KV pool "
          f"{args.kv_pages} pages x {args.page_size} tokens = {kv_bytes / 2**30:.2f} GiB "
          f"({page_bytes / 1024:.0f} KiB/page) + action tier {action_tier / 2**20:.2f} MiB = "
          f"{(weight_bytes + kv_bytes + action_tier) / 2**30:.2f} GiB")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    """Engine benchmark: isolated, shared_kv and oxygen side by side on one workload."""
    from oxygen_ros.bench import engine as benchmark
    from oxygen_ros.engine.threads import apply_torch_threads

    apply_torch_threads(args.threads)
    workload = benchmark.Workload(
        preset=args.preset, frames=args.frames, denoise_steps=args.denoise_steps,
        cameras=args.cameras, decode_tokens=args.decode_tokens,
        tokens_per_frame=args.tokens_per_frame, dialogue_per_frame=args.dialogue_per_frame,
        memory_period_frames=args.memory_period_frames, camera_every=args.camera_every,
        prefix_attention=args.prefix_attention, seed=args.seed, device=args.device)
    result = benchmark.run(workload, progress=lambda i, n: print(
        f"\rframe {i}/{n}", end="", file=sys.stderr, flush=True))
    print(file=sys.stderr)
    print(benchmark.table(result))
    if args.json:
        benchmark.write_json(result, args.json)
    plot_path = args.plot or (str(Path(args.json).with_suffix(".png")) if args.json else None)
    if plot_path:
        benchmark.plot(result, plot_path)
        print(f"wrote {args.json or ''} {plot_path}".replace("  ", " "))
    return 0


def cmd_bench_switch(args: argparse.Namespace) -> int:
    """Chunk switching: Real-Time Chunking (vjp, error), cross-fade and none side by side."""
    from oxygen_ros.bench import switch as switch_benchmark
    from oxygen_ros.engine.threads import apply_torch_threads
    from oxygen_ros.model.loading import load_model

    apply_torch_threads(args.threads)
    checkpoint = args.checkpoint
    if checkpoint is None and args.preset is None:
        checkpoint = DEMO_CHECKPOINT
    loaded = load_model(preset=args.preset or "small", checkpoint=checkpoint or "",
                        tokenizer=args.tokenizer or "", seed=args.seed)
    workload = switch_benchmark.SwitchWorkload(
        delays=tuple(args.delays), chunks=args.chunks, period_steps=args.period,
        blend_s=args.blend_s,
        default_guidance=args.guidance, execution_horizon=args.execution_horizon,
        schedule=args.schedule, max_guidance_weight=args.max_guidance_weight, seed=args.seed,
        world_seed=args.world)
    result = switch_benchmark.run(loaded, workload,
                                  progress=lambda line: print(line, file=sys.stderr))
    print(switch_benchmark.table(result))
    if args.json:
        png = switch_benchmark.write(result, args.json)
        print(f"wrote {args.json} {png}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="oxygen-ros", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    from oxygen_ros.resources import share_path
    default_config = str(share_path("config", "humanoid.yaml"))

    def node_options(command, config=default_config):
        command.add_argument("--config", default=config,
                             help=f"parameters YAML (default: the package's "
                                  f"{Path(config).name})")
        command.add_argument("--preset", help="model preset for the inference node")
        command.add_argument("--dry-run", dest="dry_run", action="store_true", default=None,
                             help="publish no commands or trajectories")
        command.add_argument("--no-dry-run", dest="dry_run", action="store_false")
        command.add_argument("-p", "--param", action="append", metavar="NODE:NAME:=VALUE",
                             help="override a parameter, e.g. inference:tokens_per_frame:=8")

    demo = sub.add_parser("demo", help=cmd_demo.__doc__)
    node_options(demo, config=str(share_path("config", "humanoid_demo.yaml")))
    demo.add_argument("--bag", help=f"an existing bag to replay as it is (default: write "
                                    f"{DEFAULT_DEMO_BAG} from --seed's world — also a --bag "
                                    "path that does not exist yet — and score the outputs "
                                    "against its ground truth)")
    demo.add_argument("--seed", type=int, default=0,
                      help="the tabletop world of the demo bag (default 0)")
    demo.add_argument("--duration", type=float, default=12.0,
                      help="length of the demo bag in seconds (default 12)")
    demo.add_argument("--summary", default="build/demo_summary.json",
                      help="write the summary JSON here (default build/demo_summary.json)")
    demo.set_defaults(func=cmd_demo)

    run = sub.add_parser("run", help=cmd_run.__doc__)
    node_options(run)
    run.add_argument("--duration", type=float, default=0.0, help="seconds (default: until Ctrl-C)")
    run.set_defaults(func=cmd_run)

    replay = sub.add_parser("replay", help=cmd_replay.__doc__)
    replay.add_argument("bag", help="rosbag2 directory or .mcap / .db3 file")
    replay.add_argument("--rate", type=float, default=1.0, help="speed factor (default 1)")
    replay.add_argument("--loop", action="store_true", help="start over at the end")
    replay.add_argument("--start-offset", type=float, default=0.0,
                        help="skip this many seconds of the bag")
    replay.add_argument("--remap", action="append", metavar="OLD:=NEW", help="rename a topic")
    replay.add_argument("--topics", nargs="+",
                        help="replay only these topics (as recorded, before --remap)")
    replay.add_argument("--restamp", action="store_true",
                        help="rewrite header stamps to the current time (wall-clock nodes)")
    replay.add_argument("--qos-overrides", metavar="YAML",
                        help="per-topic QoS (history, depth, reliability, durability), as "
                             "ros2 bag play --qos-profile-overrides-path takes")
    replay.add_argument("--clock", type=float, default=0.0, metavar="HZ",
                        help="publish /clock from bag time at HZ (use_sim_time nodes)")
    replay.add_argument("--wait-for-subscribers", type=float, default=0.0, metavar="S",
                        help="wait up to S seconds until every topic has a subscriber")
    replay.add_argument("--delay", type=float, default=0.5,
                        help="then wait this many seconds before the first message")
    replay.set_defaults(func=cmd_replay)

    bag = sub.add_parser("make-demo-bag", help=cmd_make_demo_bag.__doc__)
    bag.add_argument("path", help="new bag directory")
    bag.add_argument("--duration", type=float, default=12.0)
    bag.add_argument("--camera-hz", type=float, default=15.0)
    bag.add_argument("--encoding", default="jpeg",
                     choices=["rgb8", "bgr8", "mono8", "jpeg", "png"])
    bag.add_argument("--size", default="320x240", help="WIDTHxHEIGHT (default 320x240)")
    bag.add_argument("--gray", action="store_true", help="a gray scene")
    bag.add_argument("--storage", default="mcap", choices=["mcap", "sqlite3"])
    bag.add_argument("--seed", type=int, default=0, help="which tabletop world (default 0)")
    bag.add_argument("--cameras", type=int, default=3, choices=[1, 2, 3],
                     help="base, left_wrist, right_wrist: the first N (default 3; the tiny "
                          "preset's config reads 2)")
    bag.set_defaults(func=cmd_make_demo_bag)

    inspect = sub.add_parser("inspect", help=cmd_inspect.__doc__)
    inspect.add_argument("checkpoint", help="checkpoint directory or model.safetensors")
    inspect.add_argument("--kv-pages", type=int, default=512, help="KV pool pages (default 512)")
    inspect.add_argument("--page-size", type=int, default=16, help="tokens per page")
    inspect.add_argument("--heads", type=int, nargs=3, metavar=("HEADS", "KV_HEADS", "HEAD_DIM"),
                         help="Gemma attention shape, for a variant the loader does not know")
    inspect.add_argument("--vision-heads", type=int, default=0,
                         help="SigLIP heads (default: width / 72, else width / 64)")
    inspect.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"],
                         help="dtype to size weights and cache for (default bfloat16)")
    inspect.set_defaults(func=cmd_inspect)

    bench = sub.add_parser("bench", help=cmd_bench.__doc__)
    defaults = __import__("oxygen_ros.bench.engine", fromlist=["Workload"]).Workload()
    bench.add_argument("--preset", default=defaults.preset)
    bench.add_argument("--frames", type=int, default=defaults.frames, help="measured frames")
    bench.add_argument("--denoise-steps", type=int, default=defaults.denoise_steps)
    bench.add_argument("--cameras", type=int, default=defaults.cameras, choices=[1, 2, 3])
    bench.add_argument("--decode-tokens", type=int, default=defaults.decode_tokens,
                       help="max new tokens per dialogue request")
    bench.add_argument("--tokens-per-frame", type=int, default=defaults.tokens_per_frame,
                       help="k: decode steps per frame in oxygen mode")
    bench.add_argument("--dialogue-per-frame", type=float, default=defaults.dialogue_per_frame,
                       help="mean new dialogue requests per frame (Poisson)")
    bench.add_argument("--memory-period-frames", type=int,
                       default=defaults.memory_period_frames, help="0 turns memory off")
    bench.add_argument("--camera-every", type=int, default=defaults.camera_every,
                       help="a new camera image every N frames")
    bench.add_argument("--prefix-attention", default=defaults.prefix_attention,
                       choices=["bidirectional", "causal_prompt"])
    bench.add_argument("--seed", type=int, default=defaults.seed)
    bench.add_argument("--device", default=defaults.device)
    bench.add_argument("--threads", type=int, default=0,
                       help="torch CPU threads (default 0: as the inference node, all cores "
                            "but one)")
    bench.add_argument("--json", help="write the results to this JSON file (and a PNG beside)")
    bench.add_argument("--plot", help="PNG path (default: beside --json)")
    bench.set_defaults(func=cmd_bench)

    switch = sub.add_parser("bench-switch", help=cmd_bench_switch.__doc__)
    switch_defaults = __import__("oxygen_ros.bench.switch",
                                 fromlist=["SwitchWorkload"]).SwitchWorkload()
    switch.add_argument("--checkpoint", help=f"a π0.5 checkpoint directory (default: the main "
                                             f"job's trained model, {DEMO_CHECKPOINT})")
    switch.add_argument("--preset", help="a model preset with random weights instead")
    switch.add_argument("--tokenizer", help="PaliGemma tokenizer (with a checkpoint that needs it)")
    switch.add_argument("--delays", type=float, nargs="+", default=list(switch_defaults.delays),
                        help="inference delays as fractions of the horizon")
    switch.add_argument("--chunks", type=int, default=switch_defaults.chunks,
                        help="chunks per delay (switches = chunks - 1)")
    switch.add_argument("--period", type=int, default=switch_defaults.period_steps,
                        help="steps between chunks, at most H - delay (default: the main "
                             "job's 0.2 s frames at 50 Hz; 0: H/2)")
    switch.add_argument("--blend-s", type=float, default=switch_defaults.blend_s,
                        help="the cross-fade's length")
    switch.add_argument("--guidance", choices=["vjp", "error"],
                        default=switch_defaults.default_guidance,
                        help="the variant reported as modes.rtc and rtc_cost_ratio")
    switch.add_argument("--execution-horizon", type=int,
                        default=switch_defaults.execution_horizon,
                        help="chunk steps guided toward the plan, at least the frozen ones "
                             "(0: all the plan still covers)")
    switch.add_argument("--schedule", choices=["zeros", "ones", "linear", "exp"],
                        default=switch_defaults.schedule)
    switch.add_argument("--max-guidance-weight", type=float,
                        default=switch_defaults.max_guidance_weight)
    switch.add_argument("--seed", type=int, default=0)
    switch.add_argument("--world", type=int, default=switch_defaults.world_seed,
                        help="the tabletop world the observations come from")
    switch.add_argument("--threads", type=int, default=0,
                        help="torch CPU threads (default 0: all cores but one)")
    switch.add_argument("--json", help="write the numbers here and the plot beside (.png)")
    switch.set_defaults(func=cmd_bench_switch)

    bench_model = sub.add_parser("bench-model", help=cmd_bench_model.__doc__)
    bench_model.add_argument("--preset", default="small", help="model preset (default small)")
    bench_model.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    bench_model.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    bench_model.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16],
                             help="decode batch sizes (default 1 4 16)")
    bench_model.add_argument("--repeats", type=int, default=5, help="timed repeats (median)")
    bench_model.add_argument("--threads", type=int, default=0,
                             help="torch CPU threads (default 0: as the inference node, all "
                                  "cores but one)")
    bench_model.add_argument("--cuda-graphs", action="store_true",
                             help="replay decode steps and denoising from CUDA graphs (CUDA)")
    bench_model.add_argument("--json", help="also write the numbers to this JSON file")
    bench_model.set_defaults(func=cmd_bench_model)

    train_demo = sub.add_parser("train-demo", help=cmd_train_demo.__doc__)
    train_demo.add_argument("--out", default="build/demo_checkpoint",
                            help="checkpoint directory (default build/demo_checkpoint)")
    train_demo.add_argument("--steps", type=int, default=2000,
                            help="joint training steps (default 2000)")
    train_demo.add_argument("--vision-steps", type=int, default=1000,
                            help="steps of the auxiliary patch loss alone before the joint "
                                 "training (default 1000; 2 x seeing-batch frames each)")
    train_demo.add_argument("--seeing-batch", type=int, default=16,
                            help="extra base-camera frames per step for the auxiliary "
                                 "patch loss (default 16)")
    train_demo.add_argument("--batch", type=int, default=8,
                            help="frames per step, each with every question about it (default 8)")
    train_demo.add_argument("--lr", type=float, default=1e-3,
                            help="peak AdamW learning rate (warm-up, then cosine; default 1e-3)")
    train_demo.add_argument("--seed", type=int, default=0,
                            help="weights, worlds, noise: same seed and threads, same run "
                                 "(default 0)")
    train_demo.add_argument("--time-budget", type=float, default=1800.0,
                            help="stop training after this many seconds (default 1800)")
    train_demo.add_argument("--eval-worlds", type=int, default=24,
                            help="unseen worlds the saved metrics are measured on "
                                 "(default 24)")
    train_demo.add_argument("--threads", type=int, default=0,
                            help="torch threads (default 0: all cores but one)")
    train_demo.add_argument("--precision", default="bf16", choices=["bf16", "fp32"],
                            help="matmuls of the training passes (bfloat16 autocast, float32 "
                                 "weights; default bf16: fast on CPUs with AVX512-BF16)")
    train_demo.set_defaults(func=cmd_train_demo)

    evaluate_demo = sub.add_parser("evaluate-demo", help=cmd_evaluate_demo.__doc__)
    evaluate_demo.add_argument("--checkpoint", default="package://oxygen_ros/models/demo",
                               help="a train-demo checkpoint directory or its model.safetensors "
                                    "(default the shipped one)")
    evaluate_demo.add_argument("--worlds", type=int, default=24,
                               help="unseen worlds to judge on (default 24, as the manifest)")
    evaluate_demo.add_argument("--first-world", type=int, default=0,
                               help="seed of the first (default 0; training worlds start at "
                                    "10000; compared with the manifest only from 0)")
    evaluate_demo.add_argument("--threads", type=int, default=0,
                               help="torch threads (default 0: all cores but one)")
    evaluate_demo.add_argument("--json", help="write the result's JSON to this file instead "
                                              "of stdout (the report goes to stderr)")
    evaluate_demo.set_defaults(func=cmd_evaluate_demo)

    bench_ingest = sub.add_parser("bench-ingest", help=cmd_bench_ingest.__doc__)
    bench_ingest.add_argument("--size", type=int, default=112,
                              help="model resolution (default 112, the small preset's)")
    bench_ingest.add_argument("--resize-mode", default="pad", choices=["pad", "stretch"])
    bench_ingest.add_argument("--repeats", type=int, default=20, help="timed repeats (median)")
    bench_ingest.add_argument("--json", help="also write the numbers to this JSON file")
    bench_ingest.set_defaults(func=cmd_bench_ingest)
    return parser


def _leave_quietly(*_) -> None:
    """Ctrl-C before a command has set its own handlers (e.g. while torch imports): exit 0,
    ignoring a second signal (Python would die of it while finalizing)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise SystemExit(0)


def main(argv=None) -> int:
    signal.signal(signal.SIGINT, _leave_quietly)
    signal.signal(signal.SIGTERM, _leave_quietly)
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
