"""The Gemma / SigLIP pieces compute the formulas they name (the dense reference shares
them, so they are checked here against the math itself)."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from oxygen_ros.model.config import GemmaConfig, ModelConfig, preset
from oxygen_ros.model.gemma import AdaRMSNorm, GemmaMLP, RMSNorm, rope, rope_tables
from oxygen_ros.model.pi05 import Pi05Model
from oxygen_ros.model.prefix import build_prefix
from oxygen_ros.model.prompt import discretize_state, pi05_prompt, pi05_prompt_tokens
from oxygen_ros.model.sampling import sample
from oxygen_ros.model.tokenizer import ByteTokenizer, StreamDecoder

G = torch.Generator().manual_seed(0)


def test_rms_norm_scales_by_one_plus_weight():
    norm = RMSNorm(6)
    norm.weight.data = torch.randn(6, generator=G)
    x = torch.randn(3, 6, generator=G)
    expected = x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + 1e-6) * (1 + norm.weight)
    torch.testing.assert_close(norm(x)[0], expected)


def test_ada_rms_norm_modulates_with_scale_shift_and_returns_the_gate():
    norm = AdaRMSNorm(4, cond_dim=3)
    x, cond = torch.randn(2, 5, 4, generator=G), torch.randn(2, 3, generator=G)
    out, gate = norm(x, cond)
    scale, shift, expected_gate = (cond @ norm.dense.weight.T + norm.dense.bias).chunk(3, -1)
    normed = x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(out, normed * (1 + scale[:, None]) + shift[:, None])
    torch.testing.assert_close(gate, expected_gate[:, None])


def test_geglu_mlp():
    mlp = GemmaMLP(4, 8)
    x = torch.randn(3, 4, generator=G)
    gelu = 0.5 * (x @ mlp.gate_proj.weight.T) * (1 + torch.tanh(math.sqrt(2 / math.pi) * (
        (x @ mlp.gate_proj.weight.T) + 0.044715 * (x @ mlp.gate_proj.weight.T) ** 3)))
    torch.testing.assert_close(mlp(x), (gelu * (x @ mlp.up_proj.weight.T)) @ mlp.down_proj.weight.T)


def test_rope_rotates_pairs_and_depends_only_on_relative_position():
    q, k = torch.randn(1, 1, 1, 8, generator=G), torch.randn(1, 1, 1, 8, generator=G)

    def at(x, position):
        return rope(x, rope_tables(torch.tensor([[position]]), 8, 10_000.0, torch.float32))

    def score(pq, pk):
        return (at(q, pq) * at(k, pk)).sum()

    torch.testing.assert_close(score(3, 1), score(10, 8))
    torch.testing.assert_close(at(q, 0), q)
    rotated = at(q, 1)
    # the first pair rotates by exactly one radian (wavelength exponent 0)
    x1, x2 = q[..., 0], q[..., 4]
    torch.testing.assert_close(rotated[..., 0], x1 * math.cos(1) - x2 * math.sin(1))
    torch.testing.assert_close(rotated.norm(), q.norm())


def test_time_condition_uses_sinusoids_between_the_min_and_max_period():
    model = Pi05Model(preset("tiny"))
    width = model.config.expert.width
    t = torch.tensor([0.3])
    fraction = np.linspace(0, 1, width // 2)
    period = 4e-3 * (4.0 / 4e-3) ** fraction
    emb = np.concatenate([np.sin(0.3 / period * 2 * np.pi), np.cos(0.3 / period * 2 * np.pi)])
    expected = F.silu(model.time_mlp_out(F.silu(model.time_mlp_in(
        torch.tensor(emb, dtype=torch.float32)[None]))))
    torch.testing.assert_close(model.time_condition(t), expected, atol=1e-5, rtol=0)


def test_text_embeddings_are_scaled_by_sqrt_width_and_the_head_is_tied():
    model = Pi05Model(preset("tiny"))
    lm = model.language_model
    torch.testing.assert_close(lm.embed(torch.tensor([5])), lm.embed_tokens.weight[5:6] * 8.0)
    hidden = torch.randn(2, 64, generator=G)
    torch.testing.assert_close(lm.logits(hidden), lm.norm(hidden)[0] @ lm.embed_tokens.weight.T)


def test_mixture_of_transformers_needs_matching_attention_shapes():
    tiny = preset("tiny")
    with pytest.raises(ValueError, match="equal num_kv_heads"):
        tiny.with_(expert=GemmaConfig(32, 2, 64, num_heads=4, num_kv_heads=1, head_dim=16))
    with pytest.raises(ValueError, match="prefix_attention"):
        tiny.with_(prefix_attention="sideways")
    with pytest.raises(ValueError, match="state_prompt must be one of"):
        tiny.with_(state_prompt="sometimes")
    with pytest.raises(ValueError, match="unknown preset"):
        preset("huge")
    assert isinstance(tiny, ModelConfig)


def test_prompt_has_the_pi05_format_with_256_state_bins():
    prompt = pi05_prompt("pick_up the\ncup ", np.array([-1.0, 0.0, 0.999, 5.0, np.nan]), 6)
    assert prompt == "Task: pick up the cup, State: 0 128 255 255 128 128;\nAction: "
    assert discretize_state(np.linspace(-1, 1, 9), 9).tolist() == [0, 32, 64, 96, 128, 160, 192,
                                                                   224, 255]
    # below the range is bin -1, as openpi's and lerobot's np.digitize give it
    assert discretize_state(np.array([-1.5, -1.0, 1.0, 7.0]), None).tolist() == [-1, 0, 255, 255]


def test_the_state_enters_the_prompt_padded_as_the_robots_own_values_or_not_at_all():
    state = np.array([-1.0, 0.0, 1.0])
    assert pi05_prompt("cup", state, 5, "padded") == \
        "Task: cup, State: 0 128 255 128 128;\nAction: "
    assert pi05_prompt("cup", state, 5, "robot") == "Task: cup, State: 0 128 255;\nAction: "
    assert pi05_prompt("pick_up cup", state, 5, "none") == "pick up cup\n"
    tok = ByteTokenizer()
    # openpi encodes the task (with BOS), then the newline on its own
    tokens, cut = pi05_prompt_tokens(tok, "pick_up cup", state, 5, 64, "none")
    assert not cut and tokens == tok.encode("pick up cup") + tok.encode("\n", bos=False)
    tokens, cut = pi05_prompt_tokens(tok, "pick up the cup", state, 5, 8, "none")
    assert cut and tokens == tok.encode("pick u") + tok.encode("\n", bos=False)


def test_a_long_instruction_loses_its_end_not_the_state_or_the_cue_to_act():
    tok, state = ByteTokenizer(), np.linspace(-1, 1, 6)
    short, cut = pi05_prompt_tokens(tok, "stack", state, 6, 64)
    assert not cut and short == tok.encode(pi05_prompt("stack", state, 6))
    tokens, cut = pi05_prompt_tokens(tok, "stack the blocks " * 5, state, 6, 64)
    assert cut and len(tokens) == 64
    assert tok.decode(tokens) == "Task: stack the blocks s, State: 0 51 102 153 204 255;\nAction: "
    # a budget even the state and cue overrun: the prompt's end goes, as openpi cuts it
    tokens, cut = pi05_prompt_tokens(tok, "stack", state, 6, 20)
    assert cut and tok.decode(tokens) == "Task: , State: 0 51"     # and the BOS


def test_byte_tokenizer_round_trips_and_streams_whole_characters():
    tok = ByteTokenizer()
    ids = tok.encode("grüß 🤖")
    assert ids[0] == tok.bos_id and tok.decode(ids) == "grüß 🤖"
    for stream in (tok.stream(), StreamDecoder(tok)):
        pieces = [stream.push(i) for i in ids[1:]] + [stream.flush()]
        assert "".join(pieces) == "grüß 🤖" and "\ufffd" not in "".join(pieces)
        assert pieces[-5:-1] == ["", "", "", "🤖"]  # the 4-byte emoji arrives whole
    stream = tok.stream()   # invalid bytes stream out at once instead of blocking the text
    assert [stream.push(b) for b in (0xFF, ord("a"), 0xC3)] == ["\ufffd", "a", ""]
    assert stream.flush() == "\ufffd"


def test_sampling_greedy_temperature_and_top_p():
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.9]])
    assert sample(logits).tolist() == [1]
    g = torch.Generator().manual_seed(0)
    draws = [int(sample(logits, temperature=1.0, top_p=0.5, generator=g)) for _ in range(200)]
    assert set(draws) == {1, 3}                # top-p keeps the two big ones only
    draws = [int(sample(logits, temperature=1.0, generator=g)) for _ in range(400)]
    assert set(draws) == {0, 1, 2, 3}


def test_prefix_masks_missing_cameras_and_rejects_bad_images(make_prefix):
    config = preset("tiny")
    full = make_prefix(config)
    one = make_prefix(config, cameras=["left_wrist"])
    assert one.cameras == ("left_wrist",) and one.num_tokens == full.num_tokens - 4
    rgb = np.zeros((28, 28, 3), np.uint8)
    with pytest.raises(ValueError, match="unknown cameras"):
        build_prefix(config, ["base"], {"top": rgb}, [1])
    with pytest.raises(ValueError, match="at least one camera"):
        build_prefix(config, ["base"], {}, [1])
    with pytest.raises(ValueError, match=r"expected uint8 \[H, W, 3\]"):
        build_prefix(config, ["base"], {"base": rgb[..., 0]}, [1])
    big = build_prefix(config, ["base"], {"base": np.zeros((480, 640, 3), np.uint8)}, [1] * 500)
    assert big.images.shape == (1, 3, 28, 28) and len(big.tokens) == config.max_prompt_tokens
