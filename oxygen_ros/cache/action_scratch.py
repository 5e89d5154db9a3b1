"""The action tier: the action suffix's own K/V, outside the page pool.

Each denoise step recomputes the H action tokens' keys and values (the actions change
every step), and no later step or task reads them; so one step's worth per layer is
enough. The buffer is allocated once at start-up and overwritten every step: motor work
never takes pages and can never fail for lack of them. (On the eager CPU path the action
K/V go into the chunk's DenseSuffix instead, beside its gathered prefixes:
dense_suffix.py.) Keeping every step's K/V (H x steps
tokens) would cost num_denoise_steps times more memory and buy nothing.
"""

import torch


class ActionScratch:
    def __init__(self, num_layers: int, max_batch: int, horizon: int, num_kv_heads: int,
                 head_dim: int, dtype: torch.dtype = torch.float32,
                 device: torch.device | str = "cpu"):
        shape = (num_layers, max_batch, horizon, num_kv_heads, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.max_batch = max_batch

    @property
    def bytes(self) -> int:
        return 2 * self.k.numel() * self.k.element_size()
