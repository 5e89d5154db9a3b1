"""The dense training forward and the paged inference path are the same function: text
logits position by position and the flow velocity agree, with padding in the batch."""

import copy

import torch

from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.model import training


def pad(rows, value=0):
    width = max(len(r) for r in rows)
    tokens = torch.tensor([list(r) + [value] * (width - len(r)) for r in rows])
    valid = torch.tensor([[True] * len(r) + [False] * (width - len(r)) for r in rows])
    return tokens, valid


def test_training_forward_equals_the_paged_inference_path(tiny_model, make_prefix):
    model, config = tiny_model, tiny_model.config
    prefixes = [make_prefix(config, seed=0, instruction="pick"),
                make_prefix(config, seed=1, instruction="pick up the red cup, please")]
    texts = [[5, 6, 7, 8, 9], [11, 12, 13]]
    prompt, prompt_valid = pad([p.tokens.tolist() for p in prefixes])
    text, text_valid = pad(texts)
    horizon, dim = config.action_horizon, config.action_dim
    x_t = torch.randn(2, horizon, dim, generator=torch.Generator().manual_seed(0))
    t = torch.tensor([0.7, 0.3])
    batch = training.TrainingBatch(
        images=torch.stack([p.images for p in prefixes]), prompt=prompt,
        prompt_valid=prompt_valid, text=text, text_valid=text_valid, answer=text_valid,
        actions=torch.zeros(2, horizon, dim))
    with torch.no_grad():
        logits, velocity = training.forward(model, batch, x_t, t)
    for row, (prefix, tokens) in enumerate(zip(prefixes, texts)):
        cache = KVCache.for_model(config, num_pages=32, page_size=16)
        table = model.prefill(prefix, cache)
        expected_velocity = model.denoise([table], x_t[row:row + 1], t[row:row + 1], cache)
        torch.testing.assert_close(velocity[row], expected_velocity[0], atol=1e-4, rtol=1e-4)
        assert cache.reserve(table, len(tokens))
        for i, token in enumerate(tokens):     # the logits after each text token
            expected = model.extend(table, [token], cache)
            torch.testing.assert_close(logits[row, i], expected, atol=1e-4, rtol=1e-4)


def test_losses_are_finite_and_reach_every_trainable_part(tiny_model, make_prefix):
    model, config = tiny_model, tiny_model.config
    prefix = make_prefix(config, seed=0)
    prompt, prompt_valid = pad([prefix.tokens.tolist()])
    text, text_valid = pad([[5, 6, 7, 8]])
    answer = torch.tensor([[False, False, True, True]])
    batch = training.TrainingBatch(
        images=prefix.images[None], prompt=prompt, prompt_valid=prompt_valid, text=text,
        text_valid=text_valid, answer=answer,
        actions=torch.rand(1, config.action_horizon, config.action_dim))
    model.zero_grad()
    text_loss, action_loss, look_loss = training.losses(model, batch,
                                                        torch.Generator().manual_seed(0))
    assert float(look_loss) == 0.0        # nothing to look at
    (text_loss + action_loss).backward()
    assert torch.isfinite(text_loss) and torch.isfinite(action_loss)
    for part in (model.vision, model.projector, model.language_model, model.expert,
                 model.action_in_proj, model.time_mlp_in):
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in part.parameters()), part
    model.zero_grad()


