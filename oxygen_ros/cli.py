"""oxygen-ros command line: the demo and tools around the package."""

import argparse
import os
import sys
import threading
import time


def _ros_environment() -> None:
    # DDS traffic stays on this machine unless the user configured otherwise.
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")


def cmd_demo(args: argparse.Namespace) -> int:
    """Synthetic cameras -> camera_ingest -> inference, in one process, with live stats."""
    _ros_environment()
    import rclpy

    from oxygen_ros.ros.camera_ingest import CameraIngest
    from oxygen_ros.ros.executor import YieldingMultiThreadedExecutor
    from oxygen_ros.ros.inference_node import InferenceNode
    from oxygen_ros.ros.synthetic_camera import SyntheticCamera

    rclpy.init(args=["--ros-args", "-p", f"rate_hz:={args.camera_hz}"])
    camera, ingest, inference = SyntheticCamera(), CameraIngest(), InferenceNode()
    executor = YieldingMultiThreadedExecutor(num_threads=4)
    for node in (camera, ingest, inference):
        executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    start = time.monotonic()
    last_count, last_time = 0, start
    try:
        while time.monotonic() - start < args.duration:
            time.sleep(1.0)
            now, count = time.monotonic(), inference.observations
            elapsed = now - start
            rate = (count - last_count) / (now - last_time)
            last_count, last_time = count, now
            print(f"[{elapsed:5.1f}s] camera frames {camera.frames:4d} | observations "
                  f"{count:4d} ({rate:5.1f} Hz) | images {inference.last_shapes} | "
                  f"ingest->inference {inference.last_latency_ms:6.1f} ms", flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        executor.shutdown(timeout_sec=2.0)
        stats = ingest.sync.stats
        print(f"summary: {camera.frames} camera ticks, {stats.published} observations "
              f"published, {inference.observations} received; dropped {stats.dropped}, "
              f"unpaired {stats.unpaired}, missing cameras {stats.missing}")
        for node in (camera, ingest, inference):
            node.destroy_node()
        rclpy.try_shutdown()
    return 0 if inference.observations > 0 else 1


def cmd_bench_model(args: argparse.Namespace) -> int:
    """Model benchmark: chunk latency, decode tokens/s, distance from the bandwidth bound."""
    import json
    from dataclasses import asdict

    import torch

    from oxygen_ros.model import benchmark

    torch.set_num_threads(args.threads) if args.threads else None
    result = benchmark.run(args.preset, args.device, getattr(torch, args.dtype),
                           batches=tuple(args.batches), repeats=args.repeats)
    print(benchmark.report(result))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(asdict(result), handle, indent=2)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    """Engine benchmark: isolated, shared_kv and oxygen side by side on one workload."""
    from pathlib import Path

    import torch

    from oxygen_ros.engine import benchmark

    if args.threads:
        torch.set_num_threads(args.threads)
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="oxygen-ros", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help=cmd_demo.__doc__)
    demo.add_argument("--duration", type=float, default=10.0, help="seconds to run (default 10)")
    demo.add_argument("--camera-hz", type=float, default=15.0,
                      help="synthetic camera rate (default 15)")
    demo.set_defaults(func=cmd_demo)

    bench = sub.add_parser("bench", help=cmd_bench.__doc__)
    defaults = __import__("oxygen_ros.engine.benchmark", fromlist=["Workload"]).Workload()
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
    bench.add_argument("--threads", type=int, default=0, help="torch CPU threads")
    bench.add_argument("--json", help="write the results to this JSON file (and a PNG beside)")
    bench.add_argument("--plot", help="PNG path (default: beside --json)")
    bench.set_defaults(func=cmd_bench)

    bench_model = sub.add_parser("bench-model", help=cmd_bench_model.__doc__)
    bench_model.add_argument("--preset", default="small", help="model preset (default small)")
    bench_model.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    bench_model.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    bench_model.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16],
                             help="decode batch sizes (default 1 4 16)")
    bench_model.add_argument("--repeats", type=int, default=5, help="timed repeats (median)")
    bench_model.add_argument("--threads", type=int, default=0,
                             help="torch CPU threads (default: torch's choice)")
    bench_model.add_argument("--json", help="also write the numbers to this JSON file")
    bench_model.set_defaults(func=cmd_bench_model)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
