"""ActionTask: every frame, one chunk of H actions from the newest observation's prefix."""

from typing import Sequence

import numpy as np
import torch

from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.cache.page_table import PageTable
from oxygen_ros.model.pi05 import Pi05Model


class ActionTask:
    def __init__(self, model: Pi05Model, seed: int):
        self.model = model
        self.seed = seed

    def noise(self, frame_id: int) -> torch.Tensor:
        """The frame's initial noise: a pure function of (seed, frame), so every engine mode
        and every rerun draws the same."""
        config = self.model.config
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + frame_id)
        return torch.randn(1, config.action_horizon, config.action_dim, generator=generator)

    def run(self, tables: Sequence[PageTable], cache: KVCache, frame_id: int) -> np.ndarray:
        actions = self.model.sample_actions(tables, self.noise(frame_id), cache)
        return actions[0].float().cpu().numpy()
