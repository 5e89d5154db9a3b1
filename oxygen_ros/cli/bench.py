"""oxygen-ros benchmarks: bench (the engine's modes), bench-model, bench-switch, bench-ingest,
bench-fleet."""

import argparse
import sys
from dataclasses import asdict, fields
from pathlib import Path

from oxygen_ros.bench.report import write_json
from oxygen_ros.bench.workloads import SwitchWorkload, Workload
from oxygen_ros.cli.options import (add_dtype, add_json, add_node_options, add_threads,
                                    bounded, device_error, output_file, ros_environment,
                                    seed_option, usage_error)
from oxygen_ros.cli.demo import demo_bag_duration, demo_configuration
from oxygen_ros.model.config import PRESETS

DEMO_CHECKPOINT = "package://oxygen_ros/models/demo"


def cmd_bench(args: argparse.Namespace) -> int:
    """Engine benchmark: isolated, shared_kv and oxygen side by side on one workload."""
    from oxygen_ros import progress
    from oxygen_ros.bench import engine as benchmark
    from oxygen_ros.engine.threads import apply_torch_threads

    workload = Workload(**{f.name: getattr(args, f.name) for f in fields(Workload)
                           if hasattr(args, f.name)})
    refused = device_error("bench", args.device)
    if refused:
        return refused
    try:
        benchmark.engine_config(workload)
    except ValueError as error:
        return usage_error("bench", str(error))
    apply_torch_threads(args.threads)
    frames = progress.bar(workload.warmup_frames + workload.frames, "frames", "frame")
    result = benchmark.run(workload, progress=lambda done, _: frames.update(done - frames.n))
    frames.close()
    print(benchmark.table(result))
    if args.json:
        write_json(result, args.json)
    plot_path = args.plot or (str(Path(args.json).with_suffix(".png")) if args.json else None)
    if plot_path:
        benchmark.plot(result, plot_path)
        print(f"wrote {args.json or ''} {plot_path}".replace("  ", " "))
    return 0


def cmd_bench_model(args: argparse.Namespace) -> int:
    """Model benchmark: load time and peak RSS, chunk latency, decode tokens/s, distance
    from the bandwidth bound and the prefill's share of the matmul peak (on CUDA with NVML,
    joules per chunk and per token too); one column per dtype."""
    from oxygen_ros.bench import model as benchmark
    from oxygen_ros.engine.threads import apply_torch_threads
    from oxygen_ros.model.checkpoint import CheckpointError
    from oxygen_ros.model.precision import resolve_dtype

    refused = device_error("bench-model", args.device)
    if refused:
        return refused
    dtypes: dict[str, str] = {}       # the dtype each run measures -> the name asked for
    for name in args.dtype:
        resolved = resolve_dtype(name, args.device)[0]
        if resolved in dtypes:
            print(f"--dtype {name} is {resolved} here, as {dtypes[resolved]} is: measured once")
        else:
            dtypes[resolved] = name
    threads = apply_torch_threads(args.threads)
    print(f"torch threads: {threads} (the inference node's choice unless --threads)")
    try:
        results = [benchmark.run(args.preset, args.device, dtype, batches=tuple(args.batches),
                                 decode_steps=args.decode_tokens, repeats=args.repeats,
                                 cuda_graphs=args.cuda_graphs, checkpoint=args.checkpoint,
                                 compile=compiled, robots=tuple(args.robots))
                   for dtype in dtypes.values() for compiled in COMPILE_RUNS[args.compile]]
    except CheckpointError as error:     # raised while loading, before anything is timed
        return usage_error("bench-model", str(error))
    print(benchmark.report(results))
    if args.json:
        write_json(asdict(results[0]) if len(results) == 1
                   else {r.label: asdict(r) for r in results}, args.json)
    return 0


# --compile: the runs of each dtype (eager, compiled)
COMPILE_RUNS = {"no": (False,), "yes": (True,), "both": (False, True)}


def dtype_list(text: str) -> list[str]:
    from oxygen_ros.model.precision import DTYPE_NAMES

    names = text.split(",")
    wrong = [n for n in names if n not in DTYPE_NAMES]
    if wrong:
        raise argparse.ArgumentTypeError(f"{', '.join(wrong)}: choose from "
                                         f"{', '.join(DTYPE_NAMES)}")
    return names


