"""PagePool: every KV page of one device, allocated once; reference counts, LRU free queue."""

from collections import defaultdict
from typing import Callable, Optional

import torch


class PagePool:
    """K and V for all layers live in two tensors [layers, pages, page_size, kv_heads, head_dim].

    A page is free when its reference count is zero. Free pages sit in one doubly linked
    queue (O(1) push, pop and removal from the middle): pages holding nothing go to the
    head and are reused first; pages the prefix index still maps go to the tail, so the
    least recently released cached page is evicted first. allocate() returns None when
    there are not enough free pages — the caller decides what to preempt.
    """

    def __init__(self, num_pages: int, page_size: int, num_layers: int, num_kv_heads: int,
                 head_dim: int, dtype: torch.dtype = torch.float32,
                 device: torch.device | str = "cpu"):
        if num_pages < 1 or page_size < 1:
            raise ValueError("num_pages and page_size must be positive")
        shape = (num_layers, num_pages, page_size, num_kv_heads, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.num_pages, self.page_size = num_pages, page_size
        self.page_bytes = 2 * self.k[:, 0].numel() * self.k.element_size()
        self.ref_count = [0] * num_pages
        self.cached = [False] * num_pages         # the prefix index maps this page
        self.owner: list[Optional[str]] = [None] * num_pages
        self.on_evict: Callable[[int], None] = lambda page: None
        # free queue: node i is page i, node num_pages is the sentinel
        self._next = list(range(1, num_pages + 1)) + [0]
        self._prev = [num_pages] + list(range(num_pages))
        self.num_free = num_pages
        self._owner_pages: dict[str, int] = defaultdict(int)
        self.peak_pages = 0

    # -- free queue -------------------------------------------------------------------
    def _unlink(self, page: int) -> None:
        prev, nxt = self._prev[page], self._next[page]
        self._next[prev], self._prev[nxt] = nxt, prev
        self.num_free -= 1

    def _link_after(self, anchor: int, page: int) -> None:
        nxt = self._next[anchor]
        self._prev[page], self._next[page] = anchor, nxt
        self._next[anchor] = self._prev[nxt] = page
        self.num_free += 1

    # -- verbs ------------------------------------------------------------------------
    def can_allocate(self, count: int) -> bool:
        return count <= self.num_free

    def allocate(self, count: int, owner: str) -> Optional[list[int]]:
        """`count` pages with reference count 1, or None (nothing changed) if too few are free."""
        if count > self.num_free:
            return None
        pages = []
        for _ in range(count):
            page = self._next[self.num_pages]
            self._unlink(page)
            if self.cached[page]:
                self.cached[page] = False
                self.on_evict(page)
            self.ref_count[page] = 1
            self.owner[page] = owner
            pages.append(page)
        self._account(owner, count)
        return pages

    def retain(self, page: int) -> None:
        """One more reference; a cached page is taken back out of the free queue."""
        if self.ref_count[page] == 0:
            if not self.cached[page]:
                raise ValueError(f"page {page} is free and holds nothing to retain")
            self._unlink(page)
            self._account(self.owner[page], 1)
        self.ref_count[page] += 1

    def release(self, page: int) -> None:
        if self.ref_count[page] <= 0:
            raise ValueError(f"page {page} released more often than retained")
        self.ref_count[page] -= 1
        if self.ref_count[page] == 0:
            self._account(self.owner[page], -1)
            anchor = self._prev[self.num_pages] if self.cached[page] else self.num_pages
            self._link_after(anchor, page)

    def is_writable(self, page: int) -> bool:
        """Only an unshared page that the prefix index does not map may be written in place."""
        return self.ref_count[page] == 1 and not self.cached[page]

    def copy(self, src: int, dst: int) -> None:
        self.k[:, dst].copy_(self.k[:, src])
        self.v[:, dst].copy_(self.v[:, src])

    # -- accounting -------------------------------------------------------------------
    def _account(self, owner: str, delta: int) -> None:
        self._owner_pages[owner] += delta
        self.peak_pages = max(self.peak_pages, self.used_pages)

    @property
    def used_pages(self) -> int:
        """Pages referenced by at least one table (cached but unreferenced pages are free)."""
        return self.num_pages - self.num_free

    @property
    def bytes_in_use(self) -> int:
        return self.used_pages * self.page_bytes

    @property
    def peak_bytes(self) -> int:
        return self.peak_pages * self.page_bytes

    def bytes_by_owner(self) -> dict[str, int]:
        owners = dict(self._owner_pages)    # one copy: /diagnostics reads from its thread
        return {o: n * self.page_bytes for o, n in owners.items() if n}

    def reset_peak(self) -> None:
        self.peak_pages = self.used_pages

    def check_whole(self) -> None:
        """Raise unless every page is free and the free queue links all of them once."""
        referenced = [p for p, n in enumerate(self.ref_count) if n]
        if referenced:
            raise AssertionError(f"pages still referenced: {referenced[:16]}")
        seen, node = set(), self._next[self.num_pages]
        while node != self.num_pages:
            if node in seen:
                raise AssertionError(f"free queue loops at page {node}")
            seen.add(node)
            node = self._next[node]
        if len(seen) != self.num_pages or self.num_free != self.num_pages:
            raise AssertionError(f"free queue holds {len(seen)} of {self.num_pages} pages")
