"""Real-Time Chunking (Black, Galliker, Levine 2025, arXiv 2506.07339): a new chunk is
denoised as an inpainting of the plan in force, so it continues that plan where it takes
over instead of being faded into it.

The actions that execute while the chunk is computed (the first `inference_delay` steps)
get weight 1 toward the plan in force, the next ones a decaying weight up to
`execution_horizon`, the rest 0. Every Euler step of the flow is corrected by the weighted
error between that target and the step's estimate of the clean chunk, times a guidance
weight that is large early in denoising and clipped at `max_guidance_weight`.

Names, time convention (t runs from 1 = noise to 0 = actions; x̂₁ = x_t - t·v), schedules,
guidance weight, the capping of the delay by the horizon and of the horizon by the length
of the previous chunk, and its zero-padding follow lerobot 0.6.1 (`policies/rtc`), so the
same weights, noise and previous chunk give the same chunk — except where the steps that
run meanwhile outlast the previous chunk or the horizon, or the previous chunk ends within
`least_overlap` steps after them (guide()). Two guidance variants:

- ``vjp``: the paper's. The correction is the weighted error pulled back through the
  denoiser, err·∂x̂₁/∂x_t = err - t·Jᵥᵀerr: one vector-Jacobian product through the action
  expert per step (the prefix K/V pages are only read).
- ``error``: lerobot 0.6.1 as it runs. Its velocity is computed before the input starts
  tracking gradients, so ∂x̂₁/∂x_t is the identity and the correction is the weighted error
  itself; no backward pass.
"""

import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch

from oxygen_ros.engine.rtc_settings import RTCSettings


def prefix_weights(start: int, end: int, total: int, schedule: str) -> torch.Tensor:
    """[total] weights toward the old plan: 1 before `start` (the delay, capped at `end`),
    the schedule's decay from `start` to `end`, 0 after (lerobot's get_prefix_weights)."""
    start = min(start, end)
    if schedule == "zeros":
        weights = torch.zeros(total)
        weights[:start] = 1.0
        return weights
    if schedule == "ones":
        weights = torch.ones(total)
        weights[end:] = 0.0
        return weights
    steps = total - max(total - end, 0) - start
    ramp = torch.linspace(1, 0, steps + 2)[1:-1] if end > start and steps > 0 \
        else torch.tensor([])
    if schedule == "exp":
        ramp = ramp * torch.expm1(ramp).div(math.e - 1)
    if total - end > 0:
        ramp = torch.cat([ramp, torch.zeros(total - end)])
    if min(start, total) > 0:
        ramp = torch.cat([torch.ones(min(start, total)), ramp])
    return ramp


def guidance_weight(time: float, max_guidance_weight: float) -> torch.Tensor:
    """The paper's ((1-τ)/τ)·((1-τ)² + τ²)/(1-τ)² with τ = 1 - time, clipped (a 0-d tensor)."""
    limit = torch.as_tensor(max_guidance_weight)
    tau = torch.as_tensor(1 - time)
    squared = (1 - tau) ** 2
    inv_r2 = (squared + tau ** 2) / squared
    c = torch.nan_to_num((1 - tau) / tau, posinf=limit)
    return torch.minimum(torch.nan_to_num(c * inv_r2, posinf=limit), limit)


@dataclass(frozen=True)
class Guide:
    """What a batch of chunks is guided toward: per row, the plan in force's leftover
    (zero-padded) and its weights; a row with no plan in force has weight 0 everywhere,
    which leaves its velocity, and so its chunk, the plain sampler's."""
    goal: torch.Tensor        # [B, H, A] float32
    weights: torch.Tensor     # [B, H, 1]


def guide(rows: Sequence[Optional[tuple[torch.Tensor, int]]], like: torch.Tensor,
          settings: RTCSettings) -> Guide:
    """The Guide for chunks shaped `like` [B, H, A]: row i continues rows[i] = (leftover
    [T', A'] indexed from the new chunk's step 0, inference_delay), or None. The steps
    frozen by the delay stay frozen whatever the horizon (lerobot caps the delay by the
    horizon instead, leaving the later ones unguided), and whatever the leftover's length:
    those past its end are frozen to its last step, which the robot holds until the
    takeover (lerobot leaves them unguided). A leftover that ends within
    `least_overlap` steps after the frozen ones is continued by its last step held (what
    the robot does once a plan has run out) up to there, so the chunk still departs from
    the held pose over a ramp instead of jumping at the step after the frozen ones."""
    batch, horizon, dims = like.shape
    goal = torch.zeros(batch, horizon, dims)
    weights = torch.zeros(batch, horizon, 1)
    for row, guided in enumerate(rows):
        if guided is None:
            continue
        previous, delay = guided
        held = min(delay + settings.least_overlap, horizon) - previous.shape[0]
        if held > 0:   # the plan ends before the takeover or soon after: the stream holds
            #            its last step
            previous = torch.cat([previous, previous[-1:].expand(held, -1)])
        length, width = min(previous.shape[0], horizon), min(previous.shape[1], dims)
        goal[row, :length, :width] = previous[:length, :width].float()
        end = min(max(settings.execution_horizon, delay + settings.least_overlap),
                  previous.shape[0])
        weights[row, :, 0] = prefix_weights(delay, end, horizon,
                                            settings.prefix_attention_schedule)
    return Guide(goal.to(like.device), weights.to(like.device))


def guided_velocity(x_t: torch.Tensor, guidance: Guide, time: float,
                    velocity: Callable[[torch.Tensor], torch.Tensor],
                    settings: RTCSettings) -> torch.Tensor:
    """One step's velocity [B, H, A] at `time`, corrected toward each row's goal."""
    goal, weights = guidance.goal, guidance.weights
    if settings.guidance == "vjp":
        with torch.enable_grad():
            x = x_t.detach().requires_grad_(True)
            v = velocity(x).float()
            clean = x - time * v
            error = (goal - clean) * weights
            correction = torch.autograd.grad(clean, x, error.detach())[0]
        v = v.detach()
    else:
        with torch.no_grad():    # no backward pass: no graph to record
            v = velocity(x_t).float()
        correction = (goal - (x_t - time * v)) * weights
    # a Python number: no host-to-device copy, so the loop can be captured in a CUDA graph
    return v - float(guidance_weight(time, settings.max_guidance_weight)) * correction


def integrate(velocity: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
              noise: torch.Tensor, steps: int, guidance: Guide,
              settings: RTCSettings) -> torch.Tensor:
    """Euler from noise at t = 1 to actions at t = 0 (the plain sampler's loop), each step
    guided toward the Guide's goals."""
    dt = -1.0 / steps
    x = noise.float()
    for step in range(steps):
        time = 1.0 + step * dt
        t = torch.full((x.shape[0],), time, device=x.device)
        v = guided_velocity(x, guidance, time, lambda x_in, t=t: velocity(x_in, t), settings)
        x = x + dt * v
    return x