def cmd_bench_switch(args: argparse.Namespace) -> int:
    """Chunk switching: Real-Time Chunking (vjp, error), cross-fade and none side by side."""
    from oxygen_ros import progress
    from oxygen_ros.bench import switch as switch_benchmark
    from oxygen_ros.engine.threads import apply_torch_threads
    from oxygen_ros.model.loading import load_model

    workload = SwitchWorkload(
        delays=tuple(args.delays), chunks=args.chunks, period_steps=args.period,
        blend_s=args.blend_s,
        default_guidance=args.guidance, execution_horizon=args.execution_horizon,
        schedule=args.schedule, max_guidance_weight=args.max_guidance_weight, seed=args.seed,
        world_seed=args.world)
    try:
        switch_benchmark.engine_config(workload)
    except ValueError as error:
        return usage_error("bench-switch", str(error))
    apply_torch_threads(args.threads)
    checkpoint = args.checkpoint
    if checkpoint is None and args.preset is None:
        checkpoint = DEMO_CHECKPOINT
    try:
        loaded = load_model(preset=args.preset or "small", checkpoint=checkpoint or "",
                            tokenizer=args.tokenizer or "", seed=args.seed, dtype=args.dtype)
    except (ValueError, OSError) as error:       # CheckpointError is a ValueError
        return usage_error("bench-switch", str(error))
    horizon = loaded.model.config.action_horizon
    for fraction in args.delays:
        steps = switch_benchmark.delay_steps(fraction, horizon)
        if steps >= horizon:
            return usage_error("bench-switch", f"--delays {fraction:g}: a delay of {steps} steps "
                                               f"leaves no step of the {horizon}-step chunk to "
                                               "switch in")
    delays = progress.bar(len(workload.delays), "delays", "delay")
    result = switch_benchmark.run(loaded, workload, progress=lambda _: delays.update())
    delays.close()
    print(switch_benchmark.table(result))
    if args.json:
        png = switch_benchmark.write(result, args.json)
        print(f"wrote {args.json} {png}")
    return 0


def cmd_bench_ingest(args: argparse.Namespace) -> int:
    """Ingest benchmark: decode + resize per camera frame, raw and JPEG, 480p to 1080p."""
    from oxygen_ros.bench import ingest as ingest_benchmark

    rows = ingest_benchmark.run(args.size, args.resize_mode, args.repeats)
    print(ingest_benchmark.table(rows))
    if args.json:
        write_json(rows, args.json)
        print(f"wrote {args.json}")
    return 0


def cmd_bench_fleet(args: argparse.Namespace) -> int:
    """Fleet benchmark: N demo robots through one fleet server against N single-robot
    servers (separate processes, each with its own model), N = 1, 2, 4, 8 interleaved;
    the largest N each serves at targets; then a fleet of 4 with one robot's camera killed."""
    if args.camera_killed == 1:
        return usage_error("bench-fleet", "--camera-killed needs 2 robots or more (0: skip)")
    try:
        # every run names its robots, the one of N = 1 too
        configuration = demo_configuration(args, max(args.robots + [args.camera_killed]))
    except ValueError as error:
        return usage_error("bench-fleet", str(error))
    ros_environment()
    from oxygen_ros.bench import fleet

    from oxygen_ros.ros.demo_job import StartFailed

    try:
        result = fleet.run(tuple(args.robots), configuration.node_args[1:], args.seed,
                           args.duration, configuration.memory_period_s, args.camera_killed,
                           progress=lambda run: print(fleet.line(run), flush=True))
    except StartFailed as error:
        print(f"oxygen-ros bench-fleet: {error}", file=sys.stderr, flush=True)
        return 1
    print(fleet.table(result))
    if args.json:
        write_json(result, args.json)
        plot_path = str(Path(args.json).with_suffix(".png"))
        fleet.plot(result, plot_path)
        print(f"wrote {args.json} {plot_path}")
    return 0


