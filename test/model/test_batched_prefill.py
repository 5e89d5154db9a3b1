"""prefill_many: the prefixes of the robots served in one frame, new ones computed in one
batched pass (the shorter padded), give the pages and actions each prefill() gives alone."""

import pytest
import torch

from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.model.config import preset
from oxygen_ros.model.pi05 import Pi05Model


def stored(cache, table):
    """The K/V a table holds, every layer: [layers, length, kv heads, head dim] each."""
    slots = torch.tensor(table.slots(0, table.length, cache.page_size))
    return (cache.pool.k.flatten(1, 2)[:, slots], cache.pool.v.flatten(1, 2)[:, slots])


def actions(model, tables, cache):
    config = model.config
    noise = torch.randn(len(tables), config.action_horizon, config.action_dim,
                        generator=torch.Generator().manual_seed(0))
    return model.sample_actions(tables, noise, cache)


@pytest.mark.parametrize("attention", ["bidirectional", "causal_prompt"])
def test_a_batch_of_new_prefixes_of_different_lengths_equals_each_prefilled_alone(
        make_prefix, attention):
    config = preset("tiny").with_(prefix_attention=attention)
    model = Pi05Model(config, seed=0).eval()
    prefixes = [make_prefix(config, seed=0, instruction="pick up the red cup"),
                make_prefix(config, seed=1, instruction="stack the blocks on the left tray",
                            cameras=["base"]),
                make_prefix(config, seed=2, instruction="wave")]
    assert len({p.num_tokens for p in prefixes}) == 3     # two of them are padded
    batched_cache = KVCache.for_model(config, num_pages=64, page_size=16, action_batch=3)
    batched = model.prefill_many(prefixes, batched_cache)
    assert model.counters["prefix_tokens_computed"] == sum(p.num_tokens for p in prefixes)
    alone_cache = KVCache.for_model(config, num_pages=64, page_size=16, action_batch=3)
    alone = [model.prefill(p, alone_cache) for p in prefixes]
    for prefix, table, reference in zip(prefixes, batched, alone):
        assert table.length == reference.length == prefix.num_tokens
        for got, want in zip(stored(batched_cache, table), stored(alone_cache, reference)):
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(actions(model, batched, batched_cache),
                               actions(model, alone, alone_cache), atol=1e-5, rtol=1e-5)
    # the batch's pages are indexed: each prefix is found again whole
    again = model.prefill_many(prefixes, batched_cache)
    assert [t.pages for t in again] == [t.pages for t in batched]
    assert model.counters["prefix_tokens_computed"] == 2 * sum(p.num_tokens for p in prefixes)


def test_a_repeated_or_partly_cached_prefix_in_the_batch_is_computed_only_where_new(make_prefix):
    config = preset("tiny").with_(prefix_attention="causal_prompt")
    model = Pi05Model(config, seed=0).eval()
    cache = KVCache.for_model(config, num_pages=64, page_size=4, action_batch=3)
    cached_prefix = make_prefix(config, seed=0, state_seed=0)
    cached = model.prefill(cached_prefix, cache)
    computed = model.counters["prefix_tokens_computed"]
    same_images = make_prefix(config, seed=0, state_seed=1)      # only the state differs
    new = make_prefix(config, seed=1)
    hits = cache.index.hit_pages
    tables = model.prefill_many([same_images, new, make_prefix(config, seed=1)], cache)
    assert tables[2].pages == tables[1].pages                     # computed once, shared
    # the pages before the first differing token are the cached prefix's
    before, after = (model.prefix_page_keys(p, 4) for p in (cached_prefix, same_images))
    shared = next(i for i, (a, b) in enumerate(zip(before, after)) if a != b)
    assert shared > 0 and tables[0].pages[:shared] == cached.pages[:shared]
    assert model.counters["prefix_tokens_computed"] - computed == (
        new.num_tokens + same_images.num_tokens - 4 * shared)
    assert cache.index.hit_pages - hits == shared + len(tables[2].pages)  # each matched once
    fresh = KVCache.for_model(config, num_pages=64, page_size=4, action_batch=3)
    alone = [model.prefill(p, fresh, reuse=False) for p in (same_images, new)]
    torch.testing.assert_close(actions(model, tables[:2], cache), actions(model, alone, fresh),
                               atol=1e-5, rtol=1e-5)


def test_a_batch_the_pool_cannot_hold_holds_no_pages(make_prefix):
    model = Pi05Model(preset("tiny"), seed=0).eval()
    prefixes = [make_prefix(model.config, seed=seed) for seed in range(3)]
    cache = KVCache.for_model(model.config, num_pages=64, page_size=16)
    room = 2 * cache.pages_for(prefixes[0].num_tokens)     # two of the three fit
    cache = KVCache.for_model(model.config, num_pages=room, page_size=16)
    assert model.prefill_many(prefixes, cache) is None
    cache.pool.check_whole()
    assert cache.pool.num_free == room


def test_a_batch_whose_pass_fails_holds_no_pages(make_prefix):
    model = Pi05Model(preset("tiny"), seed=0).eval()
    cache = KVCache.for_model(model.config, num_pages=64, page_size=16)
    cached = make_prefix(model.config, seed=0)
    cache.free(model.prefill(cached, cache))       # its pages stay indexed

    def out_of_memory(*args):
        raise MemoryError("the batched pass")

    model._compute_new = out_of_memory
    with pytest.raises(MemoryError):
        model.prefill_many([cached, make_prefix(model.config, seed=1)], cache)
    cache.pool.check_whole()
    assert cache.pool.used_pages == 0
