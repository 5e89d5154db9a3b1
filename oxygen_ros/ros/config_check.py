"""What the nodes would refuse in a parameters YAML, found before anything starts: a value
(parameter_value), a config file as rcl and the nodes read it (read_config), and the values
a planned YAML gives a node, taken together (planned_values, check_cameras,
check_together). Used by launch_plan, so by the launch files and the command line alike."""

import difflib
from pathlib import Path
from typing import Mapping

import yaml

from oxygen_ros.engine.parameters import BOOLEAN_WORDS
from oxygen_ros.engine.robot_names import robot_names
from oxygen_ros.ros import rcl_yaml
from oxygen_ros.ros.config_sections import node_sections, reaches, warn
from oxygen_ros.ros.node_parameters import ACTION, NODE_CHECKS, NODE_SPECS, TOPIC
from oxygen_ros.ros.robot_topics import robot_topic

# a section name this near a node's (difflib's ratio) is warned of as a typo: 'inferense'
# (0.89) is; 'camera' (0.63, a camera driver's) and 'inference_server' (0.72) are not
TYPO = 0.8
# parameters rclpy declares on every node, and its QoS overrides (their parameters exist
# only where a node opts in: these nodes do not, so such values change nothing)
ROS_OWN_BOOLEANS = ("use_sim_time", "start_type_description_service")
ROS_OWN = ROS_OWN_BOOLEANS + ("qos_overrides",)

def parameter_value(node: str, name: str, value):
    """value as the parameter `name` of `node` takes it (Spec.typed: a whole number for a
    float is that float), checked against its range and allowed values; ValueError for a
    node or parameter the package does not have (naming the nearest), or a bad value."""
    if node not in NODE_SPECS:
        raise ValueError(f"{node!r} is no node of oxygen_ros (camera_ingest or inference)"
                         f"{_nearest(node, NODE_SPECS)}")
    node_specs = NODE_SPECS[node]()
    if _ros_own(name):
        if name in ROS_OWN_BOOLEANS and not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, not {value!r} (rclpy declares "
                             "it on every node as a bool)")
        return value
    if name not in node_specs:
        owner = next((other for other in NODE_SPECS if name in NODE_SPECS[other]()), None)
        if owner is not None:
            raise ValueError(f"{node} has no parameter {name!r}: it is {owner}'s (put it in "
                             f"{owner}'s section, or -p {owner}:{name}:=...)")
        known = list(node_specs) + list(ROS_OWN_BOOLEANS)
        raise ValueError(f"{node} has no parameter {name!r}{_nearest(name, known)} "
                         "(docs/parameters.md lists them)")
    spec = node_specs[name]
    if value == [] and spec.default != ():
        raise ValueError(f"{name}: rcl cannot type an empty list and gives the node none, so "
                         "it would run on the default; leave it out for that")
    typed = spec.typed(name, value)
    spec.check(name, typed)
    if (node, name) == ("inference", "robots") and typed:
        robot_names(typed, unnamed=False)
    return typed


def _ros_own(name: str) -> bool:
    """A parameter of rclpy's own on every node (or its QoS overrides, nested or dotted)."""
    return name in ROS_OWN or name.startswith("qos_overrides.")


def _nearest(name: str, known, cutoff: float = 0.6) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=cutoff)
    return f"; did you mean {close[0]!r}?" if close else ""


def read_config(path: Path) -> dict:
    """The parameters YAML at `path` as rcl types its values (rcl_yaml), or ValueError
    saying what rcl would refuse in it, or what the nodes would not take: not YAML; not
    `<node>: ros__parameters: {...}` sections (namespaces may nest them); a list mixing
    types (rcl cannot read it; in any section); no section for camera_ingest or inference
    (nor a `/**` one); in theirs, a parameter the node does not have or a bad value
    (parameter_value; every such problem, one per line when there are several). Other
    nodes' sections pass, and so do parameters of other nodes in `/**`; a section or `/**`
    parameter named near one of ours (a typo?) and a key given twice in one mapping are
    warnings, printed on stderr."""
    try:
        text = path.read_text()
        document = rcl_yaml.load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise ValueError(f"config file {path} is not valid YAML{where}: "
                         f"{getattr(error, 'problem', None) or error}") from None
    except UnicodeDecodeError:
        raise ValueError(f"config file {path} is not text") from None
    if document is None:
        raise ValueError(f"config file {path} is empty")
    for key, first, last, sections in rcl_yaml.repeated_keys(text):
        warn(f"config file {path}: {key!r} is given twice (lines {first} and {last}): "
             + ("rcl merges the two, the later values winning" if sections
                else "the last one is used"))
    if not isinstance(document, dict):
        raise ValueError(f"config file {path} must map node names to their parameters "
                         f"('inference: ros__parameters: ...'), not {type(document).__name__}")
    node_specs = {node: specs() for node, specs in NODE_SPECS.items()}
    everything = set().union(*node_specs.values())
    ours, problems = 0, []
    for node, section in node_sections(path, document, problems=problems):
        wildcard = node in ("*", "**")
        theirs = not wildcard and node not in NODE_SPECS
        if theirs:
            typo = _nearest(node, NODE_SPECS, cutoff=TYPO)
            if typo:
                warn(f"config file {path}: section {node!r} reaches no node oxygen_ros "
                      f"starts{typo}")
        else:
            ours += 1
        for name, value in section.items():
            if isinstance(value, list) and len({type(v) for v in value}) > 1:
                problems.append(f"{node}: {name}: {value} mixes types, which rcl cannot read "
                                f"({_unmixed(value)})")
                continue
            if theirs:
                continue  # another node's parameters (a camera driver's), in a robot-wide file
            nodes = [n for n in node_specs if name in node_specs[n] or name in
                     ROS_OWN_BOOLEANS] if wildcard else [node]
            if wildcard and not nodes and not _ros_own(name):
                typo = _nearest(name, everything, cutoff=TYPO)
                if typo:
                    warn(f"config file {path}: {node}: {name!r} is no parameter of "
                          f"camera_ingest or inference{typo}")
            for each in nodes:
                try:
                    parameter_value(each, name, value)
                except ValueError as error:
                    text = str(error)
                    problems.append(text if text.startswith(each) else f"{each}: {text}")
                    break
    if len(problems) == 1:
        raise ValueError(f"config file {path}: {problems[0]}")
    if problems:
        raise ValueError(f"config file {path} has {len(problems)} problems:\n"
                         + "\n".join(f"  {problem}" for problem in problems))
    if not ours:
        raise ValueError(f"config file {path} sets no parameter of camera_ingest or inference "
                         "(no 'camera_ingest:' or 'inference:' section)")
    return document


