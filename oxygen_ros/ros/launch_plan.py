"""The launch file's decisions as plain functions (tested without launch_ros).

A parameter is the code's default unless the parameters YAML sets it. A launch argument
overrides it only when the user gives it (an empty default means "as the YAML says"). Without a
config_file, each preset starts from its own shipped YAML, so every preset the launch
file offers starts as shipped; a config_file that does not exist stops the start. The
command line (`oxygen-ros run`, `oxygen-ros demo`) makes the same decisions here.

A robot with a name (`namespace:=alpha`) has its nodes under /alpha and every topic it
reads or writes under /alpha/ — the names a fleet server with `robots: [alpha, …]` uses
for it; `inference:=remote` starts only camera_ingest there (fleet.launch.py starts the
server). A parameters YAML keys its sections by node name, which a namespaced or renamed
node does not match, so each node is given one YAML of its own (node_parameters,
fleet_parameters): the config's, its section under the node's full name, the arguments
set in it."""

import atexit
import difflib
import os
import tempfile
from pathlib import Path
from typing import Iterable, Mapping, Optional

from oxygen_ros.engine.robot_names import robot_names
from oxygen_ros.ros import rcl_yaml
from oxygen_ros.ros.config_check import (check_cameras, check_together, parameter_value,
                                         read_config)
from oxygen_ros.ros.config_sections import node_sections, reaches, unreached_sections
from oxygen_ros.ros.node_parameters import NODE_SPECS
from oxygen_ros.ros.robot_topics import robot_topic

PRESET_CONFIGS = {"small": "humanoid.yaml", "tiny": "humanoid_tiny.yaml",
                  "pi05": "humanoid_pi05.yaml", "demo": "humanoid_demo.yaml"}
DEFAULT_CONFIG = "humanoid.yaml"
OVERRIDABLE = ("preset", "checkpoint", "tokenizer", "dry_run", "autostart")
BOOLEANS = ("dry_run", "autostart")
TRUE, FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")
# the launch arguments both launch files declare: (default, description)
MODEL_ARGUMENTS = {
    "preset": ("", "model preset: small, tiny, pi05 or demo (default: the YAML's)"),
    "checkpoint": ("", "π0.5 checkpoint directory (default: the YAML's)"),
    "tokenizer": ("", "PaliGemma SentencePiece .model file (default: the YAML's)"),
    "dry_run": ("", "true: publish no commands or trajectories (default: the YAML's)"),
    "autostart": ("", "false: leave the inference node unconfigured for a lifecycle manager "
                      "(default: the YAML's, true)"),
    "use_sim_time": ("", "true: use /clock, when replaying bags with --clock (default: the "
                         "YAML's, false)"),
}
INFERENCE_PLACES = ("local", "remote")
# per node: the parameters that name a robot's topics (and its Ask action)
ROBOT_TOPICS = {
    "camera_ingest": ("camera_topics", "joint_state_topic", "instruction_topic",
                      "observation_topic"),
    "inference": ("observation_topic", "dialogue_request_topic", "instruction_topic",
                  "command_topic", "action_chunk_topic", "trajectory_topic", "dialogue_topic",
                  "memory_topic", "ask_action"),
}
# launch argument -> (node, parameter) it sets when given
TOPIC_ARGUMENTS = {"joint_states_topic": ("camera_ingest", "joint_state_topic"),
                   "command_topic": ("inference", "command_topic"),
                   "trajectory_topic": ("inference", "trajectory_topic")}


# launch configurations launch and launch_ros set themselves (PushRosNamespace, SetRemap,
# SetParameter, emulate_tty): read by their actions, never a user's argument
LAUNCH_KEYS = ("ros_namespace", "ros_remaps", "global_params", "emulate_tty")


def ignored_arguments(given: Mapping[str, str], declared: Iterable[str],
                      nodes: Iterable[str]) -> list[str]:
    """Warnings for the launch configurations `given` that this file does not read yet look
    meant for it, which launch ignores without a word: a near miss of a `declared` argument
    (joint_state_topic:= for joint_states_topic:=), or a parameter of one of the `nodes` it
    starts (set in config_file). Any other name is left alone: an including file's own."""
    declared = list(declared)
    warnings = []
    for name in sorted(set(given) - set(declared) - set(LAUNCH_KEYS)):
        near = difflib.get_close_matches(name, declared, n=1, cutoff=0.8)
        owners = [node for node in nodes if name in NODE_SPECS[node]()]
        if near:
            warnings.append(f"{name}:= is no argument of this launch file, and is ignored: "
                            f"did you mean {near[0]}:=?")
        elif owners:
            warnings.append(f"{name}:= is no argument of this launch file: {owners[0]}'s "
                            f"parameter {name} is set in the YAML config_file:= names")
    return warnings


