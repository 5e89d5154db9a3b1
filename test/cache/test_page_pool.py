"""PagePool and KVCache bookkeeping: counts, free queue order, failure as a value, CoW."""

import random

import pytest
import torch

from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.cache.page_pool import PagePool
from oxygen_ros.cache.prefix_index import PrefixIndex, page_keys, root_key


def pool(pages=8, page_size=4):
    return PagePool(pages, page_size, num_layers=2, num_kv_heads=1, head_dim=4)


def cache(pages=16, page_size=4):
    return KVCache(pages, page_size, num_layers=2, num_kv_heads=1, head_dim=4, action_batch=1,
                   action_horizon=3)


def test_allocation_failure_is_reported_and_changes_nothing():
    p = pool(pages=4)
    held = p.allocate(3, "prefix")
    before = (list(p.ref_count), p.num_free, p.bytes_in_use)
    assert p.allocate(2, "dialogue") is None
    assert (list(p.ref_count), p.num_free, p.bytes_in_use) == before
    for page in held:
        p.release(page)
    p.check_whole()


def test_byte_accounting_by_owner_and_peak():
    p = pool(pages=8)
    a = p.allocate(3, "prefix")
    b = p.allocate(2, "dialogue")
    assert p.bytes_in_use == 5 * p.page_bytes
    assert p.bytes_by_owner() == {"prefix": 3 * p.page_bytes, "dialogue": 2 * p.page_bytes}
    for page in a + b:
        p.release(page)
    assert p.bytes_in_use == 0 and p.peak_bytes == 5 * p.page_bytes
    assert p.bytes_by_owner() == {}
    assert p.page_bytes == 2 * 2 * 4 * 1 * 4 * 4  # K and V x layers x page x heads x dim x fp32


def test_cached_pages_are_evicted_least_recently_released_first_and_plain_pages_before_them():
    p = pool(pages=4)
    index = PrefixIndex(p)
    pages = p.allocate(4, "prefix")
    keys = page_keys(root_key("x"), range(16), 4)
    index.insert(keys[:3], pages[:3])          # pages 0..2 cached, page 3 not
    for page in (pages[1], pages[0], pages[3], pages[2]):
        p.release(page)
    first, = p.allocate(1, "dialogue")
    assert first == pages[3]                   # holds nothing: reused first
    second, = p.allocate(1, "dialogue")
    assert second == pages[1]                  # least recently released cached page
    assert index.match(keys[:3]) == [pages[0]]  # its key is gone: the chain breaks there
    assert len(index) == 2


def test_retaining_a_cached_free_page_takes_it_off_the_free_queue():
    p = pool(pages=2)
    index = PrefixIndex(p)
    page, = p.allocate(1, "prefix")
    key = page_keys(root_key("y"), range(4), 4)
    index.insert(key, [page])
    p.release(page)
    assert p.num_free == 2
    assert index.match(key) == [page] and p.ref_count[page] == 1 and p.num_free == 1
    other, = p.allocate(1, "x")
    assert other != page and p.allocate(1, "x") is None


def test_copy_on_write_never_changes_another_sequences_view():
    c = cache(pages=8, page_size=4)
    table = c.allocate(6, "prefix")           # pages: [full, half-full]
    values = torch.arange(6 * 4, dtype=torch.float32).view(6, 1, 4)
    for layer in range(2):
        c.write(layer, c.slots([table], [0], 6), values + layer, values - layer)
    table.length = 6
    fork = c.fork(table, "dialogue")
    assert c.reserve(fork, 3)                 # writes into the shared half-full page
    assert fork.pages[0] == table.pages[0] and fork.pages[1] != table.pages[1]
    assert c.copies_on_write == 1
    c.write(0, c.slots([fork], [6], 3), torch.full((3, 1, 4), -7.0), torch.full((3, 1, 4), -7.0))
    fork.length = 9
    original = c.pool.k[0].view(-1, 1, 4)[c.slots([table], [0], 6)[0]]
    forked = c.pool.k[0].view(-1, 1, 4)[c.slots([fork], [0], 6)[0]]
    torch.testing.assert_close(original, values)
    torch.testing.assert_close(forked, values)  # the copy carries the shared tokens
    c.free(fork)
    c.free(table)
    c.pool.check_whole()


def test_a_sole_owner_appends_in_place_but_never_into_a_cached_page():
    c = cache(pages=8, page_size=4)
    table = c.allocate(2, "dialogue")
    table.length = 2
    assert c.reserve(table, 1) and c.copies_on_write == 0
    c.index.insert(page_keys(root_key("z"), range(2), 4), table.pages)
    assert c.reserve(table, 1) and c.copies_on_write == 1
    c.free(table)
    c.pool.check_whole()


def test_reserve_is_all_or_nothing_under_page_shortage():
    c = cache(pages=3, page_size=4)
    table = c.allocate(6, "prefix")
    table.length = 6
    fork = c.fork(table, "dialogue")
    pages_before, refs_before = list(fork.pages), list(c.pool.ref_count)
    assert not c.reserve(fork, 7)             # needs a CoW copy + 2 pages, only 1 free
    assert fork.pages == pages_before and c.pool.ref_count == refs_before
    c.free(fork)
    c.free(table)
    c.pool.check_whole()


@pytest.mark.parametrize("seed", range(5))
def test_any_sequence_of_prefill_fork_append_free_returns_every_page(seed):
    rng = random.Random(seed)
    c = cache(pages=24, page_size=4)
    live = []
    for step in range(300):
        action = rng.choice(["prefill", "fork", "append", "free"])
        if action == "prefill":
            tokens = rng.randrange(1, 14)
            keys = page_keys(root_key(rng.randrange(4), tokens), range(tokens), 4)
            table = c.match_prefix(keys, "prefix")
            table.length = tokens if len(table.pages) == len(keys) else len(table.pages) * 4
            if not c.reserve(table, tokens - table.length):
                c.free(table)
                continue
            c.index.insert(keys, table.pages)
            table.length = tokens
            live.append(table)
        elif action == "fork" and live:
            live.append(c.fork(rng.choice(live), "dialogue"))
        elif action == "append" and live:
            table = rng.choice(live)
            count = rng.randrange(1, 6)
            if c.reserve(table, count):
                table.length += count
        elif action == "free" and live:
            c.free(live.pop(rng.randrange(len(live))))
        assert c.pool.used_pages == sum(1 for n in c.pool.ref_count if n)
        assert all(n >= 0 for n in c.pool.ref_count)
    for table in live:
        c.free(table)
    c.pool.check_whole()