def _add_bench(sub) -> None:
    bench = sub.add_parser("bench", help=cmd_bench.__doc__)
    defaults = Workload()
    bench.add_argument("--preset", default=defaults.preset, choices=list(PRESETS),
                       help=f"model preset, random weights (default {defaults.preset})")
    bench.add_argument("--frames", type=bounded(int, least=1), default=defaults.frames,
                       help=f"measured frames (default {defaults.frames})")
    bench.add_argument("--denoise-steps", type=bounded(int, least=1),
                       default=defaults.denoise_steps,
                       help=f"flow-matching steps per chunk (default {defaults.denoise_steps})")
    bench.add_argument("--cameras", type=int, default=defaults.cameras, choices=[1, 2, 3],
                       help=f"camera views per observation (default {defaults.cameras})")
    bench.add_argument("--decode-tokens", type=bounded(int, least=1),
                       default=defaults.decode_tokens,
                       help=f"max new tokens per dialogue request (default "
                            f"{defaults.decode_tokens})")
    bench.add_argument("--tokens-per-frame", type=bounded(int, least=1),
                       default=defaults.tokens_per_frame,
                       help=f"k: decode steps per frame in oxygen mode (default "
                            f"{defaults.tokens_per_frame})")
    bench.add_argument("--dialogue-per-frame", type=bounded(float, least=0, most=1000),
                       default=defaults.dialogue_per_frame,
                       help=f"mean new dialogue requests per frame (Poisson; default "
                            f"{defaults.dialogue_per_frame:g})")
    bench.add_argument("--memory-period-frames", type=bounded(int, least=0),
                       default=defaults.memory_period_frames,
                       help=f"a memory summary every N frames, 0 turns memory off (default "
                            f"{defaults.memory_period_frames})")
    bench.add_argument("--camera-every", type=bounded(int, least=1),
                       default=defaults.camera_every,
                       help=f"a new camera image every N frames (default "
                            f"{defaults.camera_every})")
    bench.add_argument("--prefix-attention", default=defaults.prefix_attention,
                       choices=["bidirectional", "causal_prompt"],
                       help=f"(default {defaults.prefix_attention})")
    seed_option(bench, f"weights, images and request arrivals (default {defaults.seed})",
                defaults.seed)
    bench.add_argument("--device", default=defaults.device,
                       help=f"cpu or cuda (default {defaults.device})")
    add_dtype(bench)
    add_threads(bench)
    add_json(bench, plot=True)
    bench.add_argument("--plot", type=output_file, help="PNG path (default: beside --json)")
    bench.set_defaults(func=cmd_bench)


def _add_bench_switch(sub) -> None:
    from oxygen_ros.engine.config import EngineConfig
    from oxygen_ros.engine.parameters import specs

    switch = sub.add_parser("bench-switch", help=cmd_bench_switch.__doc__)
    defaults = SwitchWorkload()
    switch.add_argument("--checkpoint", help=f"a π0.5 checkpoint directory (default: the main "
                                             f"job's trained model, {DEMO_CHECKPOINT})")
    switch.add_argument("--preset", choices=list(PRESETS),
                        help="a model preset with random weights instead")
    switch.add_argument("--tokenizer",
                        help="PaliGemma tokenizer (with a checkpoint that needs it)")
    switch.add_argument("--delays", type=bounded(float, least=0, below=1), nargs="+",
                        default=list(defaults.delays),
                        help="inference delays as fractions of the horizon, in [0, 1) "
                             f"(default {' '.join(f'{d:g}' for d in defaults.delays)})")
    switch.add_argument("--chunks", type=bounded(int, least=2, most=1000), default=defaults.chunks,
                        help=f"chunks per delay (switches = chunks - 1; default "
                             f"{defaults.chunks})")
    switch.add_argument("--period", type=bounded(int, least=0), default=defaults.period_steps,
                        help="steps between chunks; a longer one than H - delay is cut to it "
                             f"(default {defaults.period_steps}: the main job's 0.2 s frames "
                             "at 50 Hz; 0: H/2)")
    switch.add_argument("--blend-s", type=bounded(float, least=0, most=60),
                        default=defaults.blend_s,
                        help="the cross-fade's length, and RTC's least overlap after the "
                             f"frozen steps (default {defaults.blend_s:g})")
    switch.add_argument("--guidance", choices=["vjp", "error"], default=defaults.default_guidance,
                        help=f"the variant reported as modes.rtc and rtc_cost_ratio (default "
                             f"{defaults.default_guidance})")
    most = {name: spec.range[1] for name, spec in specs(EngineConfig).items() if spec.range}
    switch.add_argument("--execution-horizon",
                        type=bounded(int, least=0, most=most["rtc_execution_horizon"]),
                        default=defaults.execution_horizon,
                        help="chunk steps guided toward the plan, at least the frozen ones "
                             f"(default {defaults.execution_horizon}; 0: all the plan still "
                             "covers)")
    switch.add_argument("--schedule", choices=["zeros", "ones", "linear", "exp"],
                        default=defaults.schedule,
                        help=f"the guidance weights after the frozen steps (default "
                             f"{defaults.schedule})")
    switch.add_argument("--max-guidance-weight",
                        type=bounded(float, least=0, most=most["rtc_max_guidance_weight"]),
                        default=defaults.max_guidance_weight,
                        help=f"the guidance weight's cap (default "
                             f"{defaults.max_guidance_weight:g})")
    seed_option(switch, "the sampling noise (default 0)")
    add_dtype(switch)
    seed_option(switch, f"the tabletop world the observations come from (default "
                        f"{defaults.world_seed})", defaults.world_seed, name="--world")
    add_threads(switch)
    add_json(switch, plot=True)
    switch.set_defaults(func=cmd_bench_switch)


