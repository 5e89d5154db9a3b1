"""oxygen-ros verbs for a robot: run the nodes, replay a bag, inspect a checkpoint."""

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from oxygen_ros.cli.options import (LONGEST_TIME_S, LONGEST_WAIT_S, add_dtype, add_node_options,
                                    bounded, chosen_config, launch_arguments, node_ros_args,
                                    param_overrides, planned_inference, ros_environment,
                                    usage_error)
from oxygen_ros.model.config import STATE_PROMPTS


def cmd_run(args: argparse.Namespace) -> int:
    """camera_ingest and inference, each in its own process as the launch file runs them
    (no launch_ros needed), on the YAML the launch file would pick; an inference node that
    serves robots (its robots parameter) gets each robot's camera_ingest under /<robot>/, as
    fleet.launch.py and humanoid.launch.py namespace:=<robot> inference:=remote start them
    on one machine. Ctrl-C or SIGTERM stops them all (SIGINT, then SIGKILL after 10 s); when
    one node ends, the others are stopped. Exit status: the failed node's (named on stderr
    when each has its own process), else 0."""
    try:
        arguments = launch_arguments(args)
        config = chosen_config(arguments)
        robots = served_robots(arguments, config, args.param)
        if robots and args.single_process:
            raise ValueError(f"--single-process runs one robot's nodes, and inference serves "
                             f"robots {', '.join(robots)} (run without --single-process: "
                             "each robot's camera_ingest in its namespace)")
        node_args = node_ros_args(arguments, config, args.param, robots)
    except ValueError as error:
        return usage_error("run", str(error))
    ros_environment()
    if args.single_process:
        return _run_in_one_process(node_args, args.duration)
    from oxygen_ros.ros.node_processes import (NODES, node_command, start_ingests, start_nodes,
                                               supervise)
    from oxygen_ros.ros.run_node import ignore_stop_signals, install_stop_signals

    stop = install_stop_signals()
    with tempfile.TemporaryDirectory(prefix="oxygen-ros-run-") as directory:
        if robots:
            names = [f"/{robot}/camera_ingest" for robot in robots] + ["inference"]
            children = start_ingests(node_args[1:], robots, Path(directory),
                                     given=param_overrides(args.param).get("camera_ingest"))
            children.append(subprocess.Popen(node_command(*NODES[1]) + node_args[1:]))
        else:
            names = [name for name, _ in NODES]
            children = start_nodes(node_args[1:])
        print("oxygen-ros run: " + ", ".join(f"{name} pid {child.pid}" for name, child
                                             in zip(names, children))
              + f", parameters {node_args[3]}", flush=True)
        try:
            return supervise(children, stop, args.duration, names=names)
        finally:
            ignore_stop_signals()


def served_robots(arguments: dict, config: Path, params) -> list[str]:
    """The robots the inference node will serve: its robots parameter, from the YAML or a
    -p (none: one robot, no namespace)."""
    return list(planned_inference(arguments, config, params)["robots"] or [])


def _run_in_one_process(node_args: list[str], duration: float) -> int:
    from oxygen_ros.ros.camera_ingest import CameraIngest
    from oxygen_ros.ros.executor import YieldingMultiThreadedExecutor
    from oxygen_ros.ros.inference_node import InferenceNode
    from oxygen_ros.ros.run_node import run_nodes

    return run_nodes([CameraIngest, InferenceNode], node_args,
                     make_executor=lambda: YieldingMultiThreadedExecutor(num_threads=4),
                     duration=duration)


def remap_pair(text: str) -> tuple[str, str]:
    """An argparse type: OLD:=NEW, both names given."""
    old, sep, new = text.partition(":=")
    if not (sep and old and new):
        raise argparse.ArgumentTypeError(f"expected OLD:=NEW, not {text!r}")
    return old, new


