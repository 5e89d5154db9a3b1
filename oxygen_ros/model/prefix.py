"""Prefix: what one observation contributes to the KV cache — camera images and prompt tokens."""

import hashlib
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from oxygen_ros.model.config import ModelConfig


@dataclass(frozen=True)
class Prefix:
    """Image tokens of the present cameras, then the prompt tokens.

    Missing cameras contribute no tokens (π0.5 masks them out; leaving them out is the
    same computation), so token positions count only real tokens, as π0.5's do.
    """
    images: torch.Tensor          # [cameras, 3, S, S] float in [-1, 1]
    cameras: tuple[str, ...]      # names of the present cameras, in slot order
    tokens: torch.Tensor          # [T] int64 prompt token ids
    image_digest: bytes           # identifies the pixels (prefix-index key)
    tokens_per_image: int

    @property
    def num_image_tokens(self) -> int:
        return len(self.cameras) * self.tokens_per_image

    @property
    def num_tokens(self) -> int:
        return self.num_image_tokens + len(self.tokens)

    def causal(self, prefix_attention: str) -> torch.Tensor:
        """Per token: True if it is causal (sees only earlier tokens and bidirectional ones).

        π0.5: every prefix token is bidirectional. OxyGen variant: prompt tokens are causal
        after the images, so the image block's K/V do not depend on the prompt."""
        flags = torch.zeros(self.num_tokens, dtype=torch.bool)
        if prefix_attention == "causal_prompt":
            flags[self.num_image_tokens:] = True
        return flags

    def token_keys(self) -> np.ndarray:
        """Per-token content for prefix-index hashing: image tokens by index, prompt by id."""
        image_keys = -1 - np.arange(self.num_image_tokens, dtype=np.int64)
        return np.concatenate([image_keys, self.tokens.numpy().astype(np.int64)])


def image_pixels(image: np.ndarray, size: int) -> torch.Tensor:
    """uint8 [H, W, 3] RGB -> the vision tower's input [3, size, size] in [-1, 1]."""
    tensor = torch.from_numpy(image).permute(2, 0, 1).float() / 127.5 - 1.0
    if tensor.shape[1:] != (size, size):
        tensor = F.interpolate(tensor[None], size=(size, size), mode="bilinear",
                               align_corners=False, antialias=True)[0]
    return tensor


def build_prefix(config: ModelConfig, camera_order: Sequence[str],
                 images: Mapping[str, np.ndarray], tokens: Sequence[int]) -> Prefix:
    """images: name -> uint8 [H, W, 3] RGB (any size; resized to the model's). Cameras not
    in `camera_order` are an error; cameras in it but absent from `images` are masked."""
    unknown = set(images) - set(camera_order)
    if unknown:
        raise ValueError(f"unknown cameras {sorted(unknown)} "
                         f"(expected some of {list(camera_order)})")
    if not images:
        raise ValueError("an observation needs at least one camera image")
    if len(tokens) > config.max_prompt_tokens:
        tokens = list(tokens)[:config.max_prompt_tokens]
    present = [name for name in camera_order if name in images]
    size = config.vision.image_size
    digest = hashlib.blake2b(digest_size=16)
    pixels = []
    for name in present:
        image = np.ascontiguousarray(images[name])
        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
            raise ValueError(f"camera {name!r}: expected uint8 [H, W, 3], got "
                             f"{image.dtype} {list(image.shape)}")
        digest.update(name.encode() + b"\x00" + repr(image.shape).encode())
        digest.update(image.tobytes())
        pixels.append(image_pixels(image, size))
    return Prefix(torch.stack(pixels), tuple(present), torch.tensor(list(tokens), dtype=torch.long),
                  digest.digest(), config.image_tokens_per_camera)
