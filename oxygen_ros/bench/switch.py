"""bench-switch: how a new chunk takes over from the plan in force — Real-Time Chunking
(both guidance variants), the cross-fade, and a hard switch — side by side on one model,
one stream of observations and the same noise.

For each simulated inference delay d (a fraction of the horizon H), chunk i is computed
from the tabletop world seen at s_i = i·P steps (P = period_steps, default the main job's
frame period, at most H - d) and takes over at s_i + d, exactly as the ActionStream of the
inference node would switch, commanding one step per action_dt. Per mode:
  switch_jump_ratio  largest command change (L2 over joints) at a switch — from the
                     takeover to the end of the fade — over the median step-to-step change
                     inside the plain sampler's chunks (the policy's own motion: one
                     yardstick for every mode; switch_jump_ratio_own divides by the median
                     change between the mode's other executed steps instead — smaller for
                     the mode that moves more between switches);
  frozen_mae         mean |new chunk - plan in force| over the d steps that ran while the
                     chunk was computed (what RTC freezes), in command units;
  track_error        mean |executed command - the world's expert at that moment| over the
                     joint range (demo/score.py's action_error): what guiding each chunk
                     toward the last costs the task;
and rtc_cost_ratio: the guided sampler's time over the plain one's, measured alternately in
the same run (per variant; the chunk's whole action path with prefill in
action_path_cost_ratio).
"""

import json
import statistics
import time
from pathlib import Path

import numpy as np

from oxygen_ros.bench.report import pyplot, save_figure, write_json
from oxygen_ros.bench.workloads import SwitchWorkload
from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.demo.observe import world_prefix
from oxygen_ros.demo.score import action_error
from oxygen_ros.demo.world import TabletopWorld
from oxygen_ros.engine.action_stream import ActionStream
from oxygen_ros.engine.action_task import ActionTask
from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.model.loading import LoadedModel



class _Observations:
    """Prefixes of the tabletop world at given steps, prefilled into one cache."""

    def __init__(self, loaded: LoadedModel, world: TabletopWorld, dt: float):
        self.loaded, self.world, self.dt = loaded, world, dt
        model = loaded.model
        self.cache = KVCache.for_model(model.config, 256, 16, 1, model.dtype, model.device)

    def prefill(self, step: int):
        model = self.loaded.model
        prefix = world_prefix(self.world, step * self.dt, model.config, self.loaded.tokenizer,
                              self.loaded.normalization)
        started = time.perf_counter()
        table = model.prefill(prefix, self.cache, owner="bench")
        return table, time.perf_counter() - started


def engine_config(workload: SwitchWorkload, sampler: str = "rtc_vjp") -> EngineConfig:
    """The engine settings of one sampler (plain, rtc_vjp or rtc_error); a ValueError names
    a workload setting outside the engine's range."""
    guided = sampler != "plain"
    return EngineConfig(
        chunk_switch="rtc" if guided else "crossfade", action_dt_s=workload.dt,
        blend_s=workload.blend_s,
        rtc_guidance=sampler[4:] if guided else "vjp",
        rtc_execution_horizon=workload.execution_horizon,
        rtc_prefix_attention_schedule=workload.schedule,
        rtc_max_guidance_weight=workload.max_guidance_weight, seed=workload.seed)


def delay_steps(fraction: float, horizon: int) -> int:
    """The inference delay, in steps of an H-step chunk, a fraction of the horizon stands for."""
    return max(1, round(fraction * horizon))


def _task(loaded: LoadedModel, workload: SwitchWorkload, sampler: str) -> ActionTask:
    return ActionTask(loaded.model, engine_config(workload, sampler))