def cmd_replay(args: argparse.Namespace) -> int:
    """Replay a rosbag2 (MCAP or sqlite3) through rclpy on its recorded schedule."""
    ros_environment()
    import rclpy
    from rclpy.node import Node
    from rclpy.signals import SignalHandlerOptions
    from rclpy.exceptions import NameValidationException
    from rclpy.validate_namespace import validate_namespace
    from rclpy.validate_topic_name import validate_topic_name
    from rosbags.highlevel import AnyReaderError

    from oxygen_ros.ros.bag import BagReplayer, MissingTopics, UnknownTypes, load_qos_overrides
    from oxygen_ros.ros.conversions import RECORDED_AGE_S
    from oxygen_ros.ros.run_node import ignore_stop_signals, install_stop_signals

    if not Path(args.bag).exists():
        return usage_error("replay", f"{args.bag}: no such bag")
    if args.namespace.strip("/"):
        try:
            validate_namespace("/" + args.namespace.strip("/"))
        except NameValidationException as error:
            return usage_error("replay", f"--namespace: {_name_error(error)}")
    named = [("--topics", name) for name in args.topics or ()] + [
        ("--remap", name) for pair in args.remap or () for name in pair]
    for option, name in named:
        try:
            validate_topic_name(name)
        except NameValidationException as error:
            return usage_error("replay", f"{option}: {_name_error(error)}")
    rclpy.init(args=["oxygen-ros-replay"], signal_handler_options=SignalHandlerOptions.NO)
    stop = install_stop_signals()   # Ctrl-C ends the replay where it is
    node = Node("oxygen_replay")
    replayer = None
    try:
        try:
            overrides = load_qos_overrides(args.qos_overrides) if args.qos_overrides else None
        except (ValueError, OSError) as error:
            message = str(error) if isinstance(error, ValueError) else error.strerror
            return usage_error("replay", f"--qos-overrides: {message}" if args.qos_overrides
                               in message else f"--qos-overrides {args.qos_overrides}: {message}")
        try:
            replayer = BagReplayer(node, args.bag, rate=args.rate, loop=args.loop,
                                   start_offset_s=args.start_offset,
                                   remap=dict(args.remap or ()),
                                   restamp=args.restamp, clock_hz=args.clock,
                                   topics=args.topics, qos_overrides=overrides,
                                   namespace=args.namespace.strip("/"))
        except (MissingTopics, UnknownTypes) as error:
            return usage_error("replay", f"--{error.option}: {error}")
        except (ValueError, OSError, AnyReaderError) as error:
            message = str(error)        # rosbags' own messages do not always name the bag
            return usage_error("replay", message if args.bag in message
                               else f"{args.bag}: {message}")
        except NameValidationException as error:    # a --remap target
            return usage_error("replay", f"--remap: {_name_error(error)}")
        print(f"replaying {args.bag} ({replayer.duration_s:.1f} s) at {args.rate}x", flush=True)
        if replayer.skipped:
            print(f"oxygen-ros replay: warning: left out {', '.join(replayer.skipped)}: no "
                  "installed package defines their types", file=sys.stderr, flush=True)
        if (not (args.restamp or args.clock) and replayer.stamps_headers
                and replayer.recorded_s_ago >= RECORDED_AGE_S):
            print(f"oxygen-ros replay: warning: {args.bag} is stamped "
                  f"{_duration(replayer.recorded_s_ago)} in the past, and its stamps are kept: "
                  "nodes on the wall clock drop its observations as stale; add --restamp, or "
                  "--clock HZ for use_sim_time:=true nodes", file=sys.stderr, flush=True)
        if args.clock and args.rate != 1.0:
            print(f"oxygen-ros replay: warning: --rate {args.rate:g} with --clock: use_sim_time "
                  f"nodes play each plan on /clock, {args.rate:g}x as fast as the inference "
                  "engine schedules it (on the host's clock); keep --rate 1 for their actions, "
                  "or replay with --restamp to wall-clock nodes", file=sys.stderr, flush=True)
        if args.wait_for_subscribers:
            missing = replayer.wait_for_subscribers(args.wait_for_subscribers, stop)
            if missing:
                print(f"no subscriber yet on {missing}; replaying anyway", flush=True)
        stop.wait(args.delay)  # let subscribers discover the publishers
        for mismatch in replayer.type_mismatches():
            print(f"oxygen-ros replay: warning: {mismatch}", file=sys.stderr, flush=True)
        if args.start_on_stdin:
            print(READY_LINE, flush=True)
            _wait_for_a_line(stop)
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


