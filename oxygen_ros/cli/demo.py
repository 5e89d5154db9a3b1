"""oxygen-ros verbs of the demo: the main job, its bags, training and judging its model."""

import argparse
import json
import sys
from pathlib import Path
from typing import NamedTuple

from oxygen_ros.cli.options import (LONGEST_BAG_S, add_json, add_node_options, add_threads,
                                    bounded, chosen_config, launch_arguments, new_folder,
                                    node_ros_args, output_file, param_overrides, planned_inference,
                                    ros_environment, seed_option, usage_error)

DEFAULT_DEMO_BAG = "build/demo_bag"      # as oxygen_ros.ros.demo_job (imported only to run)


def demo_bag_duration(text: str) -> float:
    """An argparse type: the length of a demo bag the verb writes (at the demo's camera
    rate), above 0, up to an hour, holding at least one camera frame."""
    from oxygen_ros.ros.demo_bag import DemoBagSpec

    seconds = bounded(float, above=0, most=LONGEST_BAG_S)(text)
    try:
        DemoBagSpec(duration_s=seconds)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return seconds


def cmd_demo(args: argparse.Namespace) -> int:
    """The main job: replay the demo bag through camera_ingest -> inference with the
    trained demo model on the CPU, each node in its own process, configured as `ros2 launch
    oxygen_ros humanoid.launch.py preset:=demo dry_run:=false` configures them; this process
    watches the outputs like a user's subscriber, prints live stats, a summary line and a
    summary JSON."""
    if args.kill_camera is not None and args.robots < 2:
        return usage_error("demo", f"--kill-camera needs --robots 2 or more, not {args.robots}")
    try:
        configuration = demo_configuration(args, args.robots if args.robots > 1 else 0)
    except ValueError as error:
        return usage_error("demo", str(error))
    if args.bag and Path(args.bag).exists():
        from oxygen_ros.ros.bag import check_readable
        try:
            check_readable(args.bag)
        except ValueError as error:
            return usage_error("demo", f"--bag {error}")
    ros_environment()
    from oxygen_ros.ros.demo_job import DemoJob, run_demo

    return run_demo(DemoJob(configuration.node_args[1:], args.bag, args.seed, args.duration,
                            args.summary, configuration.memory_period_s, args.robots,
                            camera_killed_at_s=args.kill_camera,
                            commands=not configuration.dry_run,
                            params_file=configuration.params_file,
                            overrides=configuration.overrides))


class DemoConfiguration(NamedTuple):
    arguments: dict          # the launch arguments the demo stands for
    node_args: list          # the nodes' --ros-args
    memory_period_s: float   # the memory period the summaries are scored against
    dry_run: bool            # the nodes publish no commands
    params_file: str         # the YAML given (with -p the nodes run a copy with them in it)
    overrides: dict          # the -p options: node -> name -> value


def demo_configuration(args: argparse.Namespace, named_robots: int = 0) -> DemoConfiguration:
    """What the demo runs: as the launch file with the options given (commands on unless
    --dry-run: it shows every output); with named_robots, camera_ingest runs under each of
    robot_0 … robot_<named_robots - 1> (0: one robot, no namespace)."""
    from oxygen_ros.ros import launch_plan

    arguments = launch_arguments(args, dry_run="false")
    config = chosen_config(arguments)
    names = launch_plan.demo_robot_names(named_robots)
    node_args = node_ros_args(arguments, config, args.param, names)
    overrides = param_overrides(args.param)
    parameters = planned_inference(arguments, config, args.param)
    if names and list(parameters["robots"]) not in ([], names):
        print(f"warning: demo --robots {named_robots} serves {', '.join(names)}, each fed from "
              f"its own bag: inference's robots {list(parameters['robots'])} are not used",
              file=sys.stderr, flush=True)
    return DemoConfiguration(arguments, node_args, float(parameters["memory_period_s"]),
                             bool(parameters["dry_run"]), str(config), overrides)


