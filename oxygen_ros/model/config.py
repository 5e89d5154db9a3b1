"""One configuration dataclass for every model size, and the named presets."""

from dataclasses import dataclass, field, replace

PREFIX_ATTENTION = ("bidirectional", "causal_prompt")
# how the state enters the prompt: "padded" to state_dim (lerobot's processor, the demo
# model), the robot's own values ("robot": openpi tokenizes before it pads), or "none"
# (openpi's discrete_state_input=False, as pi05_libero: the task and a newline)
STATE_PROMPTS = ("padded", "robot", "none")


@dataclass(frozen=True)
class VisionConfig:
    """SigLIP-style ViT: square images cut into patch_size patches."""
    image_size: int
    patch_size: int
    width: int
    depth: int
    mlp_dim: int
    num_heads: int

    @property
    def num_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2


@dataclass(frozen=True)
class GemmaConfig:
    """One Gemma decoder stack (the VLM's language model, or the action expert)."""
    width: int
    depth: int
    mlp_dim: int
    num_heads: int
    num_kv_heads: int
    head_dim: int


@dataclass(frozen=True)
class ModelConfig:
    vision: VisionConfig
    vlm: GemmaConfig
    expert: GemmaConfig
    vocab_size: int
    num_cameras: int
    action_horizon: int        # H: action tokens per chunk
    action_dim: int            # values per action step (padded robot action)
    num_denoise_steps: int     # Euler steps from t = 1 to t = 0
    max_prompt_tokens: int     # prompt budget (π0.5 pads to 200; we never store padding)
    state_dim: int = 32        # state values discretized into the prompt ("padded")
    state_prompt: str = "padded"   # how the state enters the prompt (STATE_PROMPTS)
    prefix_attention: str = "bidirectional"   # π0.5; "causal_prompt" is the OxyGen variant
    rope_max_wavelength: float = 10_000.0
    time_min_period: float = 4e-3
    time_max_period: float = 4.0
    norm_eps: float = 1e-6
    tokenizer: str = "bytes"   # "bytes" (presets) or "paligemma" (SentencePiece file)
    name: str = field(default="custom", compare=False)

    def __post_init__(self):
        if self.prefix_attention not in PREFIX_ATTENTION:
            raise ValueError(f"prefix_attention must be one of {PREFIX_ATTENTION}, "
                             f"not {self.prefix_attention!r}")
        if self.state_prompt not in STATE_PROMPTS:
            raise ValueError(f"state_prompt must be one of {STATE_PROMPTS}, "
                             f"not {self.state_prompt!r}")
        shared = ("depth", "num_heads", "num_kv_heads", "head_dim")
        for key in shared:
            if getattr(self.vlm, key) != getattr(self.expert, key):
                raise ValueError(f"mixture of transformers needs equal {key} in the VLM and the "
                                 f"action expert ({getattr(self.vlm, key)} != "
                                 f"{getattr(self.expert, key)})")
        if self.vlm.num_heads % self.vlm.num_kv_heads:
            raise ValueError("num_heads must be a multiple of num_kv_heads")

    @property
    def num_layers(self) -> int:
        return self.vlm.depth

    @property
    def image_tokens_per_camera(self) -> int:
        return self.vision.num_patches

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        return 2 * self.num_layers * self.vlm.num_kv_heads * self.vlm.head_dim * dtype_bytes

    def with_(self, **changes) -> "ModelConfig":
        return replace(self, **changes)


PRESETS = {
    # The real π0.5 dimensions (PaliGemma 3B: SigLIP So400m/14 + Gemma 2B, Gemma 300M expert).
    "pi05": ModelConfig(
        vision=VisionConfig(image_size=224, patch_size=14, width=1152, depth=27, mlp_dim=4304,
                            num_heads=16),
        vlm=GemmaConfig(width=2048, depth=18, mlp_dim=16_384, num_heads=8, num_kv_heads=1,
                        head_dim=256),
        expert=GemmaConfig(width=1024, depth=18, mlp_dim=4096, num_heads=8, num_kv_heads=1,
                           head_dim=256),
        vocab_size=257_152, num_cameras=3, action_horizon=50, action_dim=32,
        num_denoise_steps=10, max_prompt_tokens=200, tokenizer="paligemma", name="pi05"),
    # The CPU default: 3 cameras x 64 patches + prompt = a few hundred prefix tokens,
    # ~25 M parameters. Sized for the real-time contract on two cores: a chunk from a new
    # observation (~0.25 s on one torch thread) must leave room for its successor within
    # the 1 s plan of 50 steps at 50 Hz (README: "The real-time contract").
    "small": ModelConfig(
        vision=VisionConfig(image_size=112, patch_size=14, width=384, depth=4, mlp_dim=1536,
                            num_heads=6),
        vlm=GemmaConfig(width=512, depth=4, mlp_dim=1024, num_heads=8, num_kv_heads=1,
                        head_dim=64),
        expert=GemmaConfig(width=256, depth=4, mlp_dim=512, num_heads=8, num_kv_heads=1,
                           head_dim=64),
        vocab_size=260, num_cameras=3, action_horizon=50, action_dim=32, num_denoise_steps=10,
        max_prompt_tokens=200, name="small"),
    # The trained demo (oxygen-ros train-demo): small enough to train on two cores in half
    # an hour and to leave the real-time contract room (a chunk well under 25 % of 1 s);
    # byte tokenizer, 14 joint actions, 84 px cameras (6 x 6 patches each).
    "demo": ModelConfig(
        vision=VisionConfig(image_size=84, patch_size=14, width=128, depth=3, mlp_dim=512,
                            num_heads=4),
        vlm=GemmaConfig(width=192, depth=4, mlp_dim=768, num_heads=4, num_kv_heads=1,
                        head_dim=64),
        expert=GemmaConfig(width=128, depth=4, mlp_dim=512, num_heads=4, num_kv_heads=1,
                           head_dim=64),
        vocab_size=260, num_cameras=3, action_horizon=50, action_dim=14, num_denoise_steps=10,
        max_prompt_tokens=200, state_dim=14, name="demo"),
    # Unit tests: milliseconds per call. Grouped-query attention (4 heads, 2 kv heads)
    # so the kernels' head grouping is exercised.
    "tiny": ModelConfig(
        vision=VisionConfig(image_size=28, patch_size=14, width=32, depth=1, mlp_dim=64,
                            num_heads=2),
        vlm=GemmaConfig(width=64, depth=2, mlp_dim=128, num_heads=4, num_kv_heads=2,
                        head_dim=16),
        expert=GemmaConfig(width=32, depth=2, mlp_dim=64, num_heads=4, num_kv_heads=2,
                           head_dim=16),
        vocab_size=260, num_cameras=2, action_horizon=4, action_dim=6, num_denoise_steps=3,
        max_prompt_tokens=64, state_dim=6, name="tiny"),
}


def preset(name: str) -> ModelConfig:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r} (choose from {', '.join(PRESETS)})") from None
