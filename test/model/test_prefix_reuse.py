"""A prefix already in the cache is reused without recompute, as far as attention allows."""

import pytest
import torch

from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.model.config import preset
from oxygen_ros.model.pi05 import Pi05Model
from oxygen_ros.model.tokenizer import ByteTokenizer


class VisionCalls:
    def __init__(self, model):
        self.count = 0
        model.vision.register_forward_hook(lambda *args: setattr(self, "count", self.count + 1))


def actions(model, table, cache, seed=0):
    config = model.config
    noise = torch.randn(1, config.action_horizon, config.action_dim,
                        generator=torch.Generator().manual_seed(seed))
    return model.sample_actions([table], noise, cache)


def test_an_identical_prefix_maps_to_the_same_pages_without_recompute(make_prefix):
    model = Pi05Model(preset("tiny"), seed=0).eval()
    calls = VisionCalls(model)
    cache = KVCache.for_model(model.config, num_pages=64, page_size=16)
    prefix = make_prefix(model.config, seed=0)
    first = model.prefill(prefix, cache)
    assert calls.count == 1
    computed = model.counters["prefix_tokens_computed"]
    second = model.prefill(make_prefix(model.config, seed=0), cache)  # same pixels, new objects
    assert second.pages == first.pages and second.length == first.length == prefix.num_tokens
    assert calls.count == 1 and model.counters["prefix_tokens_computed"] == computed
    assert all(cache.pool.ref_count[p] == 2 for p in first.pages)
    torch.testing.assert_close(actions(model, first, cache), actions(model, second, cache))


def test_bidirectional_prefix_is_only_reused_whole(make_prefix):
    model = Pi05Model(preset("tiny"), seed=0).eval()
    cache = KVCache.for_model(model.config, num_pages=64, page_size=16)
    first = model.prefill(make_prefix(model.config, seed=0, state_seed=0), cache)
    hits = cache.index.hit_pages
    other = model.prefill(make_prefix(model.config, seed=0, state_seed=1), cache)  # new state
    assert cache.index.hit_pages == hits       # same images, but nothing is reusable
    assert not set(first.pages) & set(other.pages)


def test_causal_prompt_variant_reuses_the_image_pages_when_only_the_state_changes(make_prefix):
    config = preset("tiny").with_(prefix_attention="causal_prompt")
    model = Pi05Model(config, seed=0).eval()
    calls = VisionCalls(model)
    cache = KVCache.for_model(config, num_pages=64, page_size=4)
    original = make_prefix(config, seed=0, state_seed=0)
    first = model.prefill(original, cache)
    changed = make_prefix(config, seed=0, state_seed=1)
    second = model.prefill(changed, cache)
    # every whole page before the first differing prompt token is reused: the images and
    # the unchanged "Task: ..., State: " text
    differ = int((original.token_keys() != changed.token_keys()).nonzero()[0][0])
    shared_pages = differ // cache.page_size
    assert shared_pages * cache.page_size > changed.num_image_tokens
    assert second.pages[:shared_pages] == first.pages[:shared_pages]
    assert not set(second.pages[shared_pages:]) & set(first.pages)
    assert calls.count == 1                    # the vision tower did not run again
    assert model.counters["prefix_tokens_reused"] == shared_pages * cache.page_size

    fresh_cache = KVCache.for_model(config, num_pages=64, page_size=4)
    fresh = model.prefill(changed, fresh_cache)
    torch.testing.assert_close(actions(model, second, cache), actions(model, fresh, fresh_cache),
                               atol=1e-5, rtol=0)


def test_prefill_reports_a_page_shortage_and_leaves_the_pool_as_it_was(make_prefix):
    model = Pi05Model(preset("tiny"), seed=0).eval()
    cache = KVCache.for_model(model.config, num_pages=3, page_size=16)
    prefix = make_prefix(model.config, seed=0)
    assert cache.pages_for(prefix.num_tokens) > 3
    assert model.prefill(prefix, cache) is None
    cache.pool.check_whole()
    assert len(cache.index) == 0


def test_a_dialogue_appending_to_a_shared_prefix_leaves_the_cached_prefix_intact(make_prefix):
    model = Pi05Model(preset("tiny"), seed=0).eval()
    cache = KVCache.for_model(model.config, num_pages=64, page_size=16)
    prefix = make_prefix(model.config, seed=0)
    assert prefix.num_tokens % cache.page_size  # the last prefix page is partial
    table = model.prefill(prefix, cache)
    before = actions(model, table, cache)
    fork = cache.fork(table, "dialogue")
    prompt = ByteTokenizer().encode("User: hi\nRobot:", bos=False)
    assert cache.reserve(fork, len(prompt))
    model.extend(fork, prompt, cache)
    assert fork.pages[-2] != table.pages[-1]   # the shared partial page was copied
    cache.free(table)
    again = model.prefill(make_prefix(model.config, seed=0), cache)
    torch.testing.assert_close(actions(model, again, cache), before)
    cache.free(again)
    cache.free(fork)
    cache.pool.check_whole()


@pytest.mark.parametrize("name", ["tiny", "small", "pi05"])
def test_presets_have_the_documented_sizes(name):
    with torch.device("meta"):
        model = Pi05Model(preset(name))
    params = sum(p.numel() for p in model.parameters())
    bounds = {"tiny": (1e4, 1e6), "small": (1e7, 6e7), "pi05": (3.2e9, 3.8e9)}[name]
    assert bounds[0] < params < bounds[1], params
