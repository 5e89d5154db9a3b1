"""Engine benchmark: isolated, shared_kv and oxygen side by side on one workload, in one
process, frames interleaved (frame i of every mode, then frame i + 1), so machine noise
hits all modes alike. A fourth engine (oxygen, actions only) gives the interference ratio."""

import time
from dataclasses import asdict

import numpy as np
import torch

from oxygen_ros.bench.report import percentile_ms, pyplot, save_figure
from oxygen_ros.bench.workloads import Workload
from oxygen_ros.engine.baselines import IsolatedEngine, SharedKVEngine
from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.engine.observation import Observation
from oxygen_ros.engine.oxygen import OxygenEngine
from oxygen_ros.model.config import preset
from oxygen_ros.model.pi05 import Pi05Model
from oxygen_ros.model.precision import resolve_dtype
from oxygen_ros.model.tokenizer import ByteTokenizer

MODES = {"isolated": IsolatedEngine, "shared_kv": SharedKVEngine, "oxygen": OxygenEngine}
CAMERAS = ("base", "left_wrist", "right_wrist")
QUESTIONS = ["what do you see?", "where is the cup?", "are you done?", "what is next?",
             "describe the table", "is the gripper open?"]


def observations(workload: Workload, config) -> list[Observation]:
    rng = np.random.default_rng(workload.seed)
    size = config.vision.image_size
    cameras = CAMERAS[:workload.cameras]
    out, images = [], None
    total = workload.warmup_frames + workload.frames
    for frame in range(total):
        if frame % workload.camera_every == 0:
            images = {c: rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for c in cameras}
        state = np.sin(0.3 * frame + np.arange(14))
        out.append(Observation(images, state, "pick up the red cup and put it in the bin",
                               frame * workload.frame_period_s))
    return out


def arrivals(workload: Workload) -> list[list[str]]:
    rng = np.random.default_rng(workload.seed + 1)
    total = workload.warmup_frames + workload.frames
    counts = rng.poisson(workload.dialogue_per_frame, size=total)
    return [[QUESTIONS[(frame + i) % len(QUESTIONS)] for i in range(n)]
            for frame, n in enumerate(counts)]


def engine_config(workload: Workload, language: bool = True) -> EngineConfig:
    period = workload.memory_period_frames * workload.frame_period_s
    return EngineConfig(
        camera_names=CAMERAS[:workload.cameras], page_size=workload.page_size,
        num_pages=workload.num_pages, tokens_per_frame=workload.tokens_per_frame,
        max_tokens_per_frame=workload.tokens_per_frame, dialogue_max_tokens=workload.decode_tokens,
        memory_max_tokens=workload.memory_tokens,
        memory_period_s=period if (language and workload.memory_period_frames) else 0.0,
        stop_at_eos=False, seed=workload.seed)


def run(workload: Workload, progress=None) -> dict:
    config = preset(workload.preset).with_(num_denoise_steps=workload.denoise_steps,
                                           prefix_attention=workload.prefix_attention)
    dtype, _ = resolve_dtype(workload.dtype, workload.device)
    with torch.device(workload.device):     # drawn where it runs
        model = Pi05Model(config, seed=workload.seed, dtype=getattr(torch, dtype)).to(
            workload.device).eval()
    frames = observations(workload, config)
    requests = arrivals(workload)
    tokenizer = ByteTokenizer()    # random weights: it stands in for a PaliGemma file too
    engines = {name: cls(model, engine_config(workload), tokenizer=tokenizer)
               for name, cls in MODES.items()}
    engines["actions_only"] = OxygenEngine(model, engine_config(workload, language=False),
                                           tokenizer=tokenizer)
    stats = {name: {"frame": [], "chunk": [], "tokens": 0, "wall": 0.0} for name in engines}

    for index, observation in enumerate(frames):
        measured = index >= workload.warmup_frames
        if index == workload.warmup_frames:
            for engine in engines.values():
                engine.reset_peaks()
        for name, engine in engines.items():
            if name != "actions_only":
                for text in requests[index]:
                    engine.submit_dialogue(text)
            started = time.perf_counter()
            report = engine.step(observation)
            elapsed = time.perf_counter() - started
            if measured:
                entry = stats[name]
                entry["frame"].append(report.latency_s)
                entry["chunk"].append(report.chunk.latency_s)
                entry["tokens"] += report.tokens
                entry["wall"] += elapsed
        if progress:
            progress(index + 1, len(frames))

    return _result(workload, config, engines, stats)


