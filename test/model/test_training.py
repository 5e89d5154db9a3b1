"""The dense training forward and the paged inference path are the same function: text
logits position by position and the flow velocity agree, with padding in the batch."""

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
    text_loss, action_loss = training.losses(model, batch, torch.Generator().manual_seed(0))
    (text_loss + action_loss).backward()
    assert torch.isfinite(text_loss) and torch.isfinite(action_loss)
    for part in (model.vision, model.projector, model.language_model, model.expert,
                 model.action_in_proj, model.time_mlp_in):
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in part.parameters()), part
    model.zero_grad()
