"""DenseSuffix: the action tokens' attention on the CPU path, arranged once per chunk.

Every denoising step's layer reads the same prefix pages. Gathering them, building the mask
and appending the actions' K/V at every step and layer cost, for a batch of robots, a fifth
of the denoising. Here each layer's prefix K/V is gathered once into a dense buffer
[B, L + H, Hkv, D] that keeps room for the H action tokens after the longest prefix, the
mask (the same for every action query) is built once, and a step only writes its action
K/V in place. The buffers are allocated per chunk (2 · layers · B · (L + H) · Hkv · D
values), not from the page pool."""

import torch

from oxygen_ros.cache import paged_attention as reference


class DenseSuffix:
    def __init__(self, k_pages: torch.Tensor, v_pages: torch.Tensor,
                 block_tables: torch.Tensor, prefix_lens: torch.Tensor, horizon: int,
                 scale: float):
        """k_pages / v_pages: the pool's [layers, P, page_size, Hkv, D]."""
        self.k_pages, self.v_pages, self.block_tables = k_pages, v_pages, block_tables
        self.length = int(prefix_lens.max())
        self.scale = scale
        self.layers: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        batch, width = block_tables.shape[0], self.length + horizon
        positions = torch.arange(width, device=prefix_lens.device)
        seen = (positions[None] < prefix_lens[:, None]) | (positions[None] >= self.length)
        # action queries all see the same keys: one row per sequence, broadcast over them
        self.mask = None if bool(seen.all()) else torch.zeros(
            batch, 1, 1, width, dtype=k_pages.dtype, device=k_pages.device).masked_fill(
            ~seen[:, None, None], -torch.inf)

    def _buffers(self, layer: int, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if layer not in self.layers:
            batch, horizon = k.shape[:2]
            buffers = []
            for pages in (self.k_pages[layer], self.v_pages[layer]):
                prefix = reference.gather(pages, self.block_tables, self.length)
                buffer = prefix.new_empty(batch, self.length + horizon, *prefix.shape[2:])
                buffer[:, :self.length] = prefix
                buffers.append(buffer)
            self.layers[layer] = tuple(buffers)
        return self.layers[layer]

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor,
               v: torch.Tensor) -> torch.Tensor:
        """q [B, H, Hq, D] of the action tokens, k / v [B, H, Hkv, D] their K/V this step."""
        keys, values = self._buffers(layer, k)
        keys[:, self.length:] = k
        values[:, self.length:] = v
        return reference.folded_attention(q, keys, values, self.mask, self.scale)