def add_commands(sub) -> None:
    _add_bench(sub)
    _add_bench_switch(sub)

    bench_model = sub.add_parser("bench-model", help=cmd_bench_model.__doc__)
    bench_model.add_argument("--preset", default="small", choices=list(PRESETS),
                             help="model preset (default small)")
    bench_model.add_argument("--checkpoint", default="",
                             help="a π0.5 checkpoint to load (memory-mapped) instead of the "
                                  "preset's random weights")
    bench_model.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    bench_model.add_argument("--dtype", type=dtype_list, default=["auto"],
                             help="auto, float32 or bfloat16, or several side by side: "
                                  "float32,bfloat16 (default auto: bfloat16 where the device "
                                  "has bf16 matrix units)")
    bench_model.add_argument("--batches", type=bounded(int, least=1), nargs="+",
                             default=[1, 4, 16],
                             help="decode batch sizes (default 1 4 16)")
    bench_model.add_argument("--robots", type=bounded(int, least=1), nargs="+", default=[],
                             help="robots served in one frame: each count's chunks from new "
                                  "observations, one batched prefill and denoising, e.g. 1 4 "
                                  "(the fleet server's action path for 4 ÷ 1; default none); "
                                  "with --cuda-graphs the graphs replay batches of one only")
    bench_model.add_argument("--decode-tokens", type=bounded(int, least=1), default=32,
                             help="decode steps per timed repeat (default 32)")
    bench_model.add_argument("--repeats", type=bounded(int, least=1), default=5,
                             help="timed repeats (median; default 5)")
    add_threads(bench_model)
    bench_model.add_argument("--cuda-graphs", action="store_true",
                             help="replay decode steps and denoising from CUDA graphs (CUDA)")
    bench_model.add_argument("--compile", choices=list(COMPILE_RUNS), default="no",
                             help="torch.compile the prefill, denoising and decode passes "
                                  "(yes), or run each dtype eager and compiled side by side "
                                  "(both); compiling takes minutes (default no)")
    add_json(bench_model)
    bench_model.set_defaults(func=cmd_bench_model)

    bench_ingest = sub.add_parser("bench-ingest", help=cmd_bench_ingest.__doc__)
    bench_ingest.add_argument("--size", type=bounded(int, least=1, most=4096), default=112,
                              help="model resolution (default 112, the small preset's)")
    bench_ingest.add_argument("--resize-mode", default="pad", choices=["pad", "stretch"],
                              help="letterbox (pad) or stretch to the square (default pad)")
    bench_ingest.add_argument("--repeats", type=bounded(int, least=1), default=20,
                              help="timed repeats (median; default 20)")
    add_json(bench_ingest)
    bench_ingest.set_defaults(func=cmd_bench_ingest)

    bench_fleet = sub.add_parser("bench-fleet", help=cmd_bench_fleet.__doc__)
    add_node_options(bench_fleet, preset="demo")
    bench_fleet.add_argument("--robots", type=bounded(int, least=1), nargs="+",
                             default=[1, 2, 4, 8],
                             help="fleet sizes, each served both ways (default 1 2 4 8)")
    bench_fleet.add_argument("--camera-killed", type=bounded(int, least=0), default=4,
                             metavar="N",
                             help="then a fleet of N whose last robot's camera_ingest is killed "
                                  "half a bag after its first command: how the others fare "
                                  "(default 4; 0 skips it)")
    bench_fleet.add_argument("--duration", type=demo_bag_duration,
                             default=8.0,
                             help="seconds of each robot's demo bag (default 8)")
    seed_option(bench_fleet, "robot i replays tabletop world seed+i (default 0)")
    add_json(bench_fleet, plot=True)
    bench_fleet.set_defaults(func=cmd_bench_fleet)
