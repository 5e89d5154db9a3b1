"""The paged model computes what a dense, contiguous-cache π0.5 computes."""

import dense_reference as dense
import pytest
import torch

from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.model.config import preset
from oxygen_ros.model.pi05 import Pi05Model
from oxygen_ros.model.tokenizer import ByteTokenizer

TOKENIZER = ByteTokenizer()
REQUEST = TOKENIZER.encode("User: what do you see?\nRobot:", bos=False)


def paged_greedy(model, cache, table, prompt, count):
    fork = cache.fork(table, "dialogue")
    assert cache.reserve(fork, len(prompt))
    logits = model.extend(fork, prompt, cache)
    out = [int(logits.argmax())]
    for _ in range(count - 1):
        assert cache.reserve(fork, 1)
        out.append(int(model.decode([fork], [out[-1]], cache)[0].argmax()))
    cache.free(fork)
    return out


@pytest.mark.parametrize("name, mode", [("tiny", "bidirectional"), ("tiny", "causal_prompt"),
                                        ("small", "bidirectional")])
def test_paged_actions_and_greedy_text_equal_the_dense_reference(name, mode, make_prefix):
    config = preset(name).with_(prefix_attention=mode)
    model = Pi05Model(config, seed=3).eval()
    prefix = make_prefix(config, seed=1)
    noise = torch.randn(config.action_horizon, config.action_dim,
                        generator=torch.Generator().manual_seed(7))

    cache = KVCache.for_model(config, num_pages=128, page_size=16)
    table = model.prefill(prefix, cache)
    actions = model.sample_actions([table], noise[None], cache)[0]
    text = paged_greedy(model, cache, table, REQUEST, 24)

    reference_cache = dense.prefill(model, prefix)
    expected_actions = dense.sample_actions(model, reference_cache.copy(), noise)
    expected_text = dense.greedy(model, reference_cache, REQUEST, 24)

    torch.testing.assert_close(actions, expected_actions, atol=1e-5, rtol=0)
    assert text == expected_text
    assert len(set(text)) > 5  # the model's text depends on its context, not one token


def test_actions_depend_on_the_observation_and_the_noise(tiny_model, make_prefix):
    config = tiny_model.config
    cache = KVCache.for_model(config, num_pages=64, page_size=16)
    noise = torch.randn(1, config.action_horizon, config.action_dim,
                        generator=torch.Generator().manual_seed(0))
    a = tiny_model.sample_actions([tiny_model.prefill(make_prefix(config, seed=0), cache)], noise, cache)
    b = tiny_model.sample_actions([tiny_model.prefill(make_prefix(config, seed=1), cache)], noise, cache)
    c = tiny_model.sample_actions([tiny_model.prefill(make_prefix(config, seed=0), cache)],
                                  noise + 1.0, cache)
    assert (a - b).abs().max() > 1e-3 and (a - c).abs().max() > 1e-3


def test_batched_decode_of_sequences_from_different_frames_equals_decoding_each_alone(
        tiny_model, make_prefix):
    config = tiny_model.config
    cache = KVCache.for_model(config, num_pages=256, page_size=16)
    prompts = [REQUEST, TOKENIZER.encode("User: hello\nRobot:", bos=False),
               TOKENIZER.encode("Summarize:", bos=False)]
    alone = []
    for seed, prompt in enumerate(prompts):
        table = tiny_model.prefill(make_prefix(config, seed=seed), cache)
        alone.append(paged_greedy(tiny_model, cache, table, prompt, 20))
        cache.free(table)

    forks, next_tokens = [], []
    for seed, prompt in enumerate(prompts):  # three frames, one request each
        table = tiny_model.prefill(make_prefix(config, seed=seed), cache)
        fork = cache.fork(table, "dialogue")
        cache.free(table)
        assert cache.reserve(fork, len(prompt))
        next_tokens.append(int(tiny_model.extend(fork, prompt, cache).argmax()))
        forks.append(fork)
    batched = [[t] for t in next_tokens]
    for _ in range(19):
        for fork in forks:
            assert cache.reserve(fork, 1)
        logits = tiny_model.decode(forks, [out[-1] for out in batched], cache)
        for out, row in zip(batched, logits):
            out.append(int(row.argmax()))
    assert batched == alone
    for fork in forks:
        cache.free(fork)
    cache.pool.check_whole()


def test_the_model_gives_the_same_actions_and_text_through_the_triton_kernels(
        tiny_model, make_prefix, monkeypatch):
    """The dispatch picks Triton on CUDA; here it is forced on (interpreted on the CPU) so
    the model-to-kernel wiring — pool views, action tier, lengths — is checked too."""
    from oxygen_ros.cache import attention

    config = tiny_model.config
    noise = torch.randn(1, config.action_horizon, config.action_dim,
                        generator=torch.Generator().manual_seed(5))

    def run():
        cache = KVCache.for_model(config, num_pages=64, page_size=16)
        table = tiny_model.prefill(make_prefix(config, seed=4), cache)
        return tiny_model.sample_actions([table], noise, cache), paged_greedy(
            tiny_model, cache, table, REQUEST, 8)

    reference_actions, reference_text = run()
    calls = []
    monkeypatch.setattr(attention, "_use_triton", lambda q, k: calls.append(1) or True)
    actions, text = run()
    assert calls, "the Triton path was not taken"
    torch.testing.assert_close(actions, reference_actions, atol=1e-5, rtol=0)
    assert text == reference_text
