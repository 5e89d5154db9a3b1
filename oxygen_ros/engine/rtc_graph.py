"""GuidedActionRunner: the Real-Time-Chunking-guided denoising loop of up to `rows` robots'
chunks (guidance ``error``, which needs no backward pass) over static buffers, captured as
one CUDA graph like the plain loop (model/cuda_graphs.py). Eagerly, each guided step is a
few hundred small kernel launches; the graph replays them as one.

The plans in force's goals and weights are static buffers too (padding rows: weight 0),
so one capture serves every frame. The engine keeps one runner per robot-count bucket;
the vjp guidance runs eagerly."""

from typing import Optional

import torch

from oxygen_ros.engine import rtc
from oxygen_ros.engine.rtc_settings import RTCSettings
from oxygen_ros.model.cuda_graphs import ActionRunner, CudaGraphs
from oxygen_ros.model.pi05 import ActionInputs, Pi05Model


class GuidedActionRunner(ActionRunner):
    def __init__(self, model: Pi05Model, graphs: CudaGraphs, settings: RTCSettings,
                 capture: Optional[bool] = None, rows: int = 1):
        if settings.guidance != "error":
            raise ValueError(f"rtc_guidance {settings.guidance!r}: only 'error' runs in a "
                             "CUDA graph (vjp needs a backward pass)")
        config, device = model.config, model.device
        self.settings = settings
        shape = (rows, config.action_horizon, config.action_dim)
        self.guide = rtc.Guide(torch.zeros(shape, device=device),
                               torch.zeros(shape[:2] + (1,), device=device))
        capture = device.type == "cuda" if capture is None else capture
        with torch.no_grad():
            super().__init__(model, graphs.cache, graphs.max_pages, graphs.scratch_page,
                             capture, rows=rows)

    def loop(self) -> torch.Tensor:
        return rtc.integrate(lambda x, t: self.model.velocity(self.static, x, t, self.cache),
                             self.noise, self.model.config.num_denoise_steps, self.guide,
                             self.settings)

    def run(self, inputs: ActionInputs, noise: torch.Tensor,
            guide: rtc.Guide) -> torch.Tensor:
        """rtc.integrate's chunks [B, H, A] (float32) for these prefixes, noise and guide."""
        rows = guide.goal.shape[0]
        for static, given in ((self.guide.goal, guide.goal), (self.guide.weights, guide.weights)):
            static.zero_()
            static[:rows].copy_(given)
        return super().run(inputs, noise)


def robot_buckets(robots: int) -> list[int]:
    """Robot counts with a guided-loop graph: the powers of two below `robots`, and
    `robots` (the action tier holds no more rows)."""
    return [1 << i for i in range((robots - 1).bit_length())] + [robots]