def _run_delay(loaded: LoadedModel, workload: SwitchWorkload, fraction: float,
               timings: dict) -> dict:
    horizon = loaded.model.config.action_horizon
    dt = workload.dt
    delay = delay_steps(fraction, horizon)
    # a plan lasts until its successor takes over: at most H - d steps apart
    period = max(1, min(workload.period_steps or horizon // 2, horizon - delay))
    world = TabletopWorld(workload.world_seed)
    observations = _Observations(loaded, world, dt)
    samplers = ["plain"] + [f"rtc_{variant}" for variant in workload.guidance]
    tasks = {sampler: _task(loaded, workload, sampler) for sampler in samplers}
    chunks = {sampler: [] for sampler in samplers}
    for i in range(workload.chunks):
        table, prefill_s = observations.prefill(i * period)
        timings["prefill"].append(prefill_s)
        for sampler, task in tasks.items():
            started = time.perf_counter()
            actions = task.run([table], observations.cache, frame_id=i, stamp=i * period * dt,
                               delay_s=delay * dt)
            timings[sampler].append(time.perf_counter() - started)
            chunks[sampler].append(loaded.normalization.unnormalize_actions(actions))
        observations.cache.free(table)
    # the yardstick: how the policy itself moves from step to step inside its chunks
    reference = float(np.median(np.concatenate([
        np.linalg.norm(np.diff(chunk, axis=0), axis=1) for chunk in chunks["plain"]])))
    result = {sampler: _execute(chunks[sampler], period, delay, dt, 0.0, reference, world)
              for sampler in samplers[1:]}
    result["crossfade"] = _execute(chunks["plain"], period, delay, dt, workload.blend_s,
                                   reference, world)
    result["none"] = _execute(chunks["plain"], period, delay, dt, 0.0, reference, world)
    return result


def _execute(chunks: list, period: int, delay: int, dt: float, blend_s: float,
             reference: float, world: TabletopWorld) -> dict:
    """Command every step through an ActionStream; the switch metrics."""
    stream = ActionStream(blend_s)
    end = (len(chunks) - 1) * period + delay + period
    commands, pushed = [], 0
    for k in range(end):
        while pushed < len(chunks) and pushed * period + delay <= k:
            stream.push(chunks[pushed], pushed * period * dt, dt, (pushed * period + delay) * dt)
            pushed += 1
        if pushed:
            commands.append((k, stream.action_at(k * dt)[0].copy()))
    steps = dict(commands)
    fade = max(1, round(blend_s / dt))
    switch_steps = {i * period + delay + j for i in range(1, len(chunks)) for j in range(fade)}
    at_switch, inside = [], []
    for k in sorted(steps):
        if k - 1 not in steps:
            continue
        change = float(np.linalg.norm(steps[k] - steps[k - 1]))
        (at_switch if k in switch_steps else inside).append(change)
    frozen = []
    for i in range(1, len(chunks)):
        old, new = chunks[i - 1], chunks[i]
        for j in range(min(delay, len(old) - period)):   # new step j = old step period + j
            frozen.append(np.abs(new[j] - old[period + j]).mean())
    median_inside = statistics.median(inside)
    return {"switch_jump_ratio": max(at_switch) / reference,
            "switch_jump_ratio_own": max(at_switch) / median_inside,
            "switch_jump_max": max(at_switch), "inside_step_median": median_inside,
            "reference_step_median": reference,
            "frozen_mae": float(np.mean(frozen)),
            "track_error": action_error(world, [(k * dt, c) for k, c in steps.items()]),
            "switches": len(chunks) - 1,
            "delay_steps": delay, "period_steps": period,
            "trajectory": [steps[k].tolist() for k in sorted(steps)]}


def run(loaded: LoadedModel, workload: SwitchWorkload, progress=lambda *_: None) -> dict:
    timings = {"prefill": [], "plain": [], "rtc_vjp": [], "rtc_error": []}
    modes: dict = {}
    for fraction in workload.delays:
        progress(f"delay {fraction} of the horizon")
        for mode, numbers in _run_delay(loaded, workload, fraction, timings).items():
            modes.setdefault(mode, {})[str(fraction)] = numbers
    default = f"rtc_{workload.default_guidance}"
    if default in modes:
        modes["rtc"] = modes[default]
    plain = statistics.median(timings["plain"])
    prefill = statistics.median(timings["prefill"])
    cost = {}
    for variant in ("vjp", "error"):
        samples = timings[f"rtc_{variant}"]
        if samples:
            guided = statistics.median(samples)
            cost[variant] = {"rtc_cost_ratio": guided / plain,
                             "action_path_cost_ratio": (prefill + guided) / (prefill + plain),
                             "sampler_ms": guided * 1e3}
    return {
        "delays": list(workload.delays), "modes": modes,
        "rtc_cost_ratio": cost.get(workload.default_guidance, {}).get("rtc_cost_ratio"),
        "cost": cost, "plain_sampler_ms": plain * 1e3, "prefill_ms": prefill * 1e3,
        "default_guidance": workload.default_guidance, "model": loaded.description,
        "horizon": loaded.model.config.action_horizon, "chunks": workload.chunks,
        "blend_s": workload.blend_s, "dt": workload.dt,
        "execution_horizon": workload.execution_horizon or loaded.model.config.action_horizon,
        "prefix_attention_schedule": workload.schedule,
        "max_guidance_weight": workload.max_guidance_weight}


def _label(delay: float) -> str:
    return f"d={delay:g}"


def _width(delay: float) -> int:
    return max(6, len(_label(delay)) + 1)


def table(result: dict) -> str:
    lines = [f"model: {result['model']}; horizon {result['horizon']} steps, "
             f"{result['chunks']} chunks per delay",
             f"{'mode':<10}" + "".join(f"  {_label(d):<{_width(d)}}{'jump':>6} {'frozen':>7} "
                                       f"{'track':>6}" for d in result["delays"])]
    for mode in ("rtc_vjp", "rtc_error", "crossfade", "none"):
        if mode not in result["modes"]:
            continue
        row = f"{mode:<10}"
        for d in result["delays"]:
            numbers = result["modes"][mode][str(d)]
            row += (f"  {numbers['switch_jump_ratio']:>{_width(d) + 6}.2f} "
                    f"{numbers['frozen_mae']:>7.3f} {numbers['track_error']:>6.3f}")
        lines.append(row)
    for variant, numbers in result["cost"].items():
        lines.append(f"rtc {variant}: sampler {numbers['rtc_cost_ratio']:.2f}x the plain one "
                     f"({numbers['sampler_ms']:.0f} vs {result['plain_sampler_ms']:.0f} ms), "
                     f"action path {numbers['action_path_cost_ratio']:.2f}x")
    return "\n".join(lines)


def write(result: dict, path: str) -> Path:
    """The JSON (trajectories left out) and a PNG beside it; the PNG's path."""
    slim = json.loads(json.dumps(result))
    for numbers in slim["modes"].values():
        for per_delay in numbers.values():
            per_delay.pop("trajectory", None)
    png = write_json(slim, path).with_suffix(".png")
    plot(result, png)
    return png


def plot(result: dict, path: Path) -> None:
    plt = pyplot()
    modes = [m for m in ("rtc_vjp", "rtc_error", "crossfade", "none") if m in result["modes"]]
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
    for mode in modes:
        ratios = [result["modes"][mode][str(d)]["switch_jump_ratio"] for d in result["delays"]]
        left.plot(result["delays"], ratios, marker="o", label=mode)
    left.set_xlabel("inference delay (fraction of the horizon)")
    left.set_ylabel("switch jump / median step change")
    left.set_title("command jump at chunk switches")
    left.legend()
    middle = str(result["delays"][len(result["delays"]) // 2])
    for mode in modes:
        numbers = result["modes"][mode][middle]
        joint = np.array(numbers["trajectory"])[:, 0]
        right.plot(np.arange(len(joint)), joint, label=mode, linewidth=1)
    for i in range(1, result["chunks"]):   # the trajectory starts at the first takeover
        right.axvline(i * numbers["period_steps"], color="0.85", linewidth=0.8)
    right.set_xlabel("control step (switches: grey lines)")
    right.set_ylabel("joint 0 command")
    right.set_title(f"executed commands, delay {middle} of the horizon")
    right.legend()
    save_figure(figure, path, dpi=100)
