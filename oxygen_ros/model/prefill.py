"""PrefillPasses: the prefix half of Pi05Model — an observation's K/V into the page pool,
reusing what the prefix index holds, several robots' new observations in one padded batch
(mixed into Pi05Model; it uses the model's embeddings and VLM layer loop)."""

from typing import Optional, Sequence

import torch

from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.cache.page_table import PageTable
from oxygen_ros.cache.paged_attention import grouped_attention, paged_attention
from oxygen_ros.cache.prefix_index import page_keys, root_key
from oxygen_ros.model.prefix import Prefix

# Passes over new tokens (a batch of new prefixes, a request's prompt) are padded to a
# multiple of this many. oneDNN builds a kernel the first time it sees a matmul shape (about
# 1.4 ms each in bfloat16 on an AMX Xeon), so a prefix of a length not seen before cost
# about 10 ms more, and prompts vary in length with the state and the question. Padding
# makes the shapes recur, for at most 15 tokens' work.
TOKEN_BUCKET = 16


def padded_tokens(count: int) -> int:
    return -(-count // TOKEN_BUCKET) * TOKEN_BUCKET


class PrefillPasses:
    def prefix_page_keys(self, prefix: Prefix, page_size: int) -> list[bytes]:
        mode = self.config.prefix_attention
        whole = prefix.tokens.numpy().tobytes() if mode == "bidirectional" else b""
        root = root_key(self.weights_version, mode, prefix.cameras, prefix.image_digest, whole)
        return page_keys(root, prefix.token_keys(), page_size)

    def prefill(self, prefix: Prefix, cache: KVCache, owner: str = "prefix",
                reuse: bool = True) -> Optional[PageTable]:
        """The prefix's K/V in pages: cached pages are reused, only the rest is computed.
        With reuse=False the prefix index is neither read nor written (a private copy).

        Returns None, with the pool unchanged, if there are not enough free pages."""
        tables = self.prefill_many([prefix], cache, owner, reuse)
        return None if tables is None else tables[0]

    def prefill_many(self, prefixes: Sequence[Prefix], cache: KVCache, owner: str = "prefix",
                     reuse: bool = True) -> Optional[list[PageTable]]:
        """prefill() of several prefixes (the robots served in one frame): those with nothing
        cached are computed together, as one padded batch; a partly cached one is completed
        alone; one that repeats an earlier prefix of the list reuses its pages.

        Returns None, with no pages held, if the pool is short."""
        tables: list[Optional[PageTable]] = [None] * len(prefixes)
        keys_of: list[list[bytes]] = [[] for _ in prefixes]
        reused = [prefix.num_tokens for prefix in prefixes]     # tokens found in the index
        new, partial, repeats = [], [], []
        seen: set[tuple[bytes, ...]] = set()
        for i, prefix in enumerate(prefixes):
            keys = keys_of[i] = self.prefix_page_keys(prefix, cache.page_size) if reuse else []
            if keys and tuple(keys) in seen:
                repeats.append(i)    # found whole in the index once the first is computed
                continue
            seen.add(tuple(keys))
            table = tables[i] = cache.match_prefix(keys, owner)
            whole = bool(keys) and len(table.pages) == len(keys)
            table.length = prefix.num_tokens if whole else len(table.pages) * cache.page_size
            reused[i] = table.length
            if table.length < prefix.num_tokens:
                if not cache.reserve(table, prefix.num_tokens - table.length):
                    return self._free_all(tables, cache)
                (partial if table.length else new).append(i)
        try:
            if new:
                self._compute_new([prefixes[i] for i in new], [tables[i] for i in new], cache)
            for i in partial:
                self._complete_prefix(prefixes[i], tables[i], tables[i].length, cache)
        except BaseException:
            self._free_all(tables, cache)
            raise
        for i in new + partial:
            cache.index.insert(keys_of[i], tables[i].pages)
        for i in repeats:
            tables[i] = cache.match_prefix(keys_of[i], owner)
            tables[i].length = prefixes[i].num_tokens
        for prefix, tokens in zip(prefixes, reused):
            self.counters["prefix_tokens_computed"] += prefix.num_tokens - tokens
            self.counters["prefix_tokens_reused"] += tokens
        return tables

    @staticmethod
    def _free_all(tables: Sequence[Optional[PageTable]], cache: KVCache) -> None:
        for table in tables:
            if table is not None:
                cache.free(table)
        return None

    def _visible(self, prefix: Prefix, start: int = 0) -> torch.Tensor:
        """[T - start, T] bool: key j is visible to query i if j is bidirectional or not
        after i (j <= i)."""
        causal = prefix.causal(self.config.prefix_attention).to(self.device)
        keys = torch.arange(prefix.num_tokens, device=self.device)
        return (~causal[None, :]) | (keys[None, :] <= keys[start:, None])

    def _padded_visible(self, prefixes: Sequence[Prefix], longest: int) -> torch.Tensor:
        """What each query of prefixes padded to `longest` sees: [B, 1, longest] when every
        prefix token is bidirectional (a sequence's queries all see its own keys, one row
        broadcast), else [B, longest, longest]. Padding queries see real keys, never
        nothing (NaN); their outputs are not stored."""
        if self.config.prefix_attention == "bidirectional":
            keys = torch.arange(longest, device=self.device)
            lengths = torch.tensor([p.num_tokens for p in prefixes], device=self.device)
            return keys[None, None, :] < lengths[:, None, None]
        visible = torch.zeros(len(prefixes), longest, longest, dtype=torch.bool,
                              device=self.device)
        for row, prefix in enumerate(prefixes):
            visible[row, :prefix.num_tokens, :prefix.num_tokens] = self._visible(prefix)
            visible[row, prefix.num_tokens:, 0] = True
        return visible

    @torch.no_grad()
    def _compute_new(self, prefixes: Sequence[Prefix], tables: Sequence[PageTable],
                     cache: KVCache) -> None:
        """Whole prefixes as one batch [B, T, W], padded to the longest rounded up to
        TOKEN_BUCKET: one vision pass over all their images, one pass through the layers;
        padding is neither seen nor stored."""
        lengths = [p.num_tokens for p in prefixes]
        longest = padded_tokens(max(lengths))
        images = self.embed_images(torch.cat([p.images for p in prefixes]))
        images = images.split([p.num_image_tokens for p in prefixes])
        prompts = self.language_model.embed(torch.cat([p.tokens for p in prefixes])
                                            .to(self.device))
        prompts = prompts.split([len(p.tokens) for p in prefixes])
        x = images[0].new_zeros(len(prefixes), longest, images[0].shape[-1])
        for row, (image, prompt) in enumerate(zip(images, prompts)):
            x[row, :lengths[row]] = torch.cat([image, prompt])
        visible = self._padded_visible(prefixes, longest)
        positions = torch.arange(longest, device=self.device).expand(len(prefixes), longest)
        slots = torch.cat([cache.slots([table], [0], n)[0] for n, table in zip(lengths, tables)])
        keep = torch.cat([torch.arange(n, device=self.device) + row * longest
                          for row, n in enumerate(lengths)])
        self._dense_prefill(x, positions, visible, slots, keep, cache)
        for prefix, table in zip(prefixes, tables):
            table.length = prefix.num_tokens

    @torch.no_grad()
    def _complete_prefix(self, prefix: Prefix, table: PageTable, start: int,
                         cache: KVCache) -> None:
        """Tokens [start:] of a prefix whose first `start` are in the table's pages."""
        total = prefix.num_tokens
        x = self.embed_prefix(prefix, start)[None]                       # [1, T, W]
        positions = torch.arange(start, total, device=self.device)[None]
        visible = self._visible(prefix, start)                           # [T, total]
        slots = cache.slots([table], [start], total - start)
        block_tables = cache.block_tables([table])
        lens = torch.tensor([total], device=self.device)

        def attend(layer, q, k, v):
            cache.write(layer, slots, k, v)
            return paged_attention(q, cache.pool.k[layer], cache.pool.v[layer], block_tables,
                                   lens, self.scale, visible=visible[None])

        self._run_vlm(x, positions, attend)
        table.length = total

    def _dense_prefill(self, x: torch.Tensor, positions: torch.Tensor, visible: torch.Tensor,
                       slots: torch.Tensor, keep: torch.Tensor, cache: KVCache) -> None:
        """Every layer of whole prefixes x [B, T, W] at once (visible [B, T or 1, T]); the K/V
        of flat token positions `keep` written at `slots`."""
        def attend(layer, q, k, v):
            cache.write(layer, slots, k.flatten(0, 1)[keep], v.flatten(0, 1)[keep])
            return grouped_attention(q, k, v, visible, self.scale)

        self._run_vlm(x, positions, attend)
