"""ActionTask: every frame, one chunk of H actions from the newest observation's prefix —
with the plain flow-matching sampler, or (chunk_switch rtc) guided by Real-Time Chunking
toward the plan in force, which it keeps in the model's normalized action space."""

import dataclasses
import math
from typing import Optional, Sequence

import numpy as np
import torch

from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.cache.page_table import PageTable
from oxygen_ros.engine import rtc
from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.model.pi05 import Pi05Model


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
                guidance=config.rtc_guidance)
        self.plan: Optional[tuple[torch.Tensor, float]] = None  # (normalized [H, A], stamp)
        self.inference_delay = 0      # steps frozen in the last chunk (0: not guided)
        self.guided = False           # the last chunk was made with RTC

    def noise(self, frame_id: int) -> torch.Tensor:
        """The frame's initial noise: a pure function of (seed, frame), so every engine mode
        and every rerun draws the same."""
        config = self.model.config
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + frame_id)
        return torch.randn(1, config.action_horizon, config.action_dim, generator=generator)

    def leftover(self, stamp: float) -> Optional[torch.Tensor]:
        """The plan in force re-indexed to a chunk starting at `stamp`: its command at
        stamp + i·dt (interpolated as the ActionStream does) for every i it still covers;
        None if it covers none of them."""
        if self.plan is None:
            return None
        actions, plan_stamp = self.plan
        offset = (stamp - plan_stamp) / self.dt
        last = actions.shape[0] - 1
        if offset < 0 or offset > last:
            return None
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
        noise = self.noise(frame_id)
        previous = None
        if self.rtc is not None:
            if stamp is None:
                previous = torch.zeros(self.model.config.action_horizon,
                                       self.model.config.action_dim)
            else:
                previous = self.leftover(stamp)
        if previous is None:
            actions = self.model.sample_actions(tables, noise, cache)[0].float()
            self.inference_delay = 0
        else:
            self.inference_delay = max(0, math.ceil(delay_s / self.dt - 1e-9))
            actions = self._guided(tables, cache, noise, previous)[0]
        if stamp is not None:
            self.plan = (actions.detach().cpu(), stamp)
            self.guided = previous is not None
        return actions.detach().cpu().numpy()

    @torch.no_grad()
    def _guided(self, tables, cache, noise, previous) -> torch.Tensor:
        # the steps that run while the chunk is computed stay frozen whatever the horizon
        # (lerobot caps the delay by the horizon instead, leaving the later ones unguided)
        settings = self.rtc
        if self.inference_delay > settings.execution_horizon:
            settings = dataclasses.replace(settings, execution_horizon=self.inference_delay)
        inputs = self.model.action_inputs(tables, cache)
        return rtc.integrate(
            lambda x, t: self.model.velocity(inputs, x, t, cache),
            noise.to(self.model.device), self.model.config.num_denoise_steps,
            previous.to(self.model.device), self.inference_delay, settings)