def config_file(arguments: Mapping[str, str], config_dir: Path) -> Path:
    """The parameters YAML: config_file if given (checked: read_config), else the preset's
    own, else the default."""
    given = arguments.get("config_file", "")
    if given:
        if Path(given).is_dir():
            raise ValueError(f"config file {given} is a directory, not a parameters YAML")
        if not Path(given).is_file():
            raise ValueError(f"config file {given} does not exist")
        read_config(Path(given))
        return Path(given)
    preset = arguments.get("preset", "")
    if preset and preset not in PRESET_CONFIGS:
        raise ValueError(f"preset {preset!r} has no shipped config (choose from "
                         f"{', '.join(PRESET_CONFIGS)}, or give a parameters YAML of your own)")
    return config_dir / PRESET_CONFIGS.get(preset, DEFAULT_CONFIG)


def with_overrides(config: Path, overrides: Mapping[str, Mapping],
                   names: Mapping[str, str] = {}) -> str:
    """The YAML of the config file with `overrides` (node -> {name: value}) set in each
    node's own section: one file, since rcl given a parameter twice with two types (a file's
    60, a -p's 70.5) keeps the first of bool, int, double, string, not the later value. A
    node in `names` has its section under the full name given there (`/alpha/camera_ingest`),
    which is the only key that reaches a namespaced or renamed node."""
    document = rcl_yaml.load(config.read_text()) or {}
    for node, values in overrides.items():
        key = next((k for k in (node, f"/{node}") if k in document), node)
        if node in names:     # the full name's own section, where the file has one, wins
            section = document.pop(key, None) or {}
            own = (document.get(names[node]) or {}).get("ros__parameters") or {}
            section["ros__parameters"] = (section.get("ros__parameters") or {}) | own
        else:
            section = document.setdefault(key, {})
        section["ros__parameters"] = (section.get("ros__parameters") or {}) | dict(values)
        document[names.get(node, key)] = section
    return f"# {config} with overrides, written by oxygen-ros\n" + rcl_yaml.dump(document)


def parameters_file(text: str, prefix: str = "oxygen-ros-params-") -> str:
    """`text` in a new file (removed when this process exits): the path to give --params-file."""
    handle, path = tempfile.mkstemp(prefix=prefix, suffix=".yaml")
    with os.fdopen(handle, "w") as out:
        out.write(text)
    atexit.register(lambda: Path(path).unlink(missing_ok=True))
    return path


def inference_overrides(arguments: Mapping[str, str]) -> dict:
    """Parameters of the inference node the user set on the command line, typed."""
    overrides = {}
    for name in OVERRIDABLE:
        value = arguments.get(name, "")
        if value == "":
            continue
        overrides[name] = boolean(arguments, name) if name in BOOLEANS else value
    return overrides


def boolean(arguments: Mapping[str, str], name: str) -> bool:
    """The boolean launch argument `name` (true/false, yes/no, on/off, 1/0; unset: false)."""
    value = (arguments.get(name, "") or "false").lower()
    if value not in TRUE + FALSE:
        raise ValueError(f"{name}:={arguments[name]!r} is not a boolean (true or false)")
    return value in TRUE


def sim_time(arguments: Mapping[str, str]) -> dict:
    """use_sim_time when the argument is given (else the YAML's, or rclpy's false)."""
    given = arguments.get("use_sim_time", "")
    return {"use_sim_time": boolean(arguments, "use_sim_time")} if given else {}


def on_node_exit(arguments: Mapping[str, str]) -> str:
    """What the launch does when a node process ends: 'respawn' it or 'shutdown' all."""
    return "respawn" if boolean(arguments, "respawn") else "shutdown"


def robot_namespace(arguments: Mapping[str, str]) -> str:
    """The robot's name from namespace:= ('' for none), checked as a fleet server checks
    its robots' names."""
    name = arguments.get("namespace", "").strip("/")
    if name:
        try:
            robot_names([name])
        except ValueError as error:
            raise ValueError(f"namespace:={name!r}: {error}") from None
    return name


def starts_inference(arguments: Mapping[str, str]) -> bool:
    """inference:=local starts the inference node beside camera_ingest; remote does not (a
    fleet server elsewhere serves the robot, which then needs its name)."""
    place = arguments.get("inference", "local") or "local"
    if place not in INFERENCE_PLACES:
        raise ValueError(f"inference:={place!r} must be local or remote")
    if place == "remote" and not robot_namespace(arguments):
        raise ValueError("inference:=remote needs namespace:=<robot>, the name the fleet "
                         "server's robots list gives this robot")
    return place == "local"


def placed(namespace: str, value):
    """A topic (or each of a list) in the robot's namespace: an absolute one moved there, a
    relative one as it is (the node being there already)."""
    def place(topic: str) -> str:
        return robot_topic(namespace, topic) if topic.startswith("/") else topic
    return [place(v) for v in value] if isinstance(value, (list, tuple)) else place(value)


