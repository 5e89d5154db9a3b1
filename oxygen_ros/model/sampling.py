"""Next-token choice from logits: greedy, or temperature with nucleus (top-p) sampling."""

from typing import Optional

import torch


def sample(logits: torch.Tensor, temperature: float = 0.0, top_p: float = 1.0,
           generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """logits [B, V] -> token ids [B]. temperature 0 is greedy (argmax)."""
    if temperature <= 0.0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        # keep the smallest set whose mass reaches top_p (always at least the top token)
        outside = sorted_probs.cumsum(-1) - sorted_probs >= top_p
        sorted_probs = sorted_probs.masked_fill(outside, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    if generator is not None and generator.device != probs.device:
        probs = probs.cpu()     # a request's generator lives on the CPU (reproducible anywhere)
    return torch.multinomial(probs, 1, generator=generator)[:, 0].to(logits.device)