READY_LINE = "ready: the first message goes when a line comes on standard input"


def _wait_for_a_line(stop) -> None:
    """Until a line (or the end) comes on stdin, or `stop` is set (a signal does not
    interrupt a read)."""
    came = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), came.set()), daemon=True).start()
    while not (came.wait(0.1) or stop.is_set()):
        pass


def _name_error(error: Exception) -> str:
    """rclpy's name refusal in one line: the rule broken, then the name."""
    rule, name = (str(error).splitlines() + [""])[:2]
    return f"{rule.rstrip(':')} ({name.strip()})"


def _duration(seconds: float) -> str:
    for unit, length in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= length:
            return f"{seconds / length:.1f} {unit}"
    return f"{seconds:.0f} s"


def cmd_inspect(args: argparse.Namespace) -> int:
    """Describe a π0.5 checkpoint: format, dimensions, parameters, memory for weights + KV."""
    import torch

    from oxygen_ros.engine.config import EngineConfig
    from oxygen_ros.engine.pool_size import check_pool, request_tokens
    from oxygen_ros.model import checkpoint
    from oxygen_ros.model.loading import checkpoint_normalization, checkpoint_tokenizer
    from oxygen_ros.model.precision import resolve_dtype

    if not args.checkpoint.strip():
        return usage_error("inspect", "the checkpoint path is empty")
    try:
        info = checkpoint.inspect(args.checkpoint, tuple(args.heads or ()) or None,
                                  args.vision_heads)
        if args.state_prompt:
            info.config = info.config.with_(state_prompt=args.state_prompt)
        checkpoint.match_tensors(info)
        checkpoint.check_tied(info)
        normalization = checkpoint_normalization(info, args.asset_id, args.normalization)
        text = checkpoint_tokenizer(info.config, args.tokenizer)
        check_pool(info.config, args.kv_pages, args.page_size, args.cameras,
                   request_tokens=request_tokens(EngineConfig()))
    except ValueError as error:       # CheckpointError is a ValueError
        return usage_error("inspect", str(error))
    config = info.config
    dtype, why = resolve_dtype(args.dtype)
    element = {"float32": 4, "bfloat16": 2}[dtype]
    weight_bytes = checkpoint.loaded_bytes(info, getattr(torch, dtype))
    page_bytes = config.kv_bytes_per_token(element) * args.page_size
    kv_bytes = args.kv_pages * page_bytes
    action_tier = config.kv_bytes_per_token(element) * config.action_horizon
    total = weight_bytes + kv_bytes + action_tier
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if total > memory:
        print(f"warning: {_size(total)} is more than this machine's {_size(memory)} of memory: "
              "a node here could not allocate it", file=sys.stderr)
    vlm, expert, vision = config.vlm, config.expert, config.vision
    print(f"checkpoint  {info.path} ({info.format} layout)")
    print(f"parameters  {info.num_parameters / 1e6:.1f} M, stored as "
          + ", ".join(f"{n} x {d}" for d, n in sorted(info.dtypes.items()))
          + "; every tensor the model needs, in its shape")
    print(f"vision      {vision.depth} layers x {vision.width} wide (mlp {vision.mlp_dim}, "
          f"{vision.num_heads} heads), {vision.image_size} px images in {vision.patch_size} px "
          f"patches = {vision.num_patches} tokens per camera")
    print(f"language    {vlm.depth} layers x {vlm.width} wide (mlp {vlm.mlp_dim}), "
          f"{vlm.num_heads} heads / {vlm.num_kv_heads} kv heads x {vlm.head_dim}, vocabulary "
          f"{config.vocab_size}")
    print(f"expert      {expert.depth} layers x {expert.width} wide (mlp {expert.mlp_dim})")
    print(f"actions     horizon {config.action_horizon} x {config.action_dim} dims, "
          f"{config.num_denoise_steps} denoise steps")
    print(f"statistics  {normalization.source}" + "".join(
        f"; {what} {len(stats.low)} dims" for what, stats in
        (("state", normalization.state), ("actions", normalization.actions)) if stats))
    print(f"prompt      state {config.state_prompt}" + {
        "padded": f" (padded to max_state_dim {config.state_dim})",
        "robot": " (the robot's own values, as openpi)", "none": ""}[config.state_prompt]
        + f", at most {config.max_prompt_tokens} tokens")
    print("tokenizer   " + (f"PaliGemma SentencePiece {args.tokenizer} ({text.vocab_size} "
                            "pieces)" if args.tokenizer else "bytes (the checkpoint's own)"))
    print(f"memory ({dtype}, {why}): weights {_size(weight_bytes)} + KV pool "
          f"{args.kv_pages} pages x {args.page_size} tokens = {_size(kv_bytes)} "
          f"({page_bytes / 1024:.0f} KiB/page) + action tier {action_tier / 2**20:.2f} MiB = "
          f"{_size(total)}")
    return 0


