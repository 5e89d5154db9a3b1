"""SigLIP-style vision transformer: patch embedding, learned positions, pre-norm blocks."""

import torch
import torch.nn.functional as F
from torch import nn

from oxygen_ros.model.config import VisionConfig


class SiglipEmbeddings(nn.Module):
    def __init__(self, config: VisionConfig):
        super().__init__()
        self.patch_embedding = nn.Conv2d(3, config.width, kernel_size=config.patch_size,
                                         stride=config.patch_size)
        self.position_embedding = nn.Embedding(config.num_patches, config.width)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        patches = self.patch_embedding(pixels).flatten(2).transpose(1, 2)  # [B, N, width]
        return patches + self.position_embedding.weight


class SiglipAttention(nn.Module):
    def __init__(self, config: VisionConfig):
        super().__init__()
        self.num_heads = config.num_heads
        self.q_proj = nn.Linear(config.width, config.width)
        self.k_proj = nn.Linear(config.width, config.width)
        self.v_proj = nn.Linear(config.width, config.width)
        self.out_proj = nn.Linear(config.width, config.width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, width = x.shape

        def heads(t):
            return t.view(batch, tokens, self.num_heads, -1).transpose(1, 2)

        out = F.scaled_dot_product_attention(heads(self.q_proj(x)), heads(self.k_proj(x)),
                                             heads(self.v_proj(x)))
        return self.out_proj(out.transpose(1, 2).reshape(batch, tokens, width))


class SiglipMLP(nn.Module):
    def __init__(self, config: VisionConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.width, config.mlp_dim)
        self.fc2 = nn.Linear(config.mlp_dim, config.width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class SiglipLayer(nn.Module):
    def __init__(self, config: VisionConfig):
        super().__init__()
        self.layer_norm1 = nn.LayerNorm(config.width, eps=1e-6)
        self.self_attn = SiglipAttention(config)
        self.layer_norm2 = nn.LayerNorm(config.width, eps=1e-6)
        self.mlp = SiglipMLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.layer_norm1(x))
        return x + self.mlp(self.layer_norm2(x))


class SiglipEncoder(nn.Module):
    def __init__(self, config: VisionConfig):
        super().__init__()
        self.layers = nn.ModuleList(SiglipLayer(config) for _ in range(config.depth))


class SiglipVisionModel(nn.Module):
    """Images [B, 3, S, S] in [-1, 1] -> patch features [B, num_patches, width]."""

    def __init__(self, config: VisionConfig):
        super().__init__()
        self.embeddings = SiglipEmbeddings(config)
        self.encoder = SiglipEncoder(config)
        self.post_layernorm = nn.LayerNorm(config.width, eps=1e-6)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        """(Mixed precision: the embeddings may be float32 while the encoder is not.)"""
        x = self.embeddings(pixels.to(self.embeddings.patch_embedding.weight.dtype))
        x = x.to(self.post_layernorm.weight.dtype)
        for layer in self.encoder.layers:
            x = layer(x)
        return self.post_layernorm(x)
