"""KVCache: the unified cache one engine owns — page pool, prefix index and action tier —
with the verbs sequences need: allocate, fork, reserve (append room, copy-on-write), free."""

from typing import Optional, Sequence

import torch

from oxygen_ros.cache.action_scratch import ActionScratch
from oxygen_ros.cache.page_pool import PagePool
from oxygen_ros.cache.page_table import PageTable
from oxygen_ros.cache.prefix_index import PrefixIndex


class KVCache:
    def __init__(self, num_pages: int, page_size: int, num_layers: int, num_kv_heads: int,
                 head_dim: int, action_batch: int, action_horizon: int,
                 dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu"):
        self.pool = PagePool(num_pages, page_size, num_layers, num_kv_heads, head_dim, dtype,
                             device)
        self.index = PrefixIndex(self.pool)
        # action_batch 0: a cache that serves language only (no action tier)
        self.actions = ActionScratch(num_layers, action_batch, action_horizon, num_kv_heads,
                                     head_dim, dtype, device)
        self.page_size = page_size
        self.copies_on_write = 0

    @classmethod
    def for_model(cls, config, num_pages: int, page_size: int = 16, action_batch: int = 1,
                  dtype: torch.dtype = torch.float32, device="cpu") -> "KVCache":
        return cls(num_pages, page_size, config.num_layers, config.vlm.num_kv_heads,
                   config.vlm.head_dim, action_batch, config.action_horizon, dtype, device)

    def pages_for(self, tokens: int) -> int:
        return -(-tokens // self.page_size)

    def allocate(self, tokens: int, owner: str) -> Optional[PageTable]:
        """An empty table with room for `tokens` tokens, or None if the pool is short."""
        table = PageTable(owner)
        return table if self.reserve(table, tokens) else None

    def fork(self, table: PageTable, owner: str) -> PageTable:
        """A new table that shares every page of `table` by reference (no copy)."""
        for page in table.pages:
            self.pool.retain(page)
        return PageTable(owner, list(table.pages), table.length)

    def reserve(self, table: PageTable, tokens: int) -> bool:
        """Make room to write `tokens` more tokens after table.length.

        A partially filled last page that is shared or cached is copied first (copy-on-
        write), so no other sequence's view changes. All or nothing: on False the table
        and the pool are as they were.
        """
        needed = self.pages_for(table.length + tokens) - len(table.pages)
        partial = table.length // self.page_size if table.length % self.page_size else None
        cow = (tokens > 0 and partial is not None
               and not self.pool.is_writable(table.pages[partial]))
        if not self.pool.can_allocate(max(needed, 0) + cow):
            return False
        if cow:
            fresh, = self.pool.allocate(1, table.owner)
            self.pool.copy(table.pages[partial], fresh)
            self.pool.release(table.pages[partial])
            table.pages[partial] = fresh
            self.copies_on_write += 1
        if needed > 0:
            table.pages.extend(self.pool.allocate(needed, table.owner))
        return True

    def free(self, table: PageTable) -> None:
        for page in table.pages:
            self.pool.release(page)
        table.pages, table.length = [], 0

    def match_prefix(self, keys: Sequence[bytes], owner: str) -> PageTable:
        """A table over the longest cached run of `keys` (length in pages, caller sets tokens)."""
        return PageTable(owner, self.index.match(keys))

    def slots(self, tables: Sequence[PageTable], starts: Sequence[int], count: int) -> torch.Tensor:
        """Flat slot indices [len(tables), count] for positions start..start+count-1."""
        return torch.tensor([t.slots(s, count, self.page_size) for t, s in zip(tables, starts)],
                            dtype=torch.long, device=self.pool.k.device)

    def block_tables(self, tables: Sequence[PageTable]) -> torch.Tensor:
        """Page ids padded with 0 to the longest table: [len(tables), max_pages] int32."""
        width = max(1, max(len(t.pages) for t in tables))
        rows = [t.pages + [0] * (width - len(t.pages)) for t in tables]
        return torch.tensor(rows, dtype=torch.int32, device=self.pool.k.device)

    def write(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store K/V [..., kv_heads, head_dim] at flat slots of the same leading shape.

        Indexes the pool tensors themselves, not a view of one layer: inside torch.compile
        a write through a view is replayed onto its base, a copy of the whole pool per
        step."""
        flat = slots.reshape(-1)
        page = torch.div(flat, self.page_size, rounding_mode="floor")
        index = (torch.full_like(flat, layer), page, flat - page * self.page_size)
        self.pool.k.index_put_(index, k.reshape(-1, *k.shape[-2:]).to(self.pool.k.dtype))
        self.pool.v.index_put_(index, v.reshape(-1, *v.shape[-2:]).to(self.pool.v.dtype))
