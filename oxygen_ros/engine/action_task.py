"""ActionTask: every frame, one chunk of H actions from the newest observation's prefix —
with the plain flow-matching sampler, or (chunk_switch rtc) guided by Real-Time Chunking
toward the plan in force, which it keeps in the model's normalized action space."""

import math
from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np
import torch

from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.cache.page_table import PageTable
from oxygen_ros.engine import rtc
from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.model.pi05 import Pi05Model

if TYPE_CHECKING:
    from oxygen_ros.engine.rtc_graph import GuidedActionRunner


class ActionTask:
    def __init__(self, model: Pi05Model, config: EngineConfig):
        self.model = model
        self.seed = config.seed
        self.dt = config.action_dt_s
        self.rtc: Optional[rtc.RTCSettings] = None
        if config.chunk_switch == "rtc":
            self.rtc = rtc.RTCSettings(
                execution_horizon=config.rtc_execution_horizon or model.config.action_horizon,
                prefix_attention_schedule=config.rtc_prefix_attention_schedule,
                max_guidance_weight=config.rtc_max_guidance_weight,
                guidance=config.rtc_guidance,
                least_overlap=math.ceil(config.blend_s / config.action_dt_s - 1e-9))
        self.plan: Optional[tuple[torch.Tensor, float]] = None  # (normalized [H, A], stamp)
        self.inference_delay = 0      # steps frozen in the last chunk (0: not guided)
        self.guided = False           # the last chunk was made with RTC
        self.adopted = False          # the last chunk became the plan in force (finite)

    def noise(self, frame_id: int) -> torch.Tensor:
        """The frame's initial noise: a pure function of (seed, frame), so every engine mode
        and every rerun draws the same."""
        config = self.model.config
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + frame_id)
        return torch.randn(1, config.action_horizon, config.action_dim, generator=generator)

    def leftover(self, stamp: float) -> Optional[torch.Tensor]:
        """The plan in force re-indexed to a chunk starting at `stamp`: its command at
        stamp + i·dt (interpolated as the ActionStream does) for every i it still covers;
        its last step alone where it has run out (the stream holds it); None without a plan
        or for a stamp before the plan's."""
        if self.plan is None:
            return None
        actions, plan_stamp = self.plan
        offset = (stamp - plan_stamp) / self.dt
        last = actions.shape[0] - 1
        if offset < 0:
            return None
        if offset > last:
            return actions[last:].clone()
        positions = offset + torch.arange(int(math.floor(last - offset + 1e-9)) + 1)
        low = positions.floor().long().clamp(max=last)
        high = (low + 1).clamp(max=last)
        frac = (positions - low)[:, None].to(actions.dtype)
        return (1 - frac) * actions[low] + frac * actions[high]

    def run(self, tables: Sequence[PageTable], cache: KVCache, frame_id: int,
            stamp: Optional[float] = None, delay_s: float = 0.0) -> np.ndarray:
        """The chunk (normalized actions [H, A]) for the prefix of an observation stamped
        `stamp`, expected to take over `delay_s` after that stamp. With RTC its first
        ceil(delay_s / dt) steps are frozen to the plan in force. The chunk becomes the plan
        in force; stamp None (calibration) leaves the plan alone and, with RTC, guides
        toward a still plan so that the measured cost is the guided one."""
        return run_together([self], tables, cache, [frame_id], [stamp], [delay_s])[0]

    def guided_by(self, stamp: Optional[float], delay_s: float):
        """(leftover, frozen steps) this task's next chunk continues, or None (plain)."""
        if self.rtc is None:
            return None
        if stamp is None:
            config = self.model.config
            previous = torch.zeros(config.action_horizon, config.action_dim)
        else:
            previous = self.leftover(stamp)
        if previous is None:
            return None
        return previous, max(0, math.ceil(delay_s / self.dt - 1e-9))


def run_together(tasks: Sequence[ActionTask], tables: Sequence[PageTable], cache: KVCache,
                 frame_ids: Sequence[int], stamps: Sequence[Optional[float]],
                 delays_s: Sequence[float],
                 graphs: Sequence["GuidedActionRunner"] = ()) -> list[np.ndarray]:
    """One batched action-expert pass for several tasks (robots), row i reading tables[i]
    and continuing tasks[i]'s own plan: each chunk is the one tasks[i].run would make
    alone (same noise, same guidance). Each finite one becomes its task's plan in force (a
    NaN or inf one is dropped downstream, and RTC would spread it to every later chunk).
    `graphs`: the guided loop as CUDA graphs, smallest first; the first that fits runs it."""
    model = tasks[0].model
    noise = torch.cat([task.noise(frame_id) for task, frame_id in zip(tasks, frame_ids)]).to(
        model.device)       # the guide is made where the noise is
    rows = [task.guided_by(stamp, delay)
            for task, stamp, delay in zip(tasks, stamps, delays_s)]
    if all(row is None for row in rows):
        actions = model.sample_actions(tables, noise, cache).float()
    else:
        settings = tasks[0].rtc
        inputs = model.action_inputs(tables, cache)
        guide = rtc.guide(rows, noise, settings)
        graph = next((graph for graph in graphs
                      if graph.cache is cache and graph.fits(inputs)), None)
        if graph is not None:
            actions = graph.run(inputs, noise, guide)
        else:
            actions = rtc.integrate(lambda x, t: model.velocity(inputs, x, t, cache),
                                    noise, model.config.num_denoise_steps, guide, settings)
    chunks = actions.detach().cpu()
    for task, row, stamp, chunk in zip(tasks, rows, stamps, chunks):
        task.inference_delay = 0 if row is None else row[1]
        if stamp is not None:
            task.guided = row is not None
            task.adopted = bool(torch.isfinite(chunk).all())
            if task.adopted:
                task.plan = (chunk, stamp)
    return [chunk.numpy() for chunk in chunks]