def test_requests_packed_after_one_prefix_equal_each_request_alone(tiny_model, make_prefix):
    """Packing is how training sees several requests per frame: each must start at the
    prefix's end and see nothing of the others, as a fork of the shared prefix does."""
    model, config = tiny_model, tiny_model.config
    prefix = make_prefix(config, seed=3, instruction="pick up the cup")
    # lengths on both sides of request_rows' multiple of 16: two attention groups
    requests = [[5, 6, 7, 8, 9], [11, 12, 13], list(range(30, 50)), [21, 22, 23, 24]]
    prompt, prompt_valid = pad([prefix.tokens.tolist()])
    horizon, dim = config.action_horizon, config.action_dim
    x_t = torch.randn(1, horizon, dim, generator=torch.Generator().manual_seed(1))
    t = torch.tensor([0.4])

    def run(rows, segment=None):
        text, valid = pad(rows)
        batch = training.TrainingBatch(
            images=prefix.images[None].expand(len(rows), *prefix.images.shape),
            prompt=prompt.expand(len(rows), -1), prompt_valid=prompt_valid.expand(len(rows), -1),
            text=text, text_valid=valid, answer=valid, actions=torch.zeros(len(rows), horizon, dim),
            segment=segment)
        with torch.no_grad():
            return training.forward(model, batch, x_t.expand(len(rows), -1, -1),
                                    t.expand(len(rows)))

    packed = [token for request in requests for token in request]
    segment = torch.tensor([[i for i, r in enumerate(requests) for _ in r] + [len(requests)] * 2])
    logits, velocity = run([packed + [0, 0]], segment)
    alone, alone_velocity = run(requests)
    start = 0
    for row, request in enumerate(requests):
        torch.testing.assert_close(logits[0, start:start + len(request)],
                                   alone[row, :len(request)], atol=1e-5, rtol=1e-5)
        start += len(request)
    torch.testing.assert_close(velocity[0], alone_velocity[0], atol=1e-5, rtol=1e-5)
    # without the segments the later requests would see the earlier ones: not the same
    unsegmented, _ = run([packed])
    assert not torch.allclose(unsegmented[0, 5:8], alone[1, :3], atol=1e-3)
    groups = training.request_rows(segment, pad([packed + [0, 0]])[1])
    assert [g.index.shape for g in groups] == [(4, 16), (1, 32)]   # and the [0, 0] tail


def test_the_look_loss_teaches_the_first_head_to_attend_where_it_is_told(tiny_model, make_prefix):
    """The look share is a share (0..1, all of the prefix's valid tokens + the request's own
    = 1 when told the whole prefix and the request is one token), and a few steps of the
    look loss alone raise it on the chosen image tokens."""
    model = copy.deepcopy(tiny_model)
    config = model.config
    prefix = make_prefix(config, seed=4)
    prompt, prompt_valid = pad([prefix.tokens.tolist()])
    text, text_valid = pad([[5, 6, 7, 8]])
    n_prefix = prefix.images.shape[0] * (config.vision.image_size // config.vision.patch_size) ** 2 \
        + prompt.shape[1]
    chosen = torch.zeros(1, 4, n_prefix, dtype=torch.bool)
    chosen[0, 1:3, 2:4] = True                            # two image tokens, from positions 1, 2

    def batch(look):
        return training.TrainingBatch(
            images=prefix.images[None], prompt=prompt, prompt_valid=prompt_valid, text=text,
            text_valid=text_valid, answer=text_valid,
            actions=torch.zeros(1, config.action_horizon, config.action_dim), look=look)

    x_t, t = torch.zeros(1, config.action_horizon, config.action_dim), torch.tensor([0.5])
    with torch.no_grad():
        everything = torch.zeros(1, 4, n_prefix, dtype=torch.bool)
        everything[0, 0] = True
        share = training.forward(model, batch(everything), x_t, t)[2]
        # at most 1 up to float32 rounding (the random model's sharp attention leaves the
        # request's own token ~0 of it: 1.0000001 on an AVX2 CPU)
        assert 0 < float(share[0, 0]) <= 1 + 1e-6 and float(share[0, 1]) == 0  # 0: not told
        before = training.forward(model, batch(chosen), x_t, t)[2]
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(20):
        look_loss = training.losses(model, batch(chosen), torch.Generator().manual_seed(0))[2]
        optimizer.zero_grad()
        look_loss.backward()
        optimizer.step()
    with torch.no_grad():
        after = training.forward(model, batch(chosen), x_t, t)[2]
    assert float(after[0, 1:3].min()) > 0.5 > float(before[0, 1:3].max())
