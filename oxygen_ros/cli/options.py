"""Options several oxygen-ros verbs share, each defined once, and the DDS environment of
the verbs that talk ROS."""

import argparse
import math
import os
import sys
from pathlib import Path
from typing import Sequence

from oxygen_ros.resources import share_path


class Parser(argparse.ArgumentParser):
    """argparse, each refusal one line on stderr (exit 2) instead of the usage block."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")

    def parse_args(self, args=None, namespace=None):
        """As argparse, but arguments no option takes are named with the verb they were
        given to (argparse names the top command), and an option spelling a node parameter
        says how to give it."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            verb = getattr(parsed, "command", None)
            prog = f"{self.prog} {verb}" if verb else self.prog
            self.exit(2, f"{prog}: unrecognized arguments: {' '.join(extras)}"
                         f"{_as_parameter(extras, parsed)} (see {prog} --help)\n")
        return parsed


def _as_parameter(extras: list[str], parsed: argparse.Namespace) -> str:
    """'; a node parameter is -p inference:checkpoint:=VALUE' for `--checkpoint` given to a
    verb that takes -p, else ''."""
    if not hasattr(parsed, "param"):
        return ""
    from oxygen_ros.ros.node_parameters import NODE_SPECS

    for extra in extras:
        name = extra.lstrip("-").split("=")[0].replace("-", "_")
        for node, specs in NODE_SPECS.items():
            if extra.startswith("--") and name in specs():
                return f"; a node parameter is -p {node}:{name}:=VALUE"
    return ""


