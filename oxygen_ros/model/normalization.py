"""State normalization in, action unnormalization out, with a checkpoint's statistics.

openpi: assets/<asset_id>/norm_stats.json, {"norm_stats": {"state": {...}, "actions":
{...}}} with mean/std and q01/q99; π0.5 uses the quantiles:
    normalize x -> (x - q01) / (q99 - q01 + 1e-6) * 2 - 1
lerobot: the processor's normalizer safetensors, keys "observation.state.q01",
"action.q99", ...; config.json's normalization_mapping says which statistics STATE and
ACTION use (π0.5: QUANTILES; also QUANTILE10, MIN_MAX, MEAN_STD, IDENTITY), the range
ones with the epsilon only where the range is empty:
    normalize x -> 2 (x - q01) / (q99 - q01) - 1          MEAN_STD: (x - mean) / (std + 1e-8)
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
STAT_KEYS = {"quantile": ("q01", "q99"), "quantile10": ("q10", "q90"), "min_max": ("min", "max"),
             "mean_std": ("mean", "std")}
LEROBOT_MODES = {"QUANTILES": "quantile", "QUANTILE10": "quantile10", "MIN_MAX": "min_max",
                 "MEAN_STD": "mean_std", "IDENTITY": None}
LEROBOT_DEFAULT_MAPPING = {"STATE": "QUANTILES", "ACTION": "QUANTILES"}   # lerobot's pi05


@dataclass(frozen=True)
class Stats:
    low: np.ndarray     # the range's low end (q01, q10, min) or mean
    high: np.ndarray    # the range's high end (q99, q90, max) or std
    mode: str           # a key of STAT_KEYS
    style: str          # "openpi" or "lerobot" (where the epsilon goes)

    def normalize(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        n = min(len(x), len(self.low))
        out = x.copy()
        low, high = self.low[:n], self.high[:n]
        if self.mode == "mean_std":
            out[:n] = (x[:n] - low) / (high + (OPENPI_EPS if self.style == "openpi"
                                               else LEROBOT_EPS))
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
            out[..., :n] = x[..., :n] * (high + (OPENPI_EPS if self.style == "openpi"
                                                 else 0.0)) + low
        elif self.style == "openpi":
            out[..., :n] = (x[..., :n] + 1.0) / 2.0 * (high - low + OPENPI_EPS) + low
        else:
            span = high - low
            out[..., :n] = (x[..., :n] + 1.0) * np.where(span == 0, LEROBOT_EPS, span) / 2.0 + low
        return out


def check_widths(normalization: "Normalization", state_dim: int, action_dim: int,
                 where: str) -> None:
    """The statistics fit the model: no more state dimensions than it reads, nor action
    dimensions than it outputs (a config.json whose max_state_dim or a checkpoint whose
    action projection disagrees with the statistics trained beside it)."""
    for stats, width, what, setting in (
            (normalization.state, state_dim, "state", "config.json max_state_dim"),
            (normalization.actions, action_dim, "actions", "action_in_proj's width")):
        if stats is not None and len(stats.low) > width:
            raise ValueError(f"{where}: {normalization.source}: statistics of "
                             f"{len(stats.low)} {what} dimensions, but the model takes "
                             f"{width} ({setting}): the checkpoint's files disagree")


def check_joints(normalization: "Normalization", joints: int, state_read: bool = True) -> None:
    """The robot's joints are the dimensions the statistics were computed over: as many
    state values (each normalized, then in the prompt; unless the model does not read the
    state: state_read false) and action dimensions (each command back in robot units).
    Else a ValueError: the extra values would pass unnormalized."""
    checked = (((normalization.state, "state"),) if state_read else ()) + (
        (normalization.actions, "action"),)
    for stats, what in checked:
        if stats is not None and len(stats.low) != joints:
            raise ValueError(
                f"{joints} joint_names, but the {what} statistics ({normalization.source}) "
                f"have {len(stats.low)} dimensions: list the joints the checkpoint was trained "
                f"on, in its order (a value without statistics would pass unnormalized)")


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


def _stats(entry, mode: str, style: str, what: str) -> Stats:
    keys = STAT_KEYS[mode]
    if not isinstance(entry, dict) or any(entry.get(k) is None for k in keys):
        found = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
        raise ValueError(f"{what}: {mode} normalization needs {keys}, found {found}")
    try:
        low, high = (np.asarray(entry[k], np.float64) for k in keys)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{what}: {keys} are not numbers ({error})") from None
    if low.ndim != 1 or low.shape != high.shape or not len(low):
        raise ValueError(f"{what}: {keys[0]} and {keys[1]} must be vectors of one length, "
                         f"not of shapes {list(low.shape)} and {list(high.shape)}")
    if not (np.isfinite(low).all() and np.isfinite(high).all()):
        raise ValueError(f"{what}: {keys} hold NaN or inf")
    bad = np.flatnonzero(high < 0 if mode == "mean_std" else high < low)
    if len(bad):
        rule = "std below 0" if mode == "mean_std" else f"{keys[0]} above {keys[1]}"
        raise ValueError(f"{what}: {rule} in dimensions {bad.tolist()} (swapped or corrupt "
                         "statistics: the robot would get mirrored values)")
    with np.errstate(over="ignore"):      # actions leave as float32
        huge = np.flatnonzero(~np.isfinite((np.abs(low) + np.abs(high)).astype(np.float32)))
    if len(huge):
        raise ValueError(f"{what}: {keys} in dimensions {huge.tolist()} span more than a float32 "
                         "holds (corrupt statistics: the actions would come out inf or NaN)")
    return Stats(low, high, mode, style)


def load_openpi(checkpoint_dir: Path, asset_id: str = "", mode: str = "quantile") -> Normalization:
    assets = Path(checkpoint_dir) / "assets"
    files = sorted(assets.glob("*/norm_stats.json")) + sorted(assets.glob("norm_stats.json"))
    if asset_id:
        ids = [f.parent.name for f in files if f.parent != assets]
        files = [f for f in files if f.parent.name == asset_id]
        if not files and ids:
            raise MissingStatistics(f"{assets}: no asset_id {asset_id!r}; its statistics are "
                                    f"{ids}")
    if not files:
        raise MissingStatistics(
            f"{assets}/{asset_id or '<asset_id>'}/norm_stats.json: no normalization statistics; "
            "openpi checkpoints ship them (actions would come out in normalized units) — set "
            "normalization: identity only if the model was trained without")
    if len(files) > 1:
        raise ValueError(f"{assets}: several normalization stats "
                         f"{[f.parent.name for f in files]}; choose one with asset_id")
    try:
        document = json.loads(files[0].read_text())
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"{files[0]}: unreadable normalization statistics ({error})") from None
    data = document.get("norm_stats") if isinstance(document, dict) else None
    if not isinstance(data, dict) or not {"state", "actions"} <= set(data):
        found = sorted(data) if isinstance(data, dict) else "no 'norm_stats' object"
        raise ValueError(f"{files[0]}: openpi statistics are {{\"norm_stats\": {{\"state\": ..., "
                         f"\"actions\": ...}}}}, found {found}")
    state, actions = (_stats(data[key], mode, "openpi", f"{files[0]} {key}")
                      for key in ("state", "actions"))
    return Normalization(state, actions, f"openpi {files[0].relative_to(checkpoint_dir)} ({mode})")


def lerobot_modes(raw_config: dict) -> dict[str, Optional[str]]:
    """The statistics lerobot's config.json has STATE and ACTION use (None: identity)."""
    mapping = raw_config.get("normalization_mapping") or LEROBOT_DEFAULT_MAPPING
    modes = {}
    for key in ("STATE", "ACTION"):
        name = str(mapping.get(key, LEROBOT_DEFAULT_MAPPING[key])).upper().rpartition(".")[2]
        if name not in LEROBOT_MODES:
            raise ValueError(f"config.json normalization_mapping {key}: {name!r} is not one of "
                             f"{sorted(LEROBOT_MODES)}")
        modes[key] = LEROBOT_MODES[name]
    return modes