def _unmixed(values: list) -> str:
    """How to write a list rcl reads as one type."""
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return "write 1.0, not 1, beside 1.5"
    if any(isinstance(v, bool) for v in values):
        return BOOLEAN_WORDS
    return "quote each item meant as text, as '7'"


def planned_values(config: Path, document: dict, node: str, full_name: str) -> dict:
    """The parameters the node named `full_name` ('/alpha/inference') takes from a planned
    YAML document: its defaults, then every section that reaches it, later ones winning, as
    rcl applies them (each value checked alone by parameter_value)."""
    values = {name: spec.default for name, spec in NODE_SPECS[node]().items()}
    for section, given in node_sections(config, document, full_names=True):
        if reaches(section, full_name):
            values |= {name: parameter_value(node, name, value)
                       for name, value in given.items() if name in values}
    return values


def check_cameras(config: Path, planned: str, nodes: Mapping[str, str]) -> None:
    """camera_ingest publishes its cameras by name and inference reads the ones it knows,
    each taking camera_names from the planned YAML (with_overrides of `config`) under its
    full name in `nodes`: a name only camera_ingest has would be dropped from every
    observation (ValueError); one only inference has would be missing from every one (a
    warning: the model masks it, as for a robot short of a camera)."""
    document = rcl_yaml.load(planned) or {}
    published, read = (list(planned_values(config, document, node, nodes[node])["camera_names"])
                       for node in ("camera_ingest", "inference"))
    unknown = [name for name in published if name not in read]
    if unknown:
        raise ValueError(f"camera_ingest's camera_names {published} has {unknown}, which "
                         f"inference's {read} has not: inference would drop it from every "
                         "observation")
    missing = [name for name in read if name not in published]
    if missing:
        warn(f"inference's camera_names {read} has {missing}, which camera_ingest's "
              f"{published} has not: every observation will lack it (the model masks it)")


def check_together(config: Path, planned: str, nodes: Mapping[str, str]) -> None:
    """What the configure of each node (node -> its full name, '/alpha/inference') would
    refuse in the values the planned parameters YAML (with_overrides of `config`) gives it,
    taken together (planned_values): joint limits of another length than joint_names,
    camera_topics and camera_names apart, a topic that expands to no topic name in the
    node's namespace ('{ns}/x' in the root one; ValueError naming the node), found before
    it starts."""
    document = rcl_yaml.load(planned) or {}
    for node, full_name in nodes.items():
        try:
            values = planned_values(config, document, node, full_name)
            NODE_CHECKS[node](values)
            check_topics(node, values, full_name)
        except ValueError as error:
            raise ValueError(f"{node}: {error}") from None
        if node == "inference" and values["robots"] and "camera_ingest" in nodes:
            _warn_unfed(list(values["robots"]), nodes["camera_ingest"])


def _warn_unfed(robots: list, ingest: str) -> None:
    """A fleet server reads each robot's observations under /<robot>/: a camera_ingest
    started beside it in no robot's namespace feeds none of them."""
    if ingest.rpartition("/")[0].lstrip("/") not in robots:
        warn(f"inference serves robots {robots}, each from /<robot>/oxygen/observation: "
             f"{ingest} feeds none of them (start each robot's camera_ingest in its namespace: "
             "humanoid.launch.py namespace:=<robot> inference:=remote)")


def check_topics(node: str, values: dict, full_name: str) -> None:
    """Each topic and action name as the node named `full_name` creates it (ValueError):
    expanded for that name, and for a fleet server under each robot's namespace
    (robot_topic)."""
    robots = values.get("robots") or ("",)
    for name, spec in NODE_SPECS[node]().items():
        if spec.rule not in (TOPIC, ACTION):
            continue
        for given in values[name] if spec.element_type else (values[name],):
            for robot in robots:
                if problem := spec.rule.problem(robot_topic(robot, given), full_name):
                    whose = f"{full_name}'s robot {robot}" if robot else full_name
                    raise ValueError(f"{name} must be {spec.rule.allowed} for {whose}, not "
                                     f"{given!r}: {problem}")
