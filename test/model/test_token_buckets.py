"""Passes over new tokens are padded to a multiple of TOKEN_BUCKET, so prompts of nearby
lengths run the same matmul shapes (oneDNN builds a kernel per new shape), and the padding
is neither stored nor seen."""

import torch
from torch.profiler import profile

from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.model.prefill import TOKEN_BUCKET, padded_tokens

MATMULS = ("aten::mm", "aten::addmm", "aten::bmm")


def matmul_shapes(call) -> set:
    with profile(record_shapes=True) as prof:
        call()
    return {(e.name, str(e.input_shapes)) for e in prof.events() if e.name in MATMULS}


def test_padded_tokens_rounds_up_to_the_bucket():
    assert [padded_tokens(n) for n in (1, TOKEN_BUCKET, TOKEN_BUCKET + 1)] == \
        [TOKEN_BUCKET, TOKEN_BUCKET, 2 * TOKEN_BUCKET]


def test_prefixes_of_different_lengths_in_one_bucket_run_the_same_matmul_shapes(
        tiny_model, make_prefix):
    config = tiny_model.config
    short = make_prefix(config, seed=0, instruction="wave")
    longer = make_prefix(config, seed=1, instruction="waves", state_seed=0)
    assert short.num_tokens != longer.num_tokens
    assert padded_tokens(short.num_tokens) == padded_tokens(longer.num_tokens)
    cache = KVCache.for_model(config, num_pages=64, page_size=16)
    shapes = [matmul_shapes(lambda p=p: tiny_model.prefill(p, cache, reuse=False))
              for p in (short, longer)]
    assert shapes[0] and shapes[0] == shapes[1]


def test_a_padded_prompt_is_not_stored_and_changes_no_logit(tiny_model, make_prefix):
    config = tiny_model.config
    cache = KVCache.for_model(config, num_pages=64, page_size=16)
    table = tiny_model.prefill(make_prefix(config), cache)
    prompt = list(b"what do you see?")[:5]
    assert padded_tokens(len(prompt)) > len(prompt)
    forks = [cache.fork(table, "dialogue") for _ in range(2)]
    for fork in forks:
        cache.reserve(fork, len(prompt) + 1)
    start = table.length
    beyond = torch.tensor(forks[0].slots(start + len(prompt), 1, cache.page_size))
    cache.pool.k.flatten(1, 2)[:, beyond] = 7.0          # a slot the padding would reach
    logits = tiny_model.extend(forks[0], prompt, cache)
    assert forks[0].length == start + len(prompt)
    assert bool((cache.pool.k.flatten(1, 2)[:, beyond] == 7.0).all())
    # the same prompt one token at a time: no padding anywhere
    for token in prompt:
        stepwise = tiny_model.decode([forks[1]], [token], cache)[0]
    torch.testing.assert_close(logits, stepwise, atol=1e-5, rtol=1e-5)