def topic_overrides(arguments: Mapping[str, str], config: Path, node: str) -> dict:
    """The node's topic parameters that differ from its YAML: under the robot's namespace
    (namespace:=), each absolute one the defaults or a section every start reads give (the
    bare `<node>:`, `/**`) placed in that namespace (a relative one is there already, the
    node being in it), one the robot's own sections give (`/alpha/<node>:`) as written
    there and winning; and those a launch argument names (joint_states_topic,
    command_topic, trajectory_topic), as given."""
    namespace = robot_namespace(arguments)
    overrides = {}
    if namespace:
        generic = {name: NODE_SPECS[node]()[name].default for name in ROBOT_TOPICS[node]}
        own = {}
        for section, given in node_sections(config, rcl_yaml.load(config.read_text()) or {},
                                            full_names=True):
            if reaches(section, f"/{node}"):
                reached = generic
            elif reaches(section, f"/{namespace}/{node}"):
                reached = own
            else:
                continue
            reached.update({name: parameter_value(node, name, value)
                            for name, value in given.items() if name in generic})
        overrides = {name: placed(namespace, value) for name, value in generic.items()} | own
    for argument, (owner, name) in TOPIC_ARGUMENTS.items():
        if owner == node and arguments.get(argument, ""):
            overrides[name] = arguments[argument]
    return overrides


def demo_robot_names(count: int) -> list[str]:
    """robot_0, robot_1, …: the robots `oxygen-ros demo --robots N` and bench-fleet serve."""
    return [f"robot_{i}" for i in range(count)]


def namespaced_ingest(config: Path, robot: str, given: Optional[Mapping] = None) -> str:
    """The parameters YAML a robot's camera_ingest under /<robot> gets from `config` (as
    `humanoid.launch.py namespace:=<robot> inference:=remote` gives it): its topics placed
    there (topic_overrides) and its section moved to its full name; the values `given` on
    the command line win over the robot's own section, their topics placed there too."""
    topics = ROBOT_TOPICS["camera_ingest"]
    values = topic_overrides({"namespace": robot}, config, "camera_ingest") | {
        name: placed(robot, value) if name in topics else value
        for name, value in (given or {}).items()}
    return with_overrides(config, {"camera_ingest": values},
                          {"camera_ingest": f"/{robot}/camera_ingest"})


def fleet_robots(value: str) -> list[str]:
    """The fleet server's robots from robots:= ('[alpha, beta]' or 'alpha,beta'), checked."""
    text = value.strip()
    if text.startswith("["):
        text = text[1:-1] if text.endswith("]") else text[1:]
    names = [name.strip().strip("'\"") for name in text.split(",") if name.strip()]
    if not names:
        raise ValueError("robots:= names no robot (give robots:=\"[alpha, beta]\")")
    try:
        return robot_names(names, unnamed=False)
    except ValueError as error:
        raise ValueError(f"robots:={value!r}: {error}") from None


def node_parameters(arguments: Mapping[str, str], config: Path, node: str) -> str:
    """The parameters YAML humanoid.launch.py gives a node (with_overrides): the config's,
    with what the arguments override (use_sim_time; inference: the overridable arguments)
    and its topics set in its section, which a namespaced node finds under its full name."""
    namespace = robot_namespace(arguments)
    given = inference_overrides(arguments) if node == "inference" else {}
    values = sim_time(arguments) | given | topic_overrides(arguments, config, node)
    full_names = {started: f"/{namespace}/{started}" if namespace else f"/{started}"
                  for started in ("camera_ingest", "inference")}
    full_name = full_names[node]
    if node == "inference":        # started beside camera_ingest, on the same file
        check_cameras(config, with_overrides(config, {"camera_ingest": {}, node: values},
                                             full_names if namespace else {}), full_names)
    unreached_sections(config, node, full_name)
    planned = with_overrides(config, {node: values}, {node: full_name} if namespace else {})
    check_together(config, planned, {node: full_name})
    return planned


def fleet_parameters(arguments: Mapping[str, str], config: Path) -> str:
    """The parameters YAML fleet.launch.py gives its inference server (a node named by
    server:=, under which the config's inference section is set): the config's, with
    use_sim_time if given, the overridable arguments and the robots set in that section."""
    server = arguments.get("server", "") or "inference"
    values = (sim_time(arguments) | inference_overrides(arguments)
              | {"robots": fleet_robots(arguments.get("robots", ""))})
    unreached_sections(config, "inference", f"/{server}")
    planned = with_overrides(config, {"inference": values}, {"inference": f"/{server}"})
    check_together(config, planned, {"inference": f"/{server}"})
    return planned
