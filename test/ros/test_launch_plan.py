"""The launch file's decisions (oxygen_ros.ros.launch_plan), without launch_ros: the YAML
is the source of truth and an argument overrides it only when given; every preset the
launch file offers starts from a parameter set its model accepts."""

import itertools
from pathlib import Path

import pytest
import yaml

from oxygen_ros.ros import launch_plan

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "config"
GIVEN = {"preset": "tiny", "checkpoint": "/ckpt", "tokenizer": "/tok.model", "dry_run": "false"}


@pytest.mark.parametrize("given", [dict(c) for n in range(5)
                                   for c in itertools.combinations(GIVEN.items(), n)])
@pytest.mark.parametrize("user_yaml", [False, True])
def test_an_argument_overrides_the_yaml_only_when_given(tmp_path, given, user_yaml):
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.dump({"inference": {"ros__parameters": {
        "checkpoint": "/mine", "preset": "pi05", "dry_run": False}}}))
    arguments = {name: "" for name in launch_plan.OVERRIDABLE} | given
    if user_yaml:
        arguments["config_file"] = str(mine)
    config = launch_plan.config_file(arguments, CONFIG)
    overrides = launch_plan.inference_overrides(arguments)
    # what the node ends with: the YAML, then the overrides (as launch_ros applies them)
    final = yaml.safe_load(config.read_text())["inference"]["ros__parameters"] | overrides
    expected_yaml = yaml.safe_load((mine if user_yaml else CONFIG / launch_plan.PRESET_CONFIGS[
        given.get("preset", "small")]).read_text())["inference"]["ros__parameters"]
    for name in ("preset", "checkpoint", "tokenizer", "dry_run"):
        if name in given:
            expected = given[name] if name != "dry_run" else given[name] == "true"
        else:
            expected = expected_yaml.get(name, final.get(name))
        assert final.get(name) == expected, (name, arguments)
    assert set(overrides) == set(given)


def test_no_arguments_start_the_small_preset_from_humanoid_yaml():
    assert launch_plan.config_file({}, CONFIG) == CONFIG / "humanoid.yaml"
    assert launch_plan.inference_overrides({}) == {}
    assert launch_plan.on_node_exit({}) == "shutdown"
    assert launch_plan.on_node_exit({"respawn": "true"}) == "respawn"
    assert launch_plan.config_file({"preset": "demo"}, CONFIG) == CONFIG / "humanoid_demo.yaml"


def test_bad_values_are_refused_with_the_argument_named():
    with pytest.raises(ValueError, match="dry_run"):
        launch_plan.inference_overrides({"dry_run": "maybe"})
    with pytest.raises(ValueError, match="no shipped config"):
        launch_plan.config_file({"preset": "huge"}, CONFIG)
    with pytest.raises(ValueError, match="respawn"):
        launch_plan.on_node_exit({"respawn": "sometimes"})


def test_preset_tiny_as_offered_starts_an_inference_node(rclpy_context):
    from oxygen_ros.ros.inference_node import InferenceNode

    arguments = {"preset": "tiny"}
    config = launch_plan.config_file(arguments, CONFIG)
    args = ["--ros-args", "--params-file", str(config)]
    for name, value in launch_plan.inference_overrides(arguments).items():
        args += ["-p", f"{name}:={value}"]
    node = InferenceNode(context=rclpy_context, cli_args=args)
    try:
        assert node.model.model.config.name == "tiny" and node._active
    finally:
        node.destroy_node()


def test_a_config_file_that_does_not_exist_stops_the_launch_naming_it(tmp_path):
    missing = tmp_path / "humanoid_typo.yaml"
    with pytest.raises(ValueError, match=f"config file {missing} does not exist"):
        launch_plan.config_file({"config_file": str(missing)}, CONFIG)
    with pytest.raises(ValueError, match="does not exist"):
        launch_plan.inference_parameters({"config_file": str(missing), "preset": "demo"},
                                         CONFIG)


