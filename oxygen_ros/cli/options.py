"""Options several oxygen-ros verbs share, each defined once, and the DDS environment of
the verbs that talk ROS."""

import argparse
import os
import sys
from pathlib import Path

from oxygen_ros.resources import share_path


def add_threads(command: argparse.ArgumentParser) -> None:
    command.add_argument("--threads", type=int, default=0,
                         help="torch CPU threads (default 0: all cores but one, as the "
                              "inference node)")


def add_json(command: argparse.ArgumentParser, plot: bool = False, instead: bool = False) -> None:
    what = ("write the result's JSON to this file instead of stdout" if instead
            else "write the numbers to this JSON file")
    command.add_argument("--json", help=what + (" (and a PNG plot beside it)" if plot else ""))


def add_node_options(command: argparse.ArgumentParser, config: str = "humanoid.yaml") -> None:
    """The parameters of the nodes a verb starts: a YAML and overrides on top."""
    command.add_argument("--config", default=str(share_path("config", config)),
                         help=f"parameters YAML (default: the package's {config})")
    command.add_argument("--preset", help="model preset for the inference node")
    command.add_argument("--dry-run", dest="dry_run", action="store_true", default=None,
                         help="publish no commands or trajectories")
    command.add_argument("--no-dry-run", dest="dry_run", action="store_false")
    command.add_argument("-p", "--param", action="append", metavar="NODE:NAME:=VALUE",
                         help="override a parameter, e.g. inference:tokens_per_frame:=8")


def node_overrides(args: argparse.Namespace) -> list[str]:
    overrides = []
    if args.preset:
        overrides.append(f"inference:preset:={args.preset}")
    if args.dry_run is not None:
        overrides.append(f"inference:dry_run:={str(args.dry_run).lower()}")
    return overrides + list(args.param or [])


def ros_args(config: str, overrides: list[str]) -> list[str]:
    args = ["oxygen-ros", "--ros-args", "--params-file", config]
    for item in overrides:
        args += ["-p", item]
    return args


def ros_environment() -> None:
    """DDS traffic stays on this machine, over the package's Fast DDS profile (loopback,
    a shared-memory segment large enough for raw camera frames), unless the user set
    ROS_AUTOMATIC_DISCOVERY_RANGE or a Fast DDS profile of their own."""
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    if os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST":
        profile = share_path("config", "fastdds_localhost.xml")
        if profile.exists():
            os.environ.setdefault("FASTDDS_DEFAULT_PROFILES_FILE", str(profile))


def usage_error(command: str, message: str) -> int:
    print(f"oxygen-ros {command}: {message}", file=sys.stderr)
    return 2


def at_least(command: str, checks) -> int:
    """0, or the usage error of the first (option, value, least) whose value is below."""
    for option, value, least in checks:
        if value < least:
            return usage_error(command, f"{option} must be at least {least}, not {value}")
    return 0


def json_directory_error(command: str, path) -> int:
    if path and not Path(path).resolve().parent.is_dir():
        return usage_error(command, f"--json {path}: no such directory")
    return 0