def _result(workload: Workload, config, engines: dict, stats: dict) -> dict:
    modes = {}
    for name, engine in engines.items():
        entry = stats[name]
        modes[name] = {
            "frame_latency_ms_p50": percentile_ms(entry["frame"], 50),
            "frame_latency_ms_p99": percentile_ms(entry["frame"], 99),
            "action_chunk_ms_p50": percentile_ms(entry["chunk"], 50),
            "action_chunk_ms_p99": percentile_ms(entry["chunk"], 99),
            "action_hz": config.action_horizon * workload.frames / entry["wall"],
            "tokens_per_s": entry["tokens"] / entry["wall"],
            "kv_peak_bytes": engine.kv_peak_bytes(),
        }
    actions_only = modes.pop("actions_only")
    return {
        "preset": workload.preset,
        "device": workload.device,
        "frames": workload.frames,
        "modes": modes,
        "speedup_vs_isolated": (modes["isolated"]["frame_latency_ms_p50"]
                                / modes["oxygen"]["frame_latency_ms_p50"]),
        "kv_peak_ratio": modes["oxygen"]["kv_peak_bytes"] / modes["isolated"]["kv_peak_bytes"],
        "action_p99_interference": (modes["oxygen"]["action_chunk_ms_p99"]
                                    / actions_only["action_chunk_ms_p99"]),
        "workload": asdict(workload) | {"torch_threads": torch.get_num_threads(),
                                        "action_horizon": config.action_horizon,
                                        "actions_only_chunk_ms_p99":
                                            actions_only["action_chunk_ms_p99"]},
    }


def table(result: dict) -> str:
    rows = [f"{'mode':<10} {'frame p50':>10} {'frame p99':>10} {'chunk p50':>10} "
            f"{'chunk p99':>10} {'action Hz':>10} {'tokens/s':>9} {'KV peak MB':>11}"]
    for name, m in result["modes"].items():
        rows.append(f"{name:<10} {m['frame_latency_ms_p50']:>10.1f} "
                    f"{m['frame_latency_ms_p99']:>10.1f} {m['action_chunk_ms_p50']:>10.1f} "
                    f"{m['action_chunk_ms_p99']:>10.1f} "
                    f"{m['action_hz']:>10.1f} {m['tokens_per_s']:>9.1f} "
                    f"{m['kv_peak_bytes'] / 1e6:>11.2f}")
    rows.append(f"speedup_vs_isolated {result['speedup_vs_isolated']:.2f}x   "
                f"kv_peak_ratio {result['kv_peak_ratio']:.3f}   "
                f"action_p99_interference {result['action_p99_interference']:.3f}")
    rows.append("where a frame's time goes (p50): " + "; ".join(
        f"{name} action path {m['action_chunk_ms_p50']:.0f} ms + language "
        f"{m['frame_latency_ms_p50'] - m['action_chunk_ms_p50']:.0f} ms"
        for name, m in result["modes"].items()))
    isolated, oxygen = result["modes"]["isolated"], result["modes"]["oxygen"]
    ceiling = isolated["frame_latency_ms_p50"] / oxygen["action_chunk_ms_p50"]
    rows.append(f"ceiling: with language free, speedup_vs_isolated <= isolated frame / oxygen "
                f"action path = {ceiling:.2f}x")
    return "\n".join(rows)


def plot(result: dict, path: str) -> None:
    plt = pyplot()
    names = list(result["modes"])
    modes = [result["modes"][n] for n in names]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    x = np.arange(len(names))
    axes[0].bar(x - 0.2, [m["frame_latency_ms_p50"] for m in modes], 0.4, label="frame p50")
    axes[0].bar(x + 0.2, [m["action_chunk_ms_p50"] for m in modes], 0.4, label="action chunk p50")
    axes[0].set_ylabel("ms")
    axes[0].legend()
    axes[1].bar(x, [m["tokens_per_s"] for m in modes], color="tab:green")
    axes[1].set_ylabel("language tokens / s")
    axes[2].bar(x, [m["kv_peak_bytes"] / 1e6 for m in modes], color="tab:red")
    axes[2].set_ylabel("KV peak (MB)")
    for axis in axes:
        axis.set_xticks(x, names)
    fig.suptitle(f"oxygen_ros bench: preset {result['preset']} on {result['device']}, "
                 f"{result['frames']} frames — speedup {result['speedup_vs_isolated']:.2f}x")
    save_figure(fig, path)
