#!/usr/bin/env python3
"""One prepared check of oxygen_ros on a GPU, in stages; each stage runs in its own process
under a time budget, so the check always finishes and writes what it measured.

Stages, in order:
  kernels       the Triton decode and action-suffix kernels, compiled for the device
                (interpreted on a CPU), against the reference attention in float32 and
                bfloat16 over random page layouts: max abs error per case
  parity        the whole model (--preset, random weights, --dtype) through the kernels
                against the reference attention path: max action difference and how many
                of 24 greedy tokens agree; RTC-guided chunks of one and two robots from the
                guided loop's CUDA graphs against the eager loop
  bench_model   bench-model at the preset's dims with 3 cameras: prefix prefill, denoising,
                chunk from a new observation and from a cached prefix, decode tokens/s at
                batch 1/4/16, decode step / (weight bytes / measured copy bandwidth),
                prefill / measured matmul peak (8192² on CUDA), and from NVML's energy
                counter joules per chunk and per decoded token; eager, then with CUDA
                graphs (CUDA only)
  bench_engine  the engine benchmark (isolated / shared_kv / oxygen) at the preset's dims
  profile       where the time goes: the kernels (operators on a CPU) of one prefill, one
                denoising and eight batch-1 decode steps, eager, by total time
                (torch.profiler)

Writes OUT/gpu_check.json ({"environment": ..., "stages": {name: {"status": ok | failed |
timeout | skipped, "seconds": ..., "result": ...}}}) and OUT/gpu_check.log; exits 1 if a
stage failed (an error, a result outside its tolerance) or ran out of time. Run it with a
Python that has torch and triton:
  python3 tools/gpu_check.py --out "$OUT"                      # the GPU machine (pi05, bf16)
  .venv/bin/python tools/gpu_check.py --device cpu --preset small   # dry run on a CPU
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STAGES = ("kernels", "parity", "bench_model", "bench_engine", "profile")
BUDGETS = {"kernels": 60, "parity": 80, "bench_model": 160, "bench_engine": 140, "profile": 60}


def parse(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gpu_check.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--preset", default="pi05", help="model preset (default pi05)")
    parser.add_argument("--dtype", choices=["bfloat16", "float32"],
                        help="default: bfloat16 on cuda, float32 on cpu")
    parser.add_argument("--out", default=os.environ.get("OUT", "build/gpu_check"),
                        help="output folder (default $OUT, else build/gpu_check)")
    parser.add_argument("--stages", nargs="+", choices=STAGES, default=list(STAGES))
    parser.add_argument("--budget-scale", type=float, default=1.0,
                        help="multiply every stage's time budget (default 1: 500 s in all)")
    parser.add_argument("--frames", type=int, default=20, help="bench_engine frames")
    parser.add_argument("--stage", help=argparse.SUPPRESS)      # child: run one stage
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.dtype = args.dtype or ("bfloat16" if args.device == "cuda" else "float32")
    return args


# -- the stages (run in a child process) ------------------------------------------------
def stage_kernels(args) -> dict:
    import torch

    from oxygen_ros.cache import paged_attention as reference
    from oxygen_ros.cache import triton_attention

    head_dim = 256 if args.preset == "pi05" else 64
    device = torch.device(args.device)
    out = {}
    for dtype, tolerance in ((torch.float32, 1e-4), (torch.bfloat16, 3e-2)):
        g = torch.Generator().manual_seed(0)
        page_size, pages, kv_heads, heads = 16, 64, 1, 8
        k_pages = torch.randn(pages, page_size, kv_heads, head_dim, generator=g)
        v_pages = torch.randn(pages, page_size, kv_heads, head_dim, generator=g)
        lengths = [1, 17, 300, 700]
        width = -(-max(lengths) // page_size)
        tables = torch.stack([torch.randperm(pages, generator=g)[:width] for _ in lengths])
        lens = torch.tensor(lengths)
        q = torch.randn(len(lengths), heads, head_dim, generator=g)
        suffix_q = torch.randn(1, 50, heads, head_dim, generator=g)
        extra_k = torch.randn(1, 50, kv_heads, head_dim, generator=g)
        extra_v = torch.randn(1, 50, kv_heads, head_dim, generator=g)
        scale = head_dim ** -0.5
        expected_decode = reference.paged_attention(q[:, None], k_pages, v_pages, tables, lens,
                                                    scale)[:, 0]
        expected_suffix = reference.paged_attention(suffix_q, k_pages, v_pages, tables[2:3],
                                                    lens[2:3], scale, extra_k=extra_k,
                                                    extra_v=extra_v)
        dev = [t.to(device, dtype) if t.is_floating_point() else t.to(device)
               for t in (q, k_pages, v_pages, tables, lens, suffix_q, extra_k, extra_v)]
        decode = triton_attention.decode_attention(*dev[:5], scale)
        suffix = triton_attention.suffix_attention(dev[5], dev[1], dev[2], dev[3][2:3],
                                                   dev[4][2:3], dev[6], dev[7], scale)
        errors = {"decode": (decode.float().cpu() - expected_decode).abs().max().item(),
                  "suffix": (suffix.float().cpu() - expected_suffix).abs().max().item()}
        out[str(dtype).split(".")[1]] = {"max_abs_error": errors, "tolerance": tolerance,
                                         "ok": max(errors.values()) <= tolerance}
    out["ok"] = all(v["ok"] for v in out.values() if isinstance(v, dict))
    return out


def _model_and_prefix(args, pad_prompt: bool = False):
    """(model, prefix): the preset's model (random weights, drawn on the device in the
    dtype) and one observation's prefix (random views, a π0.5 prompt, padded to
    max_prompt_tokens as π0.5 pads it where pad_prompt)."""
    import numpy as np
    import torch

    from oxygen_ros.model.config import preset
    from oxygen_ros.model.pi05 import Pi05Model
    from oxygen_ros.model.prefix import build_prefix
    from oxygen_ros.model.prompt import pi05_prompt
    from oxygen_ros.model.tokenizer import ByteTokenizer

    device, config = torch.device(args.device), preset(args.preset)
    with device:
        model = Pi05Model(config, seed=0, dtype=getattr(torch, args.dtype)).to(device).eval()
    rng = np.random.default_rng(0)
    cameras = ["base", "left_wrist", "right_wrist"][:config.num_cameras]
    size = config.vision.image_size
    images = {c: rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for c in cameras}
    tokens = ByteTokenizer().encode(pi05_prompt("pick up the red cup", np.zeros(14),
                                                config.state_dim))
    if pad_prompt:
        tokens = (tokens * config.max_prompt_tokens)[:config.max_prompt_tokens]
    return model, build_prefix(config, cameras, images, tokens)


def stage_parity(args) -> dict:
    import torch

    from oxygen_ros.cache import attention
    from oxygen_ros.cache.kv_cache import KVCache

    dtype, device = getattr(torch, args.dtype), torch.device(args.device)
    model, prefix = _model_and_prefix(args)
    config = model.config
    noise = torch.randn(1, config.action_horizon, config.action_dim,
                        generator=torch.Generator().manual_seed(0))

    def run(use_triton: bool):
        attention._use_triton = lambda q, k, flag=use_triton: flag
        cache = KVCache.for_model(config, num_pages=128, page_size=16, dtype=dtype,
                                  device=device)
        table = model.prefill(prefix, cache, reuse=False)
        actions = model.sample_actions([table], noise, cache).float().cpu()
        assert cache.reserve(table, 32)
        text = [int(model.extend(table, [1, 2, 3], cache).argmax())]
        while len(text) < 24:
            text.append(int(model.decode([table], [text[-1]], cache)[0].argmax()))
        return actions, text

    reference_actions, reference_text = run(False)
    kernel_actions, kernel_text = run(True)      # the kernels stay on: the guided check too
    agree = sum(a == b for a, b in zip(reference_text, kernel_text))
    first_diff = next((i for i, (a, b) in enumerate(zip(reference_text, kernel_text))
                       if a != b), None)
    difference = (kernel_actions - reference_actions).abs().max().item()
    guided = _guided_graph_difference(model, prefix, noise, dtype, device)
    tolerance = 1e-3 if dtype == torch.float32 else 5e-2
    return {"max_action_difference": difference, "tokens_agreeing": agree,
            "first_token_difference": first_diff, "tokens": 24,
            "guided_graph_difference": guided,
            "ok": difference <= tolerance and guided <= tolerance}


def _guided_graph_difference(model, prefix, noise, dtype, device) -> float:
    """Max difference between RTC-guided chunks from the guided loop's CUDA graphs (their
    static paths eagerly on a CPU) and from the eager loop: one robot in a one-row graph,
    two (the same view, different plans) in a two-row graph."""
    import torch

    from oxygen_ros.cache.kv_cache import KVCache
    from oxygen_ros.engine import rtc
    from oxygen_ros.engine.rtc_graph import GuidedActionRunner
    from oxygen_ros.engine.rtc_settings import RTCSettings
    from oxygen_ros.model.cuda_graphs import CudaGraphs

    config, settings = model.config, RTCSettings()
    cache = KVCache.for_model(config, num_pages=128, page_size=16, action_batch=2,
                              dtype=dtype, device=device)
    tables = [model.prefill(prefix, cache, reuse=False) for _ in range(2)]
    graphs = CudaGraphs(model, cache, max_tokens=prefix.num_tokens + 64, buckets=(1,))
    runners = {rows: GuidedActionRunner(model, graphs, settings, rows=rows) for rows in (1, 2)}
    worst = 0.0
    for rows in (1, 2):
        plans = [(torch.randn(config.action_horizon, config.action_dim,
                              generator=torch.Generator().manual_seed(row)), 5 + row)
                 for row in range(rows)]
        batch_noise = noise.expand(rows, -1, -1).to(device)
        guide = rtc.guide(plans, batch_noise, settings)
        inputs = model.action_inputs(tables[:rows], cache)
        eager = rtc.integrate(lambda x, t: model.velocity(inputs, x, t, cache), batch_noise,
                              config.num_denoise_steps, guide, settings)
        graphed = runners[rows].run(model.action_inputs(tables[:rows], cache), batch_noise,
                                    guide)
        worst = max(worst, (graphed - eager).abs().max().item())
    return worst


def stage_bench_model(args) -> dict:
    from dataclasses import asdict

    from oxygen_ros.bench import model as benchmark

    peak_size = 8192 if args.device == "cuda" else 2048
    result = {"eager": asdict(benchmark.run(args.preset, args.device, args.dtype,
                                            peak_size=peak_size))}
    Path(args.result).write_text(json.dumps(result, default=str))   # kept if time runs out
    if args.device == "cuda":
        result["cuda_graphs"] = asdict(benchmark.run(args.preset, args.device, args.dtype,
                                                     cuda_graphs=True, peak_size=peak_size))
    return result


def stage_bench_engine(args) -> dict:
    from oxygen_ros.bench import engine as benchmark

    workload = benchmark.Workload(preset=args.preset, device=args.device, dtype=args.dtype,
                                  frames=args.frames)
    return benchmark.run(workload)


def stage_profile(args) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from oxygen_ros.cache.kv_cache import KVCache

    dtype, device = getattr(torch, args.dtype), torch.device(args.device)
    model, prefix = _model_and_prefix(args, pad_prompt=True)
    config = model.config
    cache = KVCache.for_model(config, num_pages=256, page_size=16, dtype=dtype, device=device)
    noise = torch.randn(1, config.action_horizon, config.action_dim, device=device,
                        dtype=dtype)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA]
                                           if device.type == "cuda" else [])

    def prefill():
        cache.free(model.prefill(prefix, cache, reuse=False))

    table = model.prefill(prefix, cache, reuse=False)
    assert cache.reserve(table, 64)
    token = [int(model.extend(table, [1, 2, 3], cache).argmax())]

    def decode():
        for _ in range(8):
            token[0] = int(model.decode([table], token, cache)[0].argmax())

    def own_us(event) -> float:      # kernels' time on a GPU, operators' on a CPU
        return event.self_device_time_total if device.type == "cuda" \
            else event.self_cpu_time_total

    passes = {"prefill": prefill,
              "denoise": lambda: model.sample_actions([table], noise, cache),
              "decode_8_steps": decode}
    out = {}
    for name, work in passes.items():
        work()                                    # warm-up: kernels compiled, caches filled
        with profile(activities=activities) as prof:
            work()
            if device.type == "cuda":
                torch.cuda.synchronize()
        events = [e for e in prof.key_averages() if own_us(e) > 0
                  and (device.type != "cuda" or e.device_type.name == "CUDA")]
        timed = sorted(((e.key, own_us(e) / 1e3, e.count) for e in events),
                       key=lambda row: -row[1])
        out[name] = {"device_ms": round(sum(ms for _, ms, _ in timed), 3),
                     "kernels": len(timed), "launches": sum(n for *_, n in timed),
                     "top": [{"name": key[:120], "ms": round(ms, 3), "calls": n}
                             for key, ms, n in timed[:12]]}
    return out


# -- the driver ------------------------------------------------------------------------------
def environment(args) -> dict:
    info = {"python": sys.version.split()[0], "time": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "device": args.device, "preset": args.preset, "dtype": args.dtype}
    try:
        import torch
        info["torch"] = torch.__version__
        if args.device == "cuda" and torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name()
            info["cuda"] = torch.version.cuda
        import triton
        info["triton"] = triton.__version__
    except Exception as error:  # noqa: BLE001 - say what is missing, go on
        info["error"] = repr(error)
    return info


def run_child(args) -> int:
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")   # before triton is imported
    sys.path.insert(0, str(REPO))
    result = globals()[f"stage_{args.stage}"](args)
    Path(args.result).write_text(json.dumps(result, indent=2, default=str))
    return 0


def main(argv=None) -> int:
    args = parse(argv)
    if args.stage:
        return run_child(args)
    try:
        import torch
    except ImportError:
        print(f"gpu_check: {sys.executable} has no torch; run it with a Python that has torch and "
              "triton (e.g. .venv/bin/python tools/gpu_check.py)", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_check: no CUDA device here; --device cpu makes a dry run", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"environment": environment(args), "stages": {}}
    log = open(out / "gpu_check.log", "w")

    def say(text: str) -> None:
        print(text, flush=True)
        log.write(text + "\n")
        log.flush()

    say(f"gpu_check: {json.dumps(report['environment'])}")
    for stage in STAGES:
        if stage not in args.stages:
            report["stages"][stage] = {"status": "skipped"}
            continue
        budget = BUDGETS[stage] * args.budget_scale
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
            result_path = handle.name
        command = [sys.executable, __file__, "--stage", stage, "--result", result_path,
                   "--device", args.device, "--preset", args.preset, "--dtype", args.dtype,
                   "--frames", str(args.frames)]
        started = time.monotonic()
        try:
            child = subprocess.run(command, capture_output=True, text=True, timeout=budget,
                                   cwd=REPO)
            status = "ok" if child.returncode == 0 else "failed"
            output = child.stdout + child.stderr
        except subprocess.TimeoutExpired as error:
            status = "timeout"
            output = "".join(part.decode(errors="replace") if isinstance(part, bytes)
                             else part or "" for part in (error.stdout, error.stderr))
        entry = {"status": status, "seconds": round(time.monotonic() - started, 1),
                 "budget_s": budget}
        if status == "ok":
            entry["result"] = json.loads(Path(result_path).read_text())
            if entry["result"].get("ok") is False:
                entry["status"] = status = "failed"     # ran, but outside its tolerance
        else:
            entry["output_tail"] = output[-3000:]
            if Path(result_path).stat().st_size:     # what the stage wrote before it stopped
                entry["partial_result"] = json.loads(Path(result_path).read_text())
        Path(result_path).unlink(missing_ok=True)
        report["stages"][stage] = entry
        say(f"[{stage}] {status} in {entry['seconds']} s"
            + (f": {json.dumps(entry['result'], default=str)[:1500]}" if "result" in entry
               else f"\n{entry['output_tail']}"))
        (out / "gpu_check.json").write_text(json.dumps(report, indent=2, default=str))
    say(f"wrote {out / 'gpu_check.json'}")
    log.close()
    return 0 if all(s["status"] in ("ok", "skipped") for s in report["stages"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
