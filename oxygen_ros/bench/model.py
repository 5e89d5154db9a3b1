"""Model-level benchmark: load time and peak memory, action chunk latency, decode
throughput, how far a decode step is from the memory-bandwidth bound (weight bytes ÷
bandwidth measured in the same run) and the prefill from the matmul peak (measured in the
same run too); on a GPU with NVML, the energy of a chunk and of a decoded token."""

import gc
import os
import resource
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

from oxygen_ros.bench.energy import EnergyMeter
from oxygen_ros.bench.report import median_ms
from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.model import checkpoint as checkpoints
from oxygen_ros.model.config import preset
from oxygen_ros.model.pi05 import Pi05Model
from oxygen_ros.model.precision import resolve_dtype
from oxygen_ros.model.prefix import build_prefix
from oxygen_ros.model.prompt import pi05_prompt
from oxygen_ros.model.tokenizer import ByteTokenizer
from oxygen_ros.process_memory import peak_rss_bytes, restart_peak_rss


@dataclass
class ModelBenchResult:
    preset: str
    device: str
    prefix_tokens: int
    prefill_ms: float
    denoise_ms: float
    chunk_ms: float
    chunk_cached_prefix_ms: float
    decode_tokens_per_s: dict[int, float]
    decode_step_ms: dict[int, float]
    weight_bytes: int
    bandwidth_gb_s: float
    bound_ratio: float      # decode step (batch 1) time / (weight bytes / bandwidth)
    dtype: str = "float32"
    dtype_reason: str = "as set"
    model_bytes: int = 0            # every parameter
    load_s: float = 0.0             # build (random weights) or load (a checkpoint)
    peak_rss_bytes: int = 0         # the process's peak during this run (see rss_since_start)
    prefill_gflop: float = 0.0      # matmul, convolution and attention FLOPs of one prefill
    matmul_peak_gflops: float = 0.0     # square matmuls in this dtype, best of the run
    prefill_peak_fraction: float = 0.0  # prefill GFLOP/s ÷ that peak
    compiled: bool = False          # Pi05Model.compile_passes() (first calls compile, untimed)
    # robots served in one frame -> their chunks from new observations (one batched prefill,
    # one batched denoising: the fleet server's action path)
    robots_chunk_ms: dict[int, float] = field(default_factory=dict)
    energy_source: str = ""         # what the energy numbers read, or why there are none
    power_w: float = 0.0            # mean GPU power while chunks run back to back
    chunk_joules: float = 0.0       # one chunk from a new observation
    decode_joules_per_token: dict[int, float] = field(default_factory=dict)  # per batch
    # the kernel could not restart the peak count (no /proc/self/clear_refs): peak_rss_bytes
    # is the process's since it started, earlier runs in it included
    rss_since_start: bool = False

    @property
    def label(self) -> str:
        return self.dtype + (" compiled" if self.compiled else "")


def _median_ms(fn, repeats: int, device: torch.device) -> float:
    sync = torch.cuda.synchronize if device.type == "cuda" else None
    return median_ms(fn, repeats, sync=sync)