def lerobot_expects_statistics(raw_config: dict) -> bool:
    """Whether a lerobot config normalizes state or actions (pi05's default: quantiles)."""
    return any(mode is not None for mode in lerobot_modes(raw_config).values())


def load_lerobot(checkpoint_dir: Path, raw_config: Optional[dict] = None) -> Normalization:
    modes = lerobot_modes(raw_config or {})
    stats: dict[str, dict] = {}
    read_from: dict[str, Path] = {}
    files = sorted(Path(checkpoint_dir).glob("*normalizer_processor*.safetensors"))
    for path in files:
        try:
            tensors = load_file(str(path))
        except (SafetensorError, OSError) as error:
            raise ValueError(f"{path}: unreadable normalization statistics ({error})") from None
        for key, value in tensors.items():
            feature, _, stat = key.rpartition(".")
            first = stats.setdefault(feature, {}).setdefault(stat, value)
            read_from.setdefault(key, path)
            if first is not value and (first.shape != value.shape
                                       or not np.array_equal(first, value, equal_nan=True)):
                raise ValueError(f"{read_from[key]} and {path} disagree on {key}: the "
                                 "preprocessor and postprocessor must hold the statistics "
                                 "of one training run")
    if not stats:
        if lerobot_expects_statistics(raw_config or {}):
            raise MissingStatistics(
                f"{checkpoint_dir}: config.json normalizes state and actions but no "
                "*normalizer_processor*.safetensors (lerobot's policy_preprocessor_step_*_"
                "normalizer_processor / policy_postprocessor_step_*_unnormalizer_processor) "
                "is there — actions would come out in normalized units; copy them from the "
                "training run, or set normalization: identity if the model needs none")
        return Normalization()
    names = ", ".join(str(p) for p in files)

    def feature(name: str, mode: Optional[str]) -> Optional[Stats]:
        if mode is None:
            return None
        if name not in stats:
            raise MissingStatistics(
                f"{names}: no statistics of {name}, which config.json normalizes ({mode}) — "
                "it would reach the robot in normalized units")
        return _stats(stats[name], mode, "lerobot", f"{names}: {name}")

    return Normalization(
        feature("observation.state", modes["STATE"]), feature("action", modes["ACTION"]),
        f"lerobot {names} (state {modes['STATE'] or 'identity'}, "
        f"actions {modes['ACTION'] or 'identity'})")