def test_the_demo_runs_exactly_what_the_launch_plan_gives_preset_demo():
    """make run (`oxygen-ros demo`) and `ros2 launch ... preset:=demo dry_run:=false` run
    one configuration: the demo's only overrides are those launch arguments, and the
    memory window it scores its summaries against is the one the nodes are given, the
    window the demo model was trained on (test_camera_ingest's demo test holds the
    summaries right end to end)."""
    from oxygen_ros.cli import build_parser
    from oxygen_ros.cli.demo import demo_configuration
    from oxygen_ros.demo.sampling import MEMORY_PERIOD_S

    arguments, ros_args, scored_period = demo_configuration(build_parser().parse_args(["demo"]))
    assert arguments == {"preset": "demo", "dry_run": "false"}
    launched = launch_plan.inference_overrides(arguments)
    assert ros_args == ["oxygen-ros", "--ros-args", "--params-file",
                        str(CONFIG / "humanoid_demo.yaml"), "-p", "inference:preset:=demo",
                        "-p", "inference:dry_run:=false"]
    assert launched == {"preset": "demo", "dry_run": False}
    parameters = launch_plan.inference_parameters(arguments, CONFIG)
    assert parameters["memory_period_s"] == scored_period == MEMORY_PERIOD_S == 4.0
    assert parameters["checkpoint"] == "package://oxygen_ros/models/demo"
    # a user's -p changes what is scored along with what the node runs
    _, ros_args, scored_period = demo_configuration(build_parser().parse_args(
        ["demo", "-p", "inference:memory_period_s:=6.0"]))
    assert ros_args[-2:] == ["-p", "inference:memory_period_s:=6.0"] and scored_period == 6.0


def test_a_named_robot_has_every_topic_under_its_namespace_where_a_fleet_server_looks():
    from oxygen_ros.engine.parameters import specs
    from oxygen_ros.ros.node_parameters import InferenceParameters, IngestParameters

    arguments = {"namespace": "alpha"}
    config = launch_plan.config_file(arguments, CONFIG)
    ingest = launch_plan.topic_overrides(arguments, config, "camera_ingest")
    inference = launch_plan.topic_overrides(arguments, config, "inference")
    shipped = launch_plan.node_section(config, "camera_ingest").get(
        "camera_topics", IngestParameters.camera_topics)
    assert ingest["camera_topics"] == [f"/alpha{topic}" for topic in shipped]
    assert ingest["joint_state_topic"] == "/alpha/joint_states"
    # what the robot's camera_ingest publishes is what a server with robots [alpha] reads
    defaults = specs(InferenceParameters)
    assert inference == {name: "/alpha" + defaults[name].default
                         for name in launch_plan.ROBOT_TOPICS["inference"]}
    assert ingest["observation_topic"] == inference["observation_topic"]
    assert ingest["instruction_topic"] == inference["instruction_topic"]
    # a namespaced node gets its YAML section's values (the file's key would not reach it)
    values, overrides = launch_plan.node_parameters(arguments | {"preset": ""}, config,
                                                    "inference")
    assert values == launch_plan.node_section(config, "inference") and overrides == inference
    path, overrides = launch_plan.node_parameters({}, config, "inference")
    assert path == str(config) and overrides == {}
    # a topic argument wins over the namespace
    given = launch_plan.topic_overrides(arguments | {"command_topic": "/arm/cmd"}, config,
                                        "inference")
    assert given["command_topic"] == "/arm/cmd"
    assert launch_plan.topic_overrides({"joint_states_topic": "/js"}, config,
                                       "camera_ingest") == {"joint_state_topic": "/js"}


def test_inference_remote_starts_only_camera_ingest_and_needs_the_robots_name():
    assert launch_plan.starts_inference({}) and launch_plan.starts_inference(
        {"inference": "local"})
    assert not launch_plan.starts_inference({"inference": "remote", "namespace": "alpha"})
    with pytest.raises(ValueError, match="needs namespace"):
        launch_plan.starts_inference({"inference": "remote"})
    with pytest.raises(ValueError, match="local or remote"):
        launch_plan.starts_inference({"inference": "cloud"})
    with pytest.raises(ValueError, match="namespace:='arm-1'"):
        launch_plan.robot_namespace({"namespace": "arm-1"})
    assert launch_plan.robot_namespace({"namespace": "/alpha"}) == "alpha"


def test_the_fleet_server_gets_its_yaml_values_the_given_arguments_and_its_robots():
    config = launch_plan.config_file({"preset": "tiny"}, CONFIG)
    given = {"preset": "tiny", "dry_run": "false", "robots": "[alpha, beta]"}
    assert launch_plan.fleet_parameters(given, config) == (
        launch_plan.node_section(config, "inference")
        | {"preset": "tiny", "dry_run": False, "robots": ["alpha", "beta"]})
    assert launch_plan.fleet_robots("alpha, beta") == ["alpha", "beta"]
    for bad, why in (("[]", "names no robot"), ("[a, a]", "named twice"),
                     ("[alpha, 2b]", "'2b'")):
        with pytest.raises(ValueError, match=why):
            launch_plan.fleet_parameters({"robots": bad}, config)
