"""PrefixIndex: maps chained page hashes to pages that already hold that prefix's K/V.

Page i's key is hash(key of page i-1, the content of page i's tokens); the first page
chains from a root key that carries what else the K/V depend on (weights version, camera
set, attention pattern, and — for a fully bidirectional prefix — a digest of the whole
prefix, since then every token's K/V depend on every other token). The last page of a
prefix may be partial: its key covers exactly the tokens it holds, and the pool never
writes a mapped page in place (copy-on-write), so it stays valid.
"""

import hashlib
from typing import Sequence

import numpy as np

from oxygen_ros.cache.page_pool import PagePool


def root_key(*parts: object) -> bytes:
    digest = hashlib.blake2b(digest_size=16)
    for part in parts:
        digest.update(part if isinstance(part, bytes) else repr(part).encode())
        digest.update(b"\x00")
    return digest.digest()


def page_keys(root: bytes, token_keys: Sequence[int], page_size: int) -> list[bytes]:
    """Chained keys of the pages holding `token_keys` (the last page may be partial)."""
    keys, parent = [], root
    tokens = np.asarray(token_keys, dtype=np.int64)
    for start in range(0, len(tokens), page_size):
        parent = hashlib.blake2b(parent + tokens[start:start + page_size].tobytes(),
                                 digest_size=16).digest()
        keys.append(parent)
    return keys


class PrefixIndex:
    def __init__(self, pool: PagePool):
        self.pool = pool
        self._page_of: dict[bytes, int] = {}
        self._key_of: dict[int, bytes] = {}
        pool.on_evict = self._forget
        self.hit_pages = 0
        self.miss_pages = 0

    def match(self, keys: Sequence[bytes]) -> list[int]:
        """Pages of the longest mapped run of `keys` from the start, each retained once."""
        pages = []
        for key in keys:
            page = self._page_of.get(key)
            if page is None:
                break
            self.pool.retain(page)
            pages.append(page)
        self.hit_pages += len(pages)
        self.miss_pages += len(keys) - len(pages)
        return pages

    def insert(self, keys: Sequence[bytes], pages: Sequence[int]) -> None:
        """Map each key to its page (pages already mapped under another key stay as they are)."""
        for key, page in zip(keys, pages):
            if key in self._page_of or page in self._key_of:
                continue
            self._page_of[key] = page
            self._key_of[page] = key
            self.pool.cached[page] = True

    def _forget(self, page: int) -> None:
        del self._page_of[self._key_of.pop(page)]

    def __len__(self) -> int:
        return len(self._page_of)