def _size(count: int) -> str:
    return f"{count / 2**30:.2f} GiB" if count >= 2**30 else f"{count / 2**20:.1f} MiB"


def add_commands(sub) -> None:
    from oxygen_ros.engine.config import EngineConfig
    from oxygen_ros.engine.parameters import specs

    run = sub.add_parser("run", help=cmd_run.__doc__)
    add_node_options(run)
    run.add_argument("--duration", type=bounded(float, least=0, most=LONGEST_TIME_S), default=0.0,
                     help="seconds (default 0: until Ctrl-C); the exit status is non-zero "
                          "if a node failed, also as it was stopped")
    run.add_argument("--single-process", action="store_true",
                     help="both nodes in this one process instead: image decoding then shares "
                          "the engine's interpreter (a burst of camera frames can delay "
                          "actions), an exception or crash in one node stops both, and no "
                          "node can be restarted alone; for debugging")
    run.set_defaults(func=cmd_run)

    replay = sub.add_parser("replay", help=cmd_replay.__doc__)
    replay.add_argument("bag", help="rosbag2 directory or .mcap / .db3 file")
    replay.add_argument("--rate", type=bounded(float, least=1e-3, most=1e3), default=1.0,
                        help="speed factor, 0.001 to 1000 (default 1; keep 1 with --clock: "
                             "use_sim_time nodes' plans would not run at the engine's pace)")
    replay.add_argument("--loop", action="store_true", help="start over at the end")
    replay.add_argument("--start-offset", type=bounded(float, least=0, most=LONGEST_TIME_S),
                        default=0.0,
                        help="skip this many seconds of the bag (default 0)")
    replay.add_argument("--remap", action="append", type=remap_pair, metavar="OLD:=NEW",
                        help="rename a topic")
    replay.add_argument("--namespace", default="", metavar="ROBOT",
                        help="publish every topic under /ROBOT/ (after --remap), as a fleet "
                             "server's robot ROBOT reads it")
    replay.add_argument("--topics", nargs="+",
                        help="replay only these topics (as recorded, before --remap)")
    # restamped headers are wall time, /clock bag time: no node could use both
    stamps = replay.add_mutually_exclusive_group()
    stamps.add_argument("--restamp", action="store_true",
                        help="rewrite header stamps to the current time (wall-clock nodes)")
    replay.add_argument("--qos-overrides", metavar="YAML",
                        help="per-topic QoS (history, depth, reliability, durability), as "
                             "ros2 bag play --qos-profile-overrides-path takes")
    stamps.add_argument("--clock", type=bounded(float, least=0, most=1e3), default=0.0,
                        metavar="HZ",
                        help="publish /clock from bag time at HZ, at most 1000 "
                             "(use_sim_time nodes, the recorded stamps kept; default 0: no "
                             "/clock; not with --restamp)")
    replay.add_argument("--wait-for-subscribers",
                        type=bounded(float, least=0, most=LONGEST_WAIT_S), default=0.0,
                        metavar="S",
                        help="wait up to S seconds (at most an hour) until every topic has "
                             "a subscriber (default 0)")
    replay.add_argument("--delay", type=bounded(float, least=0, most=LONGEST_WAIT_S), default=0.5,
                        help="then wait this many seconds (at most an hour) before the "
                             "first message (default 0.5)")
    replay.add_argument("--start-on-stdin", action="store_true",
                        help="then print a 'ready:' line and start when a line comes on "
                             "standard input (several replays started together, as "
                             "oxygen-ros demo --robots starts its robots' bags)")
    replay.set_defaults(func=cmd_replay)

    inspect = sub.add_parser("inspect", help=cmd_inspect.__doc__)
    inspect.add_argument("checkpoint", help="checkpoint directory or model.safetensors")
    pool = specs(EngineConfig)
    inspect.add_argument("--kv-pages", type=bounded(int, least=pool["num_pages"].range[0],
                                                 most=pool["num_pages"].range[1]),
                         default=pool["num_pages"].default,
                         help=f"KV pool pages (default {pool['num_pages'].default}, the "
                              "node's num_pages)")
    inspect.add_argument("--page-size", type=bounded(int, least=pool["page_size"].range[0],
                                                 most=pool["page_size"].range[1]),
                         default=pool["page_size"].default,
                         help=f"tokens per page (default {pool['page_size'].default})")
    cameras = len(pool["camera_names"].default)
    inspect.add_argument("--cameras", type=bounded(int, least=1, most=16), default=cameras,
                         help=f"cameras each observation brings (default {cameras}, as the "
                              "node's camera_names): the KV pool must hold their prefix")
    inspect.add_argument("--heads", type=bounded(int, least=1), nargs=3,
                         metavar=("HEADS", "KV_HEADS", "HEAD_DIM"),
                         help="Gemma attention shape, for a variant the loader does not know")
    inspect.add_argument("--vision-heads", type=bounded(int, least=0), default=0,
                         help="SigLIP heads (default: width / 72, else width / 64)")
    inspect.add_argument("--asset-id", default="",
                         help="which assets/<id>/norm_stats.json of an openpi checkpoint, as the "
                              "node's asset_id (default: the only one)")
    inspect.add_argument("--normalization", default="checkpoint",
                         choices=["checkpoint", "identity"],
                         help="checkpoint (default, the node's normalization: ''): its "
                              "statistics must be there; identity (the node's normalization: "
                              "identity): none needed")
    inspect.add_argument("--state-prompt", default="", choices=STATE_PROMPTS,
                         help="how the state enters the prompt, as the node's state_prompt "
                              "(default: as the checkpoint's layout was trained)")
    inspect.add_argument("--tokenizer", default="",
                         help="PaliGemma SentencePiece .model file, as the node's tokenizer "
                              "(a π0.5 checkpoint needs it; default: none, which only a "
                              "checkpoint trained on bytes runs with)")
    add_dtype(inspect, "dtype to size weights and cache for",
              auto="as a node on this machine's CPU; for a GPU node give bfloat16 where it "
                   "has bf16 tensor cores")
    inspect.set_defaults(func=cmd_inspect)
