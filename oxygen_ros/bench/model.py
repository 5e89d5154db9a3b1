"""Model-level benchmark: action chunk latency, decode throughput, and how far a decode step
is from the memory-bandwidth bound (weight bytes ÷ bandwidth measured in the same run)."""

from dataclasses import dataclass

import numpy as np
import torch

from oxygen_ros.bench.report import median_ms
from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.model.config import preset
from oxygen_ros.model.pi05 import Pi05Model
from oxygen_ros.model.prefix import build_prefix
from oxygen_ros.model.prompt import pi05_prompt
from oxygen_ros.model.tokenizer import ByteTokenizer


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


def _median_ms(fn, repeats: int, device: torch.device) -> float:
    sync = torch.cuda.synchronize if device.type == "cuda" else None
    return median_ms(fn, repeats, sync=sync)


def measure_bandwidth(device: torch.device, megabytes: int = 256, repeats: int = 5) -> float:
    """GB/s of a large device copy (each byte read once and written once)."""
    src = torch.ones(megabytes * 2**20 // 4, device=device)
    dst = torch.empty_like(src)
    ms = _median_ms(lambda: dst.copy_(src), repeats, device)
    return 2 * src.numel() * 4 / (ms / 1e3) / 1e9


def run(preset_name: str = "small", device: str = "cpu", dtype: torch.dtype = torch.float32,
        batches=(1, 4, 16), decode_steps: int = 16, repeats: int = 5,
        seed: int = 0, cuda_graphs: bool = False) -> ModelBenchResult:
    """cuda_graphs: replay decode steps and the denoising loop from CUDA graphs (CUDA only)."""
    config = preset(preset_name)
    dev = torch.device(device)
    model = Pi05Model(config, seed=seed).to(dev, dtype).eval()
    tokenizer = ByteTokenizer()
    cameras = ["base", "left_wrist", "right_wrist"][:config.num_cameras]
    rng = np.random.default_rng(seed)
    size = config.vision.image_size

    def prefix(frame: int):
        images = {c: rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for c in cameras}
        prompt = pi05_prompt("pick up the red cup", rng.uniform(-1, 1, 14), config.state_dim)
        return build_prefix(config, cameras, images, tokenizer.encode(prompt))

    sample = prefix(0)
    pages_per_seq = -(-(sample.num_tokens + 64 + decode_steps * (repeats + 2)) // 16)
    cache = KVCache.for_model(config, num_pages=pages_per_seq * (max(batches) + 4) + 1,
                              page_size=16, dtype=dtype, device=dev)
    if cuda_graphs:
        from oxygen_ros.model.cuda_graphs import CudaGraphs
        model.graphs = CudaGraphs(model, cache, max_tokens=pages_per_seq * 16,
                                  buckets=sorted(set(batches)))
    noise = torch.randn(1, config.action_horizon, config.action_dim, device=dev, dtype=dtype)

    def fresh_prefill():
        table = model.prefill(prefix(1), cache)
        cache.free(table)

    prefill_ms = _median_ms(fresh_prefill, repeats, dev)
    table = model.prefill(sample, cache)
    denoise_ms = _median_ms(lambda: model.sample_actions([table], noise, cache), repeats, dev)

    def chunk_cached():
        hit = model.prefill(sample, cache)
        model.sample_actions([hit], noise, cache)
        cache.free(hit)

    chunk_cached_ms = _median_ms(chunk_cached, repeats, dev)

    tokens_per_s, step_ms = _decode_rates(model, cache, table, batches, decode_steps, repeats)
    lm = model.language_model
    weight_bytes = sum(p.numel() * p.element_size() for p in lm.parameters())
    bandwidth = measure_bandwidth(dev)
    bound_ms = weight_bytes / (bandwidth * 1e9) * 1e3
    return ModelBenchResult(preset_name, str(dev), sample.num_tokens, prefill_ms, denoise_ms,
                            prefill_ms + denoise_ms, chunk_cached_ms, tokens_per_s, step_ms,
                            weight_bytes, bandwidth, step_ms[batches[0]] / bound_ms)


def _decode_rates(model: Pi05Model, cache: KVCache, table, batches, decode_steps: int,
                  repeats: int) -> tuple[dict, dict]:
    """(tokens/s, ms per step) of batched decode steps, per batch size, each row a dialogue
    request forked from the prefix `table`."""
    tokenizer, dev = ByteTokenizer(), model.device
    request = tokenizer.encode("User: what do you see?\nRobot:", bos=False)
    tokens_per_s, step_ms = {}, {}
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

        step()  # warm-up
        ms = _median_ms(lambda: [step() for _ in range(decode_steps)], repeats, dev) / decode_steps
        step_ms[batch] = ms
        tokens_per_s[batch] = batch / (ms / 1e3)
        for fork in forks:
            cache.free(fork)
    return tokens_per_s, step_ms


def report(result: ModelBenchResult) -> str:
    lines = [
        f"model benchmark: preset {result.preset} on {result.device}, "
        f"{result.prefix_tokens} prefix tokens",
        f"  prefix prefill (new observation)   {result.prefill_ms:8.1f} ms",
        f"  action denoising (all steps)       {result.denoise_ms:8.1f} ms",
        f"  action chunk, new observation      {result.chunk_ms:8.1f} ms",
        f"  action chunk, cached prefix        {result.chunk_cached_prefix_ms:8.1f} ms",
    ]
    for batch, rate in result.decode_tokens_per_s.items():
        lines.append(f"  decode batch {batch:3d}: {rate:8.1f} tokens/s "
                     f"({result.decode_step_ms[batch]:.2f} ms/step)")
    lines += [
        f"  VLM weight bytes read per step     {result.weight_bytes / 1e6:8.1f} MB",
        f"  memory bandwidth (copy, this run)  {result.bandwidth_gb_s:8.1f} GB/s",
        f"  decode step / bandwidth bound      {result.bound_ratio:8.2f} x "
        f"(1.0 = every step only streams the weights once)",
    ]
    return "\n".join(lines)