def measure_bandwidth(device: torch.device, megabytes: int = 256, repeats: int = 5) -> float:
    """GB/s of a large device copy (each byte read once and written once)."""
    src = torch.ones(megabytes * 2**20 // 4, device=device)
    dst = torch.empty_like(src)
    ms = _median_ms(lambda: dst.copy_(src), repeats, device)
    return 2 * src.numel() * 4 / (ms / 1e3) / 1e9


def measure_matmul_peak(device: torch.device, dtype: torch.dtype, size: int = 2048,
                        repeats: int = 5) -> float:
    """GFLOP/s of the fastest of `repeats` size² matmuls."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    a @ b
    best = min(_median_ms(lambda: a @ b, 1, device) for _ in range(repeats))
    return 2 * size ** 3 / (best / 1e3) / 1e9


ENERGY_TOKENS = 256     # at most this many decode steps per batch size measure energy


def run(preset_name: str = "small", device: str = "cpu", dtype: str = "float32",
        batches=(1, 4, 16), decode_steps: int = 16, repeats: int = 5,
        seed: int = 0, cuda_graphs: bool = False, checkpoint: str = "",
        peak_size: int = 2048, compile: bool = False, robots=()) -> ModelBenchResult:
    """dtype: a name or auto (model/precision.py). The model is built in that dtype from
    the preset with random weights, or loaded memory-mapped from `checkpoint`. A π0.5
    prompt (PaliGemma tokenizer) is padded to its max_prompt_tokens, 200, as π0.5 pads it.
    cuda_graphs: replay decode steps and the denoising loop from CUDA graphs (CUDA only).
    peak_size: the side of the square matmuls the peak is measured on.
    compile: torch.compile the prefill, denoising and decode passes (compile_passes) before
    anything is timed (after the prefill's FLOPs are counted); every timed shape is compiled
    in the warm-up calls.
    robots: counts of robots whose new observations one frame serves, each timed.
    The peak RSS is this run's: the count starts over from what the process holds after
    the runs before it let go of their models (and their compiled graphs).
    On CUDA with NVML, chunks from new observations and decode steps also run back to
    back for a second each under the GPU's energy counter."""
    dtype_name, why = resolve_dtype(dtype, device)
    dtype = getattr(torch, dtype_name)
    dev = torch.device(device)
    if "torch._dynamo" in sys.modules:   # a compiled run before: its graphs hold its weights
        torch.compiler.reset()            # (importing dynamo just to reset costs ~150 MB)
    gc.collect()              # a run before: its model, in reference cycles (compiled passes)
    restarted = restart_peak_rss()
    started = time.perf_counter()
    if checkpoint:
        model, _ = checkpoints.load(checkpoint, dev, dtype)
    else:
        with dev:     # drawn where it runs: a GPU draws 3 B parameters in a second
            model = Pi05Model(preset(preset_name), seed=seed, dtype=dtype).to(dev).eval()
    load_s = time.perf_counter() - started
    config = model.config
    tokenizer = ByteTokenizer()
    cameras = ["base", "left_wrist", "right_wrist"][:config.num_cameras]
    rng = np.random.default_rng(seed)
    size = config.vision.image_size

    def prefix(frame: int):
        images = {c: rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for c in cameras}
        prompt = pi05_prompt("pick up the red cup", rng.uniform(-1, 1, 14), config.state_dim)
        tokens = tokenizer.encode(prompt)
        if config.tokenizer == "paligemma":
            tokens = (tokens * config.max_prompt_tokens)[:config.max_prompt_tokens]
        return build_prefix(config, cameras, images, tokens)

    sample = prefix(0)
    meter, energy_source = EnergyMeter.open(dev)
    steps = decode_steps * (repeats + 2) + (ENERGY_TOKENS + 1 if meter else 0)
    pages_per_seq = -(-(sample.num_tokens + 64 + steps) // 16)
    most_robots = max(robots, default=1)
    cache = KVCache.for_model(config, pages_per_seq * (max(batches) + most_robots + 4) + 1,
                              page_size=16, action_batch=most_robots, dtype=dtype, device=dev)
    if cuda_graphs:
        from oxygen_ros.model.cuda_graphs import CudaGraphs
        model.graphs = CudaGraphs(model, cache, max_tokens=pages_per_seq * 16,
                                  buckets=sorted(set(batches)))
    noise = torch.randn(1, config.action_horizon, config.action_dim, device=dev, dtype=dtype)

    def fresh_prefill():
        table = model.prefill(prefix(1), cache)
        cache.free(table)

    with FlopCounterMode(display=False) as flops:
        fresh_prefill()       # also the warm-up
    if compile:   # after counting: a pass first called under the counter never compiles
        model.compile_passes()
        fresh_prefill()       # compiling is not timed
    prefill_ms = _median_ms(fresh_prefill, repeats, dev)
    table = model.prefill(sample, cache)
    model.sample_actions([table], noise, cache)   # warm-up (a compiled step compiles)
    denoise_ms = _median_ms(lambda: model.sample_actions([table], noise, cache), repeats, dev)

    def chunk(observation):
        hit = model.prefill(observation, cache)
        model.sample_actions([hit], noise, cache)
        cache.free(hit)

    chunk_cached_ms = _median_ms(lambda: chunk(sample), repeats, dev)
    power_w = chunk_joules = 0.0
    if meter:       # chunks from new observations
        chunk_joules, power_w = meter.joules_per_call(lambda: chunk(prefix(1)))
    robots_ms = {count: _robots_chunk_ms(model, cache, count, prefix, noise, repeats)
                 for count in robots}

    tokens_per_s, step_ms, token_joules = _decode_rates(model, cache, table, batches,
                                                        decode_steps, repeats, meter)
    lm = model.language_model
    weight_bytes = sum(p.numel() * p.element_size() for p in lm.parameters())
    bandwidth = measure_bandwidth(dev)
    bound_ms = weight_bytes / (bandwidth * 1e9) * 1e3
    peak = measure_matmul_peak(dev, dtype, peak_size)
    gflop = flops.get_total_flops() / 1e9
    return ModelBenchResult(
        config.name if checkpoint else preset_name, str(dev), sample.num_tokens, prefill_ms,
        denoise_ms, prefill_ms + denoise_ms, chunk_cached_ms, tokens_per_s, step_ms,
        weight_bytes, bandwidth, step_ms[batches[0]] / bound_ms, dtype_name, why,
        sum(p.numel() * p.element_size() for p in model.parameters()), load_s,
        peak_rss_bytes(os.getpid()) or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        gflop, peak, gflop / (prefill_ms / 1e3) / peak, compile, robots_ms, energy_source,
        power_w, chunk_joules, token_joules, rss_since_start=not restarted)


def _robots_chunk_ms(model: Pi05Model, cache: KVCache, count: int, prefix, noise,
                     repeats: int) -> float:
    """ms for `count` robots' chunks from new observations in one frame: one batched
    prefill (prefill_many), one batched denoising."""
    frames = [[prefix(0) for _ in range(count)] for _ in range(repeats + 1)]  # each new once

    def frame():
        tables = model.prefill_many(frames.pop(), cache)
        model.sample_actions(tables, noise.expand(count, -1, -1), cache)
        for table in tables:
            cache.free(table)

    frame()     # warm-up (a compiled pass compiles the new batch)
    return _median_ms(frame, repeats, model.device)


def _decode_rates(model: Pi05Model, cache: KVCache, table, batches, decode_steps: int,
                  repeats: int, meter: "EnergyMeter | None") -> tuple[dict, dict, dict]:
    """(tokens/s, ms per step, joules per token where `meter`) of batched decode steps, per
    batch size, each row a dialogue request forked from the prefix `table`."""
    tokenizer, dev = ByteTokenizer(), model.device
    request = tokenizer.encode("User: what do you see?\nRobot:", bos=False)
    tokens_per_s, step_ms, token_joules = {}, {}, {}
    for batch in batches:
        forks, tokens = [], []
        for _ in range(batch):
            fork = cache.fork(table, "dialogue")
            cache.reserve(fork, len(request))
            tokens.append(int(model.extend(fork, request, cache).argmax()))
            forks.append(fork)

        def step():
            for fork in forks:
                cache.reserve(fork, 1)
            logits = model.decode(forks, tokens, cache)
            tokens[:] = logits.argmax(-1).tolist()

        for _ in range(3):   # warm-up (a compiled step meets a new table width too)
            step()
        ms = _median_ms(lambda: [step() for _ in range(decode_steps)], repeats, dev) / decode_steps
        step_ms[batch] = ms
        tokens_per_s[batch] = batch / (ms / 1e3)
        if meter:
            token_joules[batch] = meter.joules_per_call(step, max_calls=ENERGY_TOKENS)[0] / batch
        for fork in forks:
            cache.free(fork)
    return tokens_per_s, step_ms, token_joules


ROWS = (
    ("load (build or map the weights)", lambda r: f"{r.load_s:8.2f} s"),
    ("weights (every parameter)", lambda r: f"{r.model_bytes / 1e9:8.2f} GB"),
    ("peak RSS of this run", lambda r: f"{r.peak_rss_bytes / 1e9:8.2f} GB"),
    ("prefix prefill (new observation)", lambda r: f"{r.prefill_ms:8.1f} ms"),
    ("action denoising (all steps)", lambda r: f"{r.denoise_ms:8.1f} ms"),
    ("action chunk, new observation", lambda r: f"{r.chunk_ms:8.1f} ms"),
    ("action chunk, cached prefix", lambda r: f"{r.chunk_cached_prefix_ms:8.1f} ms"),
    ("prefill FLOPs", lambda r: f"{r.prefill_gflop:8.{'1f' if r.prefill_gflop >= 1 else '2g'}}"
                                " GFLOP"),
    ("matmul peak (this run)", lambda r: f"{r.matmul_peak_gflops:8.1f} GFLOP/s"),
    ("prefill / matmul peak", lambda r: f"{r.prefill_peak_fraction:8.2f}"),
    ("VLM weight bytes read per step", lambda r: f"{r.weight_bytes / 1e6:8.1f} MB"),
    ("memory bandwidth (copy, this run)", lambda r: f"{r.bandwidth_gb_s:8.1f} GB/s"),
    ("decode step / bandwidth bound", lambda r: f"{r.bound_ratio:8.2f} x"),
)
# the rows a second dtype is compared on (its time or bound ÷ the first's)
RATIOS = {"prefix prefill (new observation)": "prefill_ms",
          "action denoising (all steps)": "denoise_ms",
          "action chunk, new observation": "chunk_ms",
          "action chunk, cached prefix": "chunk_cached_prefix_ms"}


def _short(result: ModelBenchResult) -> str:
    return {"float32": "fp32", "bfloat16": "bf16"}[result.dtype] + ("c" if result.compiled
                                                                    else "")


def _compared(label: str, results: list[ModelBenchResult], value, cell: str) -> str:
    """A row: each run's value (formatted by `cell`), then each later run's ÷ the first's."""
    row = f"  {label:36}" + "".join(f"{cell.format(value(r)):>18}" for r in results)
    return row + "".join(f"{value(r) / value(results[0]):11.2f}" for r in results[1:])


def report(results: "ModelBenchResult | list[ModelBenchResult]") -> str:
    """One column per run (side by side), then each later run's times ÷ the first's
    (bf16/fp32, fp32c/fp32: c is compiled)."""
    results = results if isinstance(results, list) else [results]
    first, later = results[0], results[1:]
    lines = [f"model benchmark: preset {first.preset} on {first.device}, "
             f"{first.prefix_tokens} prefix tokens"]
    lines += [f"  {r.label}: {r.dtype_reason}" for r in results]
    header = f"  {'':36}" + "".join(f"{r.label:>18}" for r in results)
    lines.append(header + "".join(f"{_short(r) + '/' + _short(first):>11}" for r in later))
    for label, cell in ROWS:
        line = f"  {label:36}" + "".join(f"{cell(r):>18}" for r in results)
        if label in RATIOS:
            line += "".join(f"{getattr(r, RATIOS[label]) / getattr(first, RATIOS[label]):11.2f}"
                            for r in later)
        lines.append(line)
    for batch in first.decode_tokens_per_s:
        lines.append(_compared(f"decode batch {batch:3d}", results,
                               lambda r: r.decode_step_ms[batch], "{:.2f} ms/step"))
        lines.append(f"  {'':36}" + "".join(
            f"{f'{r.decode_tokens_per_s[batch]:.1f} tokens/s':>18}" for r in results))
        if first.decode_joules_per_token:
            lines.append(f"  {'':36}" + "".join(
                f"{f'{r.decode_joules_per_token[batch]:.3f} J/token':>18}" for r in results))
    fewest = min(first.robots_chunk_ms, default=None)
    robots = lambda count: f"{count} robot{'s' if count > 1 else ''} a frame"  # noqa: E731
    for count in first.robots_chunk_ms:
        lines.append(_compared(f"action chunks, {robots(count)}", results,
                               lambda r: r.robots_chunk_ms[count], "{:.1f} ms"))
        if count != fewest:
            lines.append(f"  {f'  ÷ {robots(fewest)}':36}" + "".join(
                f"{r.robots_chunk_ms[count] / r.robots_chunk_ms[fewest]:16.2f} x"
                for r in results))
    if first.chunk_joules:
        lines.append(f"  {'chunk energy (new observation)':36}" + "".join(
            f"{f'{r.chunk_joules:.2f} J':>18}" for r in results))
        lines.append(f"  {'GPU power, chunks back to back':36}" + "".join(
            f"{f'{r.power_w:.0f} W':>18}" for r in results))
    if first.device.startswith("cuda"):
        lines.append(f"  energy: {first.energy_source}")
    if any(r.rss_since_start for r in results):
        lines.append("  (peak RSS: this kernel cannot restart the count: each column's is the "
                     "process's since it started, earlier columns included)")
    lines.append("  (bandwidth bound 1.0: every decode step only streams the VLM weights once)")
    return "\n".join(lines)