def cmd_make_demo_bag(args: argparse.Namespace) -> int:
    """Write a synthetic multi-camera bag: moving scene, joint states, dialogue requests."""
    from oxygen_ros.ros.bag import recorded_topics
    from oxygen_ros.ros.demo_bag import DemoBagSpec, write_demo_bag

    width, _, height = args.size.partition("x")
    if not (width.isdigit() and height.isdigit() and int(width) > 0 and int(height) > 0):
        return usage_error("make-demo-bag", f"--size {args.size!r}: expected WIDTHxHEIGHT, "
                                            "e.g. 640x480")
    from oxygen_ros.model.config import PRESETS
    from oxygen_ros.ros.image_conversion import ImageConversionError, check_dimensions

    try:
        check_dimensions(int(width), int(height))
    except ImageConversionError as error:
        return usage_error("make-demo-bag", f"--size {args.size}: camera_ingest drops every "
                                            f"frame of it by default ({error.kind}: {error})")
    sizes = sorted({preset.vision.image_size for preset in PRESETS.values()
                    if max(int(width), int(height)) * 4 < preset.vision.image_size})
    if sizes:
        print(f"warning: --size {args.size}: camera_ingest drops these frames as tiny_image "
              f"for a {', '.join(map(str, sizes))} px model (image_size; under a quarter of "
              "it), unless its tiny_images is use", file=sys.stderr, flush=True)
    try:
        spec = DemoBagSpec(duration_s=args.duration, camera_hz=args.camera_hz,
                           encoding=args.encoding, width=int(width), height=int(height),
                           grayscale=args.gray, storage=args.storage, seed=args.seed,
                           cameras=args.cameras)
    except ValueError as error:
        return usage_error("make-demo-bag", f"--duration, --camera-hz: {error}")
    path = write_demo_bag(args.path, spec)
    print(f"wrote {path}: {spec.duration_s:g} s, {spec.cameras} cameras {args.size} "
          f"{spec.encoding} at {spec.camera_hz:g} Hz ({spec.storage}); messages: "
          + ", ".join(f"{topic} {count}" for topic, count in recorded_topics(path).items()))
    return 0


def cmd_train_demo(args: argparse.Namespace) -> int:
    """Train the demo preset on tabletop worlds and save it as a lerobot pi05 checkpoint."""
    try:
        Path(args.out).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        return usage_error("train-demo", f"--out {args.out}: {error.strerror}")
    from oxygen_ros.demo.train import TrainConfig, train
    from oxygen_ros.engine.threads import apply_torch_threads

    apply_torch_threads(args.threads)
    config = TrainConfig(steps=args.steps, batch=args.batch, lr=args.lr, seed=args.seed,
                         time_budget_s=args.time_budget, eval_worlds=args.eval_worlds,
                         vision_steps=args.vision_steps, seeing_batch=args.seeing_batch,
                         precision=args.precision)
    print(json.dumps(train(Path(args.out), config), indent=2))
    return 0


def cmd_evaluate_demo(args: argparse.Namespace) -> int:
    """Judge a demo checkpoint on unseen tabletop worlds: every question at five moments,
    memory and actions (the manifest's metrics), and the demo's own questions on the frames
    make run answers them over."""
    from oxygen_ros.demo.evaluate import (
        compare_manifest,
        demo_moments,
        dtype_agreement,
        evaluate,
        report_lines,
    )
    from oxygen_ros.engine.threads import apply_torch_threads
    from oxygen_ros.model.loading import load_model, resolve

    try:
        apply_torch_threads(args.threads)
        loaded = load_model(checkpoint=args.checkpoint)
    except (ValueError, OSError) as error:       # CheckpointError is a ValueError
        return usage_error("evaluate-demo", str(error))
    model = loaded.model.eval()
    if model.config.tokenizer != "bytes" or loaded.normalization.actions is None:
        return usage_error("evaluate-demo", f"{args.checkpoint} is not a train-demo checkpoint "
                                            "(byte tokenizer and action statistics)")
    if args.bfloat16_agreement:
        other = load_model(checkpoint=args.checkpoint, dtype="bfloat16").model.eval()
        agreement = dtype_agreement(model, other, loaded.normalization, args.worlds,
                                    args.first_world, show_progress=True)
        result = {"checkpoint": args.checkpoint, "bfloat16_vs_float32": agreement}
    else:
        judged = {"worlds": args.worlds, "first_world": args.first_world, "show_progress": True}
        result = {"checkpoint": args.checkpoint,
                  "unseen_worlds": evaluate(model, loaded.normalization, **judged),
                  "demo_moments": demo_moments(model, loaded.normalization, **judged)}
        path = resolve(args.checkpoint)
        manifest_path = (path if path.is_dir() else path.parent) / "manifest.json"
        manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else None
        verdict = compare_manifest(result, manifest, args.first_world, args.worlds)
        for line in report_lines(result, args.first_world, args.worlds, verdict):
            print(line, file=sys.stderr)
    if args.json:
        from oxygen_ros.bench.report import write_json

        write_json(result, args.json)
    else:
        print(json.dumps(result, indent=2))
    return 0


