"""State normalization in, action unnormalization out, with a checkpoint's statistics.

openpi: assets/<asset_id>/norm_stats.json, {"norm_stats": {"state": {...}, "actions":
{...}}} with mean/std and q01/q99; π0.5 uses the quantiles:
    normalize x -> (x - q01) / (q99 - q01 + 1e-6) * 2 - 1
lerobot: the processor's normalizer safetensors, keys "observation.state.q01",
"action.q99", ...; quantiles with the epsilon only where q99 == q01:
    normalize x -> 2 (x - q01) / (q99 - q01) - 1
Both unnormalize with the inverse; dimensions beyond the statistics pass through.
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file

OPENPI_EPS = 1e-6
LEROBOT_EPS = 1e-8


@dataclass(frozen=True)
class Stats:
    low: np.ndarray     # q01 (quantiles) or mean
    high: np.ndarray    # q99 (quantiles) or std
    mode: str           # "quantile" or "mean_std"
    style: str          # "openpi" or "lerobot" (where the epsilon goes)

    def normalize(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        n = min(len(x), len(self.low))
        out = x.copy()
        low, high = self.low[:n], self.high[:n]
        if self.mode == "mean_std":
            out[:n] = (x[:n] - low) / (high + OPENPI_EPS)
        elif self.style == "openpi":
            out[:n] = (x[:n] - low) / (high - low + OPENPI_EPS) * 2.0 - 1.0
        else:
            span = high - low
            out[:n] = 2.0 * (x[:n] - low) / np.where(span == 0, LEROBOT_EPS, span) - 1.0
        return out

    def unnormalize(self, x: np.ndarray) -> np.ndarray:
        """x [..., D] normalized -> robot units (first len(stats) dims)."""
        x = np.asarray(x, dtype=np.float64)
        n = min(x.shape[-1], len(self.low))
        out = x.copy()
        low, high = self.low[:n], self.high[:n]
        if self.mode == "mean_std":
            out[..., :n] = x[..., :n] * (high + OPENPI_EPS) + low
        elif self.style == "openpi":
            out[..., :n] = (x[..., :n] + 1.0) / 2.0 * (high - low + OPENPI_EPS) + low
        else:
            span = high - low
            out[..., :n] = (x[..., :n] + 1.0) * np.where(span == 0, LEROBOT_EPS, span) / 2.0 + low
        return out


class MissingStatistics(ValueError):
    """A checkpoint that normalizes but does not carry its statistics."""


@dataclass(frozen=True)
class Normalization:
    state: Optional[Stats] = None
    actions: Optional[Stats] = None
    source: str = "none (identity)"

    def normalize_state(self, state: np.ndarray) -> np.ndarray:
        return state if self.state is None else self.state.normalize(state)

    def unnormalize_actions(self, actions: np.ndarray) -> np.ndarray:
        if self.actions is None:
            return actions
        return self.actions.unnormalize(actions).astype(np.float32)


def _stats(entry: dict, mode: str, style: str, what: str) -> Stats:
    keys = ("q01", "q99") if mode == "quantile" else ("mean", "std")
    if any(entry.get(k) is None for k in keys):
        raise ValueError(f"{what}: {mode} normalization needs {keys}, found {sorted(entry)}")
    return Stats(np.asarray(entry[keys[0]], np.float64), np.asarray(entry[keys[1]], np.float64),
                 mode, style)


def load_openpi(checkpoint_dir: Path, asset_id: str = "", mode: str = "quantile") -> Normalization:
    assets = Path(checkpoint_dir) / "assets"
    files = sorted(assets.glob("*/norm_stats.json")) + sorted(assets.glob("norm_stats.json"))
    if asset_id:
        files = [f for f in files if f.parent.name == asset_id]
    if not files:
        raise MissingStatistics(
            f"{assets}/{asset_id or '<asset_id>'}/norm_stats.json: no normalization statistics; "
            "openpi checkpoints ship them (actions would come out in normalized units) — set "
            "normalization: identity only if the model was trained without")
    if len(files) > 1:
        raise ValueError(f"{assets}: several normalization stats "
                         f"{[f.parent.name for f in files]}; choose one with asset_id")
    data = json.loads(files[0].read_text()).get("norm_stats", {})
    state, actions = (_stats(data[key], mode, "openpi", f"{files[0]} {key}") if key in data
                      else None for key in ("state", "actions"))
    return Normalization(state, actions, f"openpi {files[0].relative_to(checkpoint_dir)} ({mode})")


def lerobot_expects_statistics(raw_config: dict) -> bool:
    """Whether a lerobot config normalizes state or actions (pi05's default: quantiles)."""
    mapping = raw_config.get("normalization_mapping") or {"STATE": "QUANTILES",
                                                          "ACTION": "QUANTILES"}
    return any(str(mapping.get(key, "QUANTILES")).upper().rpartition(".")[2] != "IDENTITY"
               for key in ("STATE", "ACTION"))


def load_lerobot(checkpoint_dir: Path, mode: str = "quantile",
                 raw_config: Optional[dict] = None) -> Normalization:
    stats: dict[str, dict] = {}
    files = sorted(Path(checkpoint_dir).glob("*normalizer_processor*.safetensors"))
    for path in files:
        try:
            tensors = load_file(str(path))
        except (SafetensorError, OSError) as error:
            raise ValueError(f"{path}: unreadable normalization statistics ({error})") from None
        for key, value in tensors.items():
            feature, _, stat = key.rpartition(".")
            stats.setdefault(feature, {}).setdefault(stat, value)
    if not stats:
        if lerobot_expects_statistics(raw_config or {}):
            raise MissingStatistics(
                f"{checkpoint_dir}: config.json normalizes state and actions but no "
                "*normalizer_processor*.safetensors (lerobot's policy_preprocessor_step_*_"
                "normalizer_processor / policy_postprocessor_step_*_unnormalizer_processor) "
                "is there — actions would come out in normalized units; copy them from the "
                "training run, or set normalization: identity if the model needs none")
        return Normalization()
    return Normalization(
        _stats(stats["observation.state"], mode, "lerobot", "observation.state")
        if "observation.state" in stats else None,
        _stats(stats["action"], mode, "lerobot", "action") if "action" in stats else None,
        f"lerobot {', '.join(p.name for p in files)} ({mode})")