def bounded(kind: type = int, least=None, above=None, most=None, below=None):
    """An argparse type: a finite number of `kind` (int or float) with least <= value,
    above < value, value <= most and value < below where given."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {'an integer' if kind is int else 'a number'}, not {text!r}") from None
        if kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite number, not {text}")
        for bound, holds, words in ((least, lambda b: value >= b, "at least"),
                                    (above, lambda b: value > b, "above"),
                                    (most, lambda b: value <= b, "at most"),
                                    (below, lambda b: value < b, "below")):
            if bound is not None and not holds(bound):
                raise argparse.ArgumentTypeError(f"must be {words} {_number(bound)}, not {text}")
        return value
    return parse


# a demo bag (162 000 frames at 3 cameras x 15 Hz) and a wait (replay's --delay,
# --wait-for-subscribers) up to an hour; times (a run's duration, a bag offset) up to ~31
# years, well inside int64 nanoseconds
LONGEST_BAG_S = 3600.0
LONGEST_WAIT_S = 3600.0
LONGEST_TIME_S = 1e9


def _number(bound) -> str:
    return str(int(bound)) if float(bound).is_integer() else f"{bound:g}"


def output_file(text: str) -> str:
    """An argparse type: a file path the verb can write at its end (missing folders are
    made then), checked before any work: not a folder, no file where a folder must be."""
    path = Path(text).expanduser()
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; give a file path")
    return _creatable(text, path)


def new_folder(text: str) -> str:
    """An argparse type: a folder the verb creates (a bag), checked before any work: not
    there yet, no file where a folder must be."""
    path = Path(text).expanduser()
    if path.exists():
        raise argparse.ArgumentTypeError(f"{text} exists; choose a new path")
    return _creatable(text, path)


def _creatable(text: str, path: Path) -> str:
    """`path`, if its nearest existing ancestor is a writable folder."""
    folder = next((p for p in path.absolute().parents if p.exists()), None)
    if folder is not None and not folder.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {folder} is a file, not a folder")
    if folder is not None and not os.access(folder, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text}: {folder} is not writable")
    return str(path)


def seed_option(command: argparse.ArgumentParser, help: str, default: int = 0,
                name: str = "--seed") -> None:
    command.add_argument(name, type=bounded(int, least=0, most=2**31 - 1), default=default,
                         help=help)


def add_threads(command: argparse.ArgumentParser) -> None:
    command.add_argument("--threads", type=bounded(int, least=0), default=0,
                         help="torch CPU threads (default 0: all cores but one, as the "
                              "inference node)")


def add_dtype(command: argparse.ArgumentParser, what: str = "the model's dtype",
              auto: str = "as the node's dtype") -> None:
    command.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"],
                         help=f"{what}: auto (default, {auto}), bfloat16 where the "
                              "device has bf16 matrix units, else float32; or float32, "
                              "bfloat16")


def add_json(command: argparse.ArgumentParser, plot: bool = False, instead: bool = False) -> None:
    what = ("write the result's JSON to this file instead of stdout" if instead
            else "write the numbers to this JSON file")
    command.add_argument("--json", type=output_file,
                         help=what + (" (and a PNG plot beside it)" if plot else ""))


def add_node_options(command: argparse.ArgumentParser, preset: str = "") -> None:
    """The parameters of the nodes a verb starts, chosen as the launch file chooses them
    (oxygen_ros.ros.launch_plan): a YAML, then the overrides given."""
    command.add_argument("--config", help="parameters YAML for both nodes; a path that does "
                                          "not exist stops the start (default: the preset's "
                                          "shipped YAML, as ros2 launch ... preset:=NAME "
                                          "picks it)")
    command.add_argument("--preset",
                         help="model preset of the inference node: small, tiny, pi05 or demo; "
                              "without --config it also picks the YAML (humanoid.yaml, "
                              "humanoid_tiny.yaml, humanoid_pi05.yaml, humanoid_demo.yaml; "
                              "default: " + (f"{preset}, or with --config the YAML's"
                                             if preset else "the YAML's, else small") + ")")
    command.set_defaults(default_preset=preset)
    command.add_argument("--dry-run", dest="dry_run", action="store_true", default=None,
                         help="publish no commands or trajectories")
    command.add_argument("--no-dry-run", dest="dry_run", action="store_false")
    command.add_argument("-p", "--param", action="append", metavar="NODE:NAME:=VALUE",
                         type=node_parameter,
                         help="override a parameter of camera_ingest or inference, e.g. "
                              "inference:tokens_per_frame:=8 (VALUE typed as rcl types it: "
                              "true, 8, 0.5, 1e-3, [1.0, 2.0], text; checked against "
                              "docs/parameters.md before the start)")


def node_parameter(text: str) -> tuple[str, str, object]:
    """An argparse type: NODE:NAME:=VALUE, a parameter of one of the nodes and a value it
    takes (config_check.parameter_value): (node, name, the value as the node takes it)."""
    import yaml

    from oxygen_ros.ros import config_check, rcl_yaml
    from oxygen_ros.ros.node_parameters import NODE_SPECS

    target, sep, value = text.partition(":=")
    node, colon, name = target.partition(":")
    if not (sep and colon and node and name):
        raise argparse.ArgumentTypeError(f"expected NODE:NAME:=VALUE, e.g. "
                                         f"inference:control_rate_hz:=60, not {text!r}")
    if not value.strip():
        raise argparse.ArgumentTypeError(f"{text}: a parameter without a value (rcl refuses "
                                         "it; write '' for an empty string)")
    # rcl reads the value as YAML, where '{' opens a mapping ('{node}/x' is no string)
    spec = NODE_SPECS[node]().get(name) if node in NODE_SPECS else None
    braces = ""
    if spec is not None and spec.type is str and value.strip().startswith("{") \
            and '"' not in value:
        braces = (f" (YAML reads a value starting with '{{' as a mapping: quote it, as "
                  f"{target}:='\"{value.strip()}\"')")
    try:
        typed = config_check.parameter_value(node, name, rcl_yaml.load(value))
    except yaml.YAMLError as error:
        raise argparse.ArgumentTypeError(f"{text}: {getattr(error, 'problem', error)}"
                                         f"{braces}") from None
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text}: {error}{braces}") from None
    return node, name, typed


def launch_arguments(args: argparse.Namespace, **defaults: str) -> dict[str, str]:
    """The launch file's arguments these options stand for (`defaults` where not given)."""
    given = {"config_file": args.config or "",
             "preset": args.preset or ("" if args.config else args.default_preset)}
    if args.dry_run is not None:
        given["dry_run"] = str(args.dry_run).lower()
    return defaults | {name: value for name, value in given.items() if value}


