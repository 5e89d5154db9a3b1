"""The launch file's decisions as plain functions (tested without launch_ros).

A parameter is the code's default unless the parameters YAML sets it. A launch argument
overrides it only when the user gives it (an empty default means "as the YAML says"). Without a
config_file, each preset starts from its own shipped YAML, so every preset the launch
file offers starts as shipped; a config_file that does not exist stops the start. The
command line (`oxygen-ros run`, `oxygen-ros demo`) makes the same decisions here."""

from pathlib import Path
from typing import Mapping

import yaml

PRESET_CONFIGS = {"small": "humanoid.yaml", "tiny": "humanoid_tiny.yaml",
                  "pi05": "humanoid_pi05.yaml", "demo": "humanoid_demo.yaml"}
DEFAULT_CONFIG = "humanoid.yaml"
OVERRIDABLE = ("preset", "checkpoint", "tokenizer", "dry_run", "autostart")
BOOLEANS = ("dry_run", "autostart")
TRUE, FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def config_file(arguments: Mapping[str, str], config_dir: Path) -> Path:
    """The parameters YAML: config_file if given, else the preset's own, else the default."""
    given = arguments.get("config_file", "")
    if given:
        if not Path(given).is_file():
            raise ValueError(f"config file {given} does not exist")
        return Path(given)
    preset = arguments.get("preset", "")
    if preset and preset not in PRESET_CONFIGS:
        raise ValueError(f"preset {preset!r} has no shipped config (choose from "
                         f"{', '.join(PRESET_CONFIGS)}, or give config_file)")
    return config_dir / PRESET_CONFIGS.get(preset, DEFAULT_CONFIG)


def inference_overrides(arguments: Mapping[str, str]) -> dict:
    """Parameters of the inference node the user set on the command line, typed."""
    overrides = {}
    for name in OVERRIDABLE:
        value = arguments.get(name, "")
        if value == "":
            continue
        if name in BOOLEANS:
            if value.lower() not in TRUE + FALSE:
                raise ValueError(f"{name}:={value!r} is not a boolean (true or false)")
            overrides[name] = value.lower() in TRUE
        else:
            overrides[name] = value
    return overrides


def on_node_exit(arguments: Mapping[str, str]) -> str:
    """What the launch does when a node process ends: 'respawn' it or 'shutdown' all."""
    respawn = arguments.get("respawn", "false").lower()
    if respawn not in TRUE + FALSE:
        raise ValueError(f"respawn:={respawn!r} is not a boolean (true or false)")
    return "respawn" if respawn in TRUE else "shutdown"


def inference_parameters(arguments: Mapping[str, str], config_dir: Path) -> dict:
    """What the inference node is given: its YAML's parameters, then the overrides (the
    code's defaults fill in the rest)."""
    document = yaml.safe_load(config_file(arguments, config_dir).read_text()) or {}
    section = (document.get("inference") or {}).get("ros__parameters") or {}
    return dict(section) | inference_overrides(arguments)