def _add_train_demo(sub) -> None:
    train_demo = sub.add_parser("train-demo", help=cmd_train_demo.__doc__)
    train_demo.add_argument("--out", default="build/demo_checkpoint",
                            help="checkpoint directory (default build/demo_checkpoint)")
    train_demo.add_argument("--steps", type=bounded(int, least=1), default=2000,
                            help="joint training steps (default 2000)")
    train_demo.add_argument("--vision-steps", type=bounded(int, least=0), default=1000,
                            help="steps of the auxiliary patch loss alone before the joint "
                                 "training (default 1000; 2 x seeing-batch frames each)")
    train_demo.add_argument("--seeing-batch", type=bounded(int, least=1), default=16,
                            help="extra base-camera frames per step for the auxiliary "
                                 "patch loss (default 16)")
    train_demo.add_argument("--batch", type=bounded(int, least=1), default=8,
                            help="frames per step, each with every question about it (default 8)")
    train_demo.add_argument("--lr", type=bounded(float, above=0), default=1e-3,
                            help="peak AdamW learning rate (warm-up, then cosine; default 1e-3)")
    seed_option(train_demo, "weights, worlds, noise: same seed and threads, same run "
                            "(default 0)")
    train_demo.add_argument("--time-budget", type=bounded(float, above=0), default=1800.0,
                            help="stop training after this many seconds (default 1800)")
    train_demo.add_argument("--eval-worlds", type=bounded(int, least=1), default=24,
                            help="unseen worlds the saved metrics are measured on "
                                 "(default 24)")
    add_threads(train_demo)
    train_demo.add_argument("--precision", default="bf16", choices=["bf16", "fp32"],
                            help="matmuls of the training passes (bfloat16 autocast, float32 "
                                 "weights; default bf16: fast on CPUs with AVX512-BF16)")
    train_demo.set_defaults(func=cmd_train_demo)


def add_commands(sub) -> None:
    demo = sub.add_parser("demo", help=cmd_demo.__doc__)
    add_node_options(demo, preset="demo")
    demo.add_argument("--bag", help=f"an existing bag to replay as it is (default: write "
                                    f"{DEFAULT_DEMO_BAG} from --seed's world — also a --bag "
                                    "path that does not exist yet — and score the outputs "
                                    "against its ground truth)")
    seed_option(demo, "the tabletop world of the demo bag (default 0)")
    demo.add_argument("--duration", type=demo_bag_duration,
                      default=12.0,
                      help="length of the demo bag in seconds (default 12: the episodes "
                           "the demo model was trained on; it learned memory windows ending "
                           "at 4 and 8 s, later summaries are outside what it learned)")
    demo.add_argument("--robots", type=bounded(int, least=1), default=1,
                      help="robots served by the one inference process (default 1): robot_i "
                           "replays world seed+i under /robot_i/ through its own camera_ingest; "
                           "a summary per robot and a fleet line")
    demo.add_argument("--kill-camera", type=bounded(float, least=0, most=LONGEST_BAG_S),
                      metavar="SECONDS",
                      help="with --robots 2 or more: kill the last robot's camera_ingest this "
                           "long after its first command (its watchdog stops its commands; "
                           "the fleet line is over the others)")
    demo.add_argument("--summary", type=output_file, default="build/demo_summary.json",
                      help="write the summary JSON here (default build/demo_summary.json)")
    demo.set_defaults(func=cmd_demo)

    bag = sub.add_parser("make-demo-bag", help=cmd_make_demo_bag.__doc__)
    bag.add_argument("path", type=new_folder, help="new bag directory")
    bag.add_argument("--duration", type=bounded(float, above=0, most=LONGEST_BAG_S),
                     default=12.0, help="seconds (default 12)")
    bag.add_argument("--camera-hz", type=bounded(float, least=0.001, most=1000), default=15.0,
                     help="frames per second of each camera (default 15)")
    bag.add_argument("--encoding", default="jpeg",
                     choices=["rgb8", "bgr8", "mono8", "jpeg", "png"],
                     help="camera images: raw (rgb8, bgr8, mono8) or compressed (default jpeg)")
    bag.add_argument("--size", default="320x240", help="WIDTHxHEIGHT (default 320x240)")
    bag.add_argument("--gray", action="store_true", help="a gray scene")
    bag.add_argument("--storage", default="mcap", choices=["mcap", "sqlite3"],
                     help="rosbag2 storage (default mcap)")
    seed_option(bag, "which tabletop world (default 0)")
    bag.add_argument("--cameras", type=int, default=3, choices=[1, 2, 3],
                     help="base, left_wrist, right_wrist: the first N (default 3; the tiny "
                          "preset's config reads 2)")
    bag.set_defaults(func=cmd_make_demo_bag)

    _add_train_demo(sub)

    evaluate_demo = sub.add_parser("evaluate-demo", help=cmd_evaluate_demo.__doc__)
    evaluate_demo.add_argument("--checkpoint", default="package://oxygen_ros/models/demo",
                               help="a train-demo checkpoint directory or its model.safetensors "
                                    "(default the shipped one)")
    evaluate_demo.add_argument("--worlds", type=bounded(int, least=1), default=24,
                               help="unseen worlds to judge on (default 24, as the manifest)")
    evaluate_demo.add_argument("--first-world", type=bounded(int, least=0), default=0,
                               help="seed of the first (default 0; training worlds start at "
                                    "10000; compared with the manifest only from 0)")
    evaluate_demo.add_argument("--bfloat16-agreement", action="store_true",
                               help="instead: bfloat16 against float32 on the same worlds (the "
                                    "largest action difference, the share of equal answers)")
    add_threads(evaluate_demo)
    add_json(evaluate_demo, instead=True)
    evaluate_demo.set_defaults(func=cmd_evaluate_demo)