def chosen_config(arguments: dict[str, str]) -> Path:
    """The YAML the launch file would pick for these arguments, checked (a ValueError says
    what is wrong with the config file or preset)."""
    from oxygen_ros.ros import launch_plan

    return launch_plan.config_file(arguments, share_path("config"))


def node_ros_args(arguments: dict[str, str], config: Path, params,
                  robots: Sequence[str] = ()) -> list[str]:
    """--ros-args for both nodes as the launch file gives them: the YAML (chosen_config),
    then the overridable arguments (as -p, each of the type the checked YAML gives it), and
    with -p options, the YAML written again with every override in its node's section
    (launch_plan.with_overrides: a -p of another type than the file's value would not
    win). With `robots` (the demo's fleet), that YAML serves them, and a camera_ingest under
    each robot's namespace (launch_plan.namespaced_ingest of it), each checked against the
    inference node."""
    from oxygen_ros.ros import config_check, launch_plan

    launched = launch_plan.inference_overrides(arguments)
    given = param_overrides(params)
    ingests = {robot: f"/{robot}/camera_ingest" for robot in robots} or {"": "/camera_ingest"}
    launch_plan.unreached_sections(config, "camera_ingest", *ingests.values())
    launch_plan.unreached_sections(config, "inference", "/inference")
    overrides = {"inference": dict(launched)}
    for node, values in given.items():
        overrides.setdefault(node, {}).update(values)
    if robots:     # the demo's fleet: the server is started with these robots
        overrides["inference"]["robots"] = list(robots)
    planned = launch_plan.with_overrides(config, overrides)
    file = launch_plan.parameters_file(planned) if params or robots else str(config)
    for robot, ingest in ingests.items():
        plan = (launch_plan.namespaced_ingest(Path(file), robot, given.get("camera_ingest", {}))
                if robot else planned)
        nodes = {"camera_ingest": ingest, "inference": "/inference"}
        config_check.check_cameras(config, plan, nodes)
        config_check.check_together(config, plan, nodes)
    if not (params or robots):
        return ros_args(file, [
            f"inference:{name}:={str(value).lower() if isinstance(value, bool) else value}"
            for name, value in launched.items()])
    return ros_args(file, [])


def planned_inference(arguments: dict[str, str], config: Path, params) -> dict:
    """The parameters the inference node will run with: its defaults, then each section of
    the YAML that reaches /inference (`/inference:`, `/**:` too; later ones winning, as rcl
    applies them), the launch arguments and the -p options, each value checked."""
    from oxygen_ros.ros import config_check, launch_plan, rcl_yaml

    overrides = (launch_plan.inference_overrides(arguments)
                 | param_overrides(params).get("inference", {}))
    planned = launch_plan.with_overrides(config, {"inference": overrides})
    return config_check.planned_values(config, rcl_yaml.load(planned) or {}, "inference",
                                       "/inference")


def param_overrides(params) -> dict[str, dict]:
    """The -p overrides: node -> name -> value (a later -p of a name wins)."""
    overrides = {}
    for node, name, value in params or []:
        overrides.setdefault(node, {})[name] = value
    return overrides


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


def device_error(command: str, device: str) -> int:
    """0, or the usage error of a --device this torch cannot run on."""
    from oxygen_ros.model.devices import device_problem

    problem = device_problem(device)
    return usage_error(command, f"--device {device}: {problem}") if problem else 0
