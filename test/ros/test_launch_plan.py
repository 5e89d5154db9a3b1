"""The launch file's decisions (oxygen_ros.ros.launch_plan), without launch_ros: the YAML
is the source of truth and an argument overrides it only when given; every preset the
launch file offers starts from a parameter set its model accepts; a YAML the nodes or rcl
would not take (a typo, a wrong type, broken syntax) stops the start saying why."""

import itertools
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from oxygen_ros.ros import config_check, launch_plan, rcl_yaml

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "config"
GIVEN = {"preset": "tiny", "checkpoint": "/ckpt", "tokenizer": "/tok.model", "dry_run": "false"}
BOTH = {"camera_ingest": "/camera_ingest", "inference": "/inference"}


def _section(config: Path, node: str) -> dict:
    """The parameters a YAML's `<node>: ros__parameters:` section gives."""
    return dict(rcl_yaml.load(config.read_text())[node]["ros__parameters"])


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
    # what the node is given: the one YAML humanoid.launch.py writes for it
    final = rcl_yaml.load(launch_plan.node_parameters(arguments, config, "inference"))[
        "inference"]["ros__parameters"]
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
    for node, argument, name in (("inference", "command_topic", "command_topic"),
                                 ("inference", "trajectory_topic", "trajectory_topic"),
                                 ("camera_ingest", "joint_states_topic", "joint_state_topic")):
        with pytest.raises(ValueError, match=re.escape(
                f"{name} must be a ROS topic name, not 'bad topic': topic name must not "
                "contain characters other than alphanumerics")):
            launch_plan.node_parameters({argument: "bad topic"}, CONFIG / "humanoid.yaml", node)


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
    from oxygen_ros.cli import build_parser
    from oxygen_ros.cli.demo import demo_configuration

    with pytest.raises(ValueError, match="does not exist"):
        demo_configuration(build_parser().parse_args(["demo", "--config", str(missing)]))


BAD_CONFIGS = [  # (YAML text, what the one-line refusal says)
    ("inference:\n  ros__parameters:\n    preset: [tiny\n", "is not valid YAML (line 4"),
    ("", "is empty"),
    ("- inference\n", "must map node names to their parameters"),
    ("inference:\n  preset: tiny\n", "section 'inference' needs 'ros__parameters:'"),
    ("inference:\n  ros__parameters: [1]\n", "inference's ros__parameters must map"),
    ("inference:\n  ros__parameters:\n    preset: tiny\n  control_rate_hz: 60\n",
     "section 'inference' has 'control_rate_hz' beside its ros__parameters, which rcl refuses "
     "(indent it under ros__parameters:)"),
    ("inference:\n  robots: [a, b]\n  ros__parameters:\n    preset: tiny\n",
     "section 'inference' has 'robots' beside its ros__parameters"),
    ("inference:\n  ros__parameters:\n    frame_perod_s: 0.1\n",
     "inference has no parameter 'frame_perod_s'; did you mean 'frame_period_s'?"),
    ("camera_ingest:\n  ros__parameters:\n    preset: tiny\n",
     "camera_ingest has no parameter 'preset': it is inference's (put it in inference's "
     "section, or -p inference:preset:=...)"),
    ("inference:\n  ros__parameters:\n    dry_run: 'false'\n",
     "dry_run must be true or false, not 'false'"),
    ("inference:\n  ros__parameters:\n    control_rate_hz: 2000\n",
     "control_rate_hz must be in [1.0, 1000.0], not 2000.0"),
    ("inference:\n  ros__parameters:\n    joint_lower_limits: [-1, 1.5]\n",
     "[-1, 1.5] mixes types, which rcl cannot read"),
    ("inference:\n  ros__parameters:\n    robots: [alpha, yes]\n",
     "['alpha', True] mixes types, which rcl cannot read (YAML reads y/n, yes/no, true/false "
     "and on/off as booleans: quote a word meant as text, as 'n')"),
    ("inference:\n  ros__parameters:\n    robots: [yes, no]\n",
     "robots must be a string (each of robots), not True (YAML reads y/n, yes/no, true/false "
     "and on/off as booleans: quote a word meant as text, as 'n')"),
    ("/**:\n  ros__parameters:\n    use_sim_time: banana\n",
     "use_sim_time must be true or false, not 'banana' (rclpy declares it on every node as "
     "a bool)"),
    ("camera_ingest:\n  ros__parameters:\n    use_sim_tme: true\n",
     "camera_ingest has no parameter 'use_sim_tme'; did you mean 'use_sim_time'?"),
    ("inference:\n  ros__parameters:\n    robots: [alpha, x_]\n",
     "robot name 'x_': use letters, digits and single underscores"),
    ("inference:\n  ros__parameters:\n    robots: [alpha, 7]\n",
     "['alpha', 7] mixes types, which rcl cannot read (quote each item meant as text"),
    ("robot_state_publisher:\n  ros__parameters:\n    publish_frequency: 20.0\n",
     "sets no parameter of camera_ingest or inference"),
    ("/**:\n  ros__parameters:\n    control_rate_hz: fast\n", "control_rate_hz must be a"),
    ("robot_state_publisher:\n  ros__parameters:\n    offsets: [0, 0.5]\n"
     "inference:\n  ros__parameters:\n    preset: tiny\n", "offsets: [0, 0.5] mixes types"),
    ("inference:\n  ros__parameters:\n    camera_names: []\n", "rcl cannot type an empty"),
    ("inference:\n  ros__parameters:\n    checkpoint:\n", "a key without a value"),
    ("camera_ingest:\n  ros__parameters:\n    joint_state_topic: 'not a valid topic!!'\n",
     "joint_state_topic must be a ROS topic name, not 'not a valid topic!!': topic name must "
     "not contain characters other than alphanumerics, '_', '~', '{', or '}' (character 4)"),
]


@pytest.mark.parametrize("text, reason", BAD_CONFIGS)
def test_a_config_file_rcl_or_the_nodes_would_not_take_stops_the_launch_saying_why(
        tmp_path, text, reason):
    config = tmp_path / "params.yaml"
    config.write_text(text)
    with pytest.raises(ValueError, match=re.escape(f"config file {config}")) as refused:
        launch_plan.config_file({"config_file": str(config)}, CONFIG)
    assert reason in str(refused.value)


SEVERAL_PROBLEMS = [  # (YAML text, the problems said, in the file's order)
    ("inference:\n  ros__parameters:\n    checkpiont: /x\n"
     "    joint_names: [a, 1]\n    control_rate_hz: 2000\n"
     "camera_ingest:\n  ros__parameters:\n    image_size: big\n"
     "arm_driver:\n  ros__parameters:\n    gains: [1, 0.5]\n",
     ["inference has no parameter 'checkpiont'; did you mean 'checkpoint'? "
      "(docs/parameters.md lists them)",
      "inference: joint_names: ['a', 1] mixes types, which rcl cannot read (quote each "
      "item meant as text, as '7')",
      "inference: control_rate_hz must be in [1.0, 1000.0], not 2000.0",
      "camera_ingest: image_size must be a whole number, not 'big'",
      "arm_driver: gains: [1, 0.5] mixes types, which rcl cannot read (write 1.0, not 1, "
      "beside 1.5)"]),
    # a section rcl refuses does not hide the others' problems
    ("inference:\n  ros__parameters:\n    frame_period_s: -5.0\n"
     "camera_ingest:\n  ros__parameters:\n    max_age_s: 1.0\n  sync_slop_s: 0.03\n",
     ["inference: frame_period_s must be in [0.001, 3600.0], not -5.0",
      "section 'camera_ingest' has 'sync_slop_s' beside its ros__parameters, which rcl "
      "refuses (indent it under ros__parameters:)"]),
]


@pytest.mark.parametrize("text, problems", SEVERAL_PROBLEMS)
def test_every_problem_of_a_config_file_is_said_at_once_each_naming_its_node(tmp_path, text,
                                                                              problems):
    """A YAML with several mistakes is refused once, listing every one (fixing them one
    start at a time would take as many tries), each on its line and naming its node."""
    config = tmp_path / "params.yaml"
    config.write_text(text)
    with pytest.raises(ValueError) as refused:
        launch_plan.config_file({"config_file": str(config)}, CONFIG)
    assert str(refused.value).splitlines() == [
        f"config file {config} has {len(problems)} problems:"] + [f"  {p}" for p in problems]


def test_a_robot_wide_config_with_namespaces_wildcards_and_other_nodes_passes(tmp_path,
                                                                             capsys):
    config = tmp_path / "robot.yaml"
    config.write_text(
        "/**:\n  ros__parameters:\n    use_sim_time: true\n    control_rate_hz: 60\n"
        "    robot_description_frame: base_link\n    sync_slop_s: 1e-3\n"
        "inference:\n  ros__parameters:\n    dry_run: Y\n"
        "    qos_overrides./oxygen/dialogue.publisher.depth: 20\n"
        "alpha:\n  inference:\n    ros__parameters:\n      preset: tiny\n"
        "      qos_overrides:\n        /oxygen/dialogue:\n          publisher:\n"
        "            depth: 20\n"
        "robot_state_publisher:\n  ros__parameters:\n    publish_frequency: 20.0\n"
        "camera:\n  ros__parameters:\n    fps: 30\n")        # a camera driver's
    assert launch_plan.config_file({"config_file": str(config)}, CONFIG) == config
    assert capsys.readouterr().err == ""


def test_a_section_or_wildcard_parameter_near_one_of_ours_is_warned_of(tmp_path, capsys):
    config = tmp_path / "robot.yaml"
    config.write_text("inferense:\n  ros__parameters:\n    preset: tiny\n"
                      "/**:\n  ros__parameters:\n    tokens_per_frmae: 8\n")
    launch_plan.config_file({"config_file": str(config)}, CONFIG)
    warned = capsys.readouterr().err
    assert "section 'inferense' reaches no node oxygen_ros starts; did you mean 'inference'?" \
        in warned
    assert "'tokens_per_frmae' is no parameter of camera_ingest or inference; did you mean " \
        "'tokens_per_frame'?" in warned


def test_a_key_given_twice_is_warned_of_and_the_last_one_is_used(tmp_path, capsys):
    """rcl takes the last of two values of one key without a word: a pasted line changes a
    value silently, so the check names it."""
    config = tmp_path / "twice.yaml"
    config.write_text("inference:\n  ros__parameters:\n    preset: tiny\n"
                      "    frame_period_s: 0.2\n    frame_period_s: 0.3\n")
    launch_plan.config_file({"config_file": str(config)}, CONFIG)
    assert capsys.readouterr().err == (f"warning: config file {config}: 'frame_period_s' is "
                                       "given twice (lines 4 and 5): the last one is used\n")
    assert config_check.planned_values(config, rcl_yaml.load(config.read_text()), "inference",
                                       "/inference")["frame_period_s"] == 0.3
    # a section given twice: rcl merges the two, so both are the node's and both checked
    config.write_text("inference:\n  ros__parameters:\n    dialogue_max_tokens: 77\n"
                      "camera_ingest:\n  ros__parameters:\n    sync_slop_s: 0.03\n"
                      "inference:\n  ros__parameters:\n    language_floor: 0.3\n")
    launch_plan.config_file({"config_file": str(config)}, CONFIG)
    assert capsys.readouterr().err == (f"warning: config file {config}: 'inference' is given "
                                       "twice (lines 1 and 7): rcl merges the two, the later "
                                       "values winning\n")
    values = config_check.planned_values(config, rcl_yaml.load(config.read_text()),
                                         "inference", "/inference")
    assert (values["dialogue_max_tokens"], values["language_floor"]) == (77, 0.3)
    config.write_text(config.read_text().replace("77", "-1"))
    with pytest.raises(ValueError, match="dialogue_max_tokens must be"):
        launch_plan.config_file({"config_file": str(config)}, CONFIG)


def test_every_shipped_config_passes_the_check():
    for name in set(launch_plan.PRESET_CONFIGS.values()):
        config_check.read_config(CONFIG / name)
        config_check.check_cameras(CONFIG / name, (CONFIG / name).read_text(), BOTH)
        config_check.check_together(CONFIG / name, (CONFIG / name).read_text(), BOTH)


def test_values_a_configure_would_refuse_together_stop_the_launch(tmp_path):
    config = tmp_path / "robot.yaml"
    limits = "    joint_lower_limits: [-1.0, -1.0]\n    joint_upper_limits: [1.0, 1.0]\n"
    config.write_text("inference:\n  ros__parameters:\n    joint_names: [a, b]\n" + limits)
    launch_plan.node_parameters({}, config, "inference")           # two joints, two limits
    with pytest.raises(ValueError, match="^inference: joint_lower_limits, joint_upper_limits "
                                         "and joint_names must have the same length"):
        config_check.check_together(config, launch_plan.with_overrides(
            config, {"inference": {"joint_names": ["a", "b", "c"]}}), {"inference": "/inference"})
    # every section that reaches the node counts: the names in the bare section, the limits
    # in the robot's full-name section (the namespaced node reads both, as planned)
    config.write_text("inference:\n  ros__parameters:\n    joint_names: [a, b]\n"
                      "/alpha/inference:\n  ros__parameters:\n" + limits)
    launch_plan.node_parameters({"namespace": "alpha"}, config, "inference")
    config.write_text("/**:\n  ros__parameters:\n    camera_names: [base]\n")
    with pytest.raises(ValueError, match=re.escape("camera_ingest: camera_topics (3) and "
                                                   "camera_names (1)")):   # also started alone
        launch_plan.node_parameters({"namespace": "alpha", "inference": "remote"}, config,
                                    "camera_ingest")
    launch_plan.fleet_parameters({"robots": "[alpha]"}, config)   # a server starts no ingest
    config.write_text("inference:\n  ros__parameters:\n    joint_lower_limits: [-1.0]\n")
    with pytest.raises(ValueError, match="^inference: joint_lower_limits"):
        launch_plan.fleet_parameters({"robots": "[alpha]", "server": "fleet_a"}, config)



def test_a_camera_only_camera_ingest_publishes_stops_the_start_one_it_lacks_is_warned_of(
        tmp_path, capsys):
    config = tmp_path / "robot.yaml"
    config.write_text("/**:\n  ros__parameters:\n    camera_names: [base, left_wrist]\n")
    config_check.check_cameras(config, config.read_text(), BOTH)   # both read the wildcard
    mistyped = {"camera_ingest": {"camera_names": ["base", "left_wirst"]}}
    with pytest.raises(ValueError, match=re.escape(
            "camera_ingest's camera_names ['base', 'left_wirst'] has ['left_wirst'], which "
            "inference's ['base', 'left_wrist'] has not")):
        config_check.check_cameras(config, launch_plan.with_overrides(config, mistyped), BOTH)
    wildcard = config.read_text()
    with pytest.raises(ValueError, match="left_wirst"):    # as humanoid.launch.py plans it
        config.write_text(yaml.dump({"camera_ingest": {"ros__parameters": mistyped[
            "camera_ingest"]}}))
        launch_plan.node_parameters({}, config, "inference")
    # a robot's namespaced nodes read their full-name sections, the wildcard and the bare
    # section moved under the full name (as with_overrides plans each node)
    config.write_text(wildcard + yaml.dump({"/alpha/camera_ingest": {
        "ros__parameters": mistyped["camera_ingest"]}}))
    launch_plan.node_parameters({}, config, "inference")        # /camera_ingest: the wildcard
    with pytest.raises(ValueError, match="left_wirst"):
        launch_plan.node_parameters({"namespace": "alpha"}, config, "inference")
    config.write_text(yaml.dump({"camera_ingest": {"ros__parameters": mistyped[
        "camera_ingest"]}, "inference": {"ros__parameters": {"camera_names": [
            "base", "left_wirst"]}}}))
    launch_plan.node_parameters({"namespace": "alpha"}, config, "inference")
    assert capsys.readouterr().err == ""
    config.write_text(wildcard)
    config_check.check_cameras(config, launch_plan.with_overrides(
        config, {"camera_ingest": {"camera_names": ["base"]}}), BOTH)
    assert "inference's camera_names ['base', 'left_wrist'] has ['left_wrist'], which " \
        "camera_ingest's ['base'] has not" in capsys.readouterr().err


@pytest.mark.parametrize("node, name, given, taken", [
    ("inference", "control_rate_hz", 60, 60.0), ("inference", "checkpoint", "", ""),
    ("camera_ingest", "image_size", 84, 84), ("inference", "use_sim_time", True, True)])
def test_a_parameter_value_is_taken_as_its_node_takes_it(node, name, given, taken):
    value = config_check.parameter_value(node, name, given)
    assert value == taken and type(value) is type(taken)


def test_the_demo_runs_exactly_what_the_launch_plan_gives_preset_demo():
    """make run (`oxygen-ros demo`) and `ros2 launch ... preset:=demo dry_run:=false` run
    one configuration: the demo's only overrides are those launch arguments, and the
    memory window it scores its summaries against is the one the nodes are given, the
    window the demo model was trained on (test_camera_ingest's demo test holds the
    summaries right end to end)."""
    from oxygen_ros.cli import build_parser
    from oxygen_ros.cli.demo import demo_configuration
    from oxygen_ros.cli.options import planned_inference
    from oxygen_ros.demo.sampling import MEMORY_PERIOD_S

    arguments, ros_args, scored_period, dry_run, params_file, overrides = demo_configuration(
        build_parser().parse_args(["demo"]))
    assert not dry_run and overrides == {}
    assert params_file == str(CONFIG / "humanoid_demo.yaml")
    assert arguments == {"preset": "demo", "dry_run": "false"}
    launched = launch_plan.inference_overrides(arguments)
    assert ros_args == ["oxygen-ros", "--ros-args", "--params-file",
                        str(CONFIG / "humanoid_demo.yaml"), "-p", "inference:preset:=demo",
                        "-p", "inference:dry_run:=false"]
    assert launched == {"preset": "demo", "dry_run": False}
    parameters = planned_inference(arguments, launch_plan.config_file(arguments, CONFIG), [])
    assert parameters["memory_period_s"] == scored_period == MEMORY_PERIOD_S == 4.0
    assert parameters["checkpoint"] == "package://oxygen_ros/models/demo"
    # a user's -p changes what is scored along with what the node runs
    _, ros_args, scored_period, dry_run, params_file, overrides = demo_configuration(
        build_parser().parse_args(["demo", "-p", "inference:memory_period_s:=6", "--dry-run"]))
    # the summary names the YAML given and the -p, not the copy the nodes ran (deleted at exit)
    assert params_file == str(CONFIG / "humanoid_demo.yaml") != ros_args[3]
    assert overrides == {"inference": {"memory_period_s": 6}}
    written = rcl_yaml.load(Path(ros_args[3]).read_text())["inference"]["ros__parameters"]
    assert written["memory_period_s"] == scored_period == 6.0 and written["preset"] == "demo"
    assert written["dry_run"] is dry_run is True


def test_the_fleet_demo_checks_each_robots_camera_ingest_where_it_runs(tmp_path, capsys):
    """demo --robots 2 runs /robot_0/camera_ingest and /robot_1/camera_ingest: a section of
    robot_1's is theirs (no warning), checked against inference as that node gets it."""
    from oxygen_ros.cli import build_parser
    from oxygen_ros.cli.demo import demo_configuration

    config = tmp_path / "fleet.yaml"
    topics = ["cameras/base", "cameras/left", "cameras/head"]

    def section(names):
        config.write_text(yaml.dump({"/robot_1/camera_ingest": {"ros__parameters": {
            "camera_names": names, "camera_topics": topics}}}))

    def demo(*extra):
        return demo_configuration(build_parser().parse_args(
            ["demo", "--config", str(config), *extra]), named_robots=2)

    section(["base", "left_wrist", "head"])
    args = build_parser().parse_args(["demo", "--config", str(config), "--robots", "2"])
    assert args.func(args) == 2                          # refused before anything starts
    assert "oxygen-ros demo: camera_ingest's camera_names ['base', 'left_wrist', 'head'] has " \
        "['head'], which inference's ['base', 'left_wrist', 'right_wrist'] has not" \
        in capsys.readouterr().err
    with pytest.raises(ValueError, match="'head'"):      # -p options: their YAML is checked
        demo("-p", "inference:memory_period_s:=6")
    assert "reaches no node" not in capsys.readouterr().err
    demo_configuration(build_parser().parse_args(["demo", "--config", str(config)]))
    assert "section '/robot_1/camera_ingest' reaches no node this start runs (camera_ingest " \
        "runs as '/camera_ingest' and reads the 'camera_ingest' section)" in capsys.readouterr().err
    section(["base", "left_wrist", "right_wrist"])
    demo()
    warned = capsys.readouterr().err
    assert "reaches no node" not in warned and "camera_names" not in warned, warned
    robot_1 = rcl_yaml.load(launch_plan.namespaced_ingest(config, "robot_1"))
    assert robot_1["/robot_1/camera_ingest"]["ros__parameters"]["camera_topics"] == topics


def test_the_demo_checks_its_config_file_once(tmp_path, capsys):
    """make run's configuration reads the YAML once: a warning about it is printed once."""
    from oxygen_ros.cli import build_parser
    from oxygen_ros.cli.demo import demo_configuration

    config = tmp_path / "near.yaml"
    config.write_text("inference:\n  ros__parameters:\n    control_rate_hz: 50.0\n"
                      "/**:\n  ros__parameters:\n    contrl_rate_hz: 3\n")
    for extra in ([], ["-p", "inference:memory_period_s:=6"]):
        configuration = demo_configuration(build_parser().parse_args(
            ["demo", "--config", str(config)] + extra))
        assert configuration.params_file == str(config)
        assert capsys.readouterr().err.count("did you mean 'control_rate_hz'?") == 1


def test_a_named_robot_has_every_topic_under_its_namespace_where_a_fleet_server_looks():
    from oxygen_ros.engine.parameters import specs
    from oxygen_ros.ros.node_parameters import InferenceParameters, IngestParameters

    arguments = {"namespace": "alpha"}
    config = launch_plan.config_file(arguments, CONFIG)
    ingest = launch_plan.topic_overrides(arguments, config, "camera_ingest")
    inference = launch_plan.topic_overrides(arguments, config, "inference")
    shipped = _section(config, "camera_ingest").get(
        "camera_topics", IngestParameters.camera_topics)
    assert ingest["camera_topics"] == [f"/alpha{topic}" for topic in shipped]
    assert ingest["joint_state_topic"] == "/alpha/joint_states"
    # what the robot's camera_ingest publishes is what a server with robots [alpha] reads
    defaults = specs(InferenceParameters)
    assert inference == {name: "/alpha" + defaults[name].default
                         for name in launch_plan.ROBOT_TOPICS["inference"]}
    assert ingest["observation_topic"] == inference["observation_topic"]
    assert ingest["instruction_topic"] == inference["instruction_topic"]
    # a namespaced node finds its YAML section and its topics under its full name
    given = rcl_yaml.load(launch_plan.node_parameters(arguments, config, "inference"))
    assert "inference" not in given and given["/alpha/inference"]["ros__parameters"] == (
        _section(config, "inference") | inference)
    given = rcl_yaml.load(launch_plan.node_parameters({"use_sim_time": "true"}, config,
                                                      "inference"))
    assert given == rcl_yaml.load(config.read_text()) | {"inference": {"ros__parameters": (
        _section(config, "inference") | {"use_sim_time": True})}}
    # a topic argument wins over the namespace
    given = launch_plan.topic_overrides(arguments | {"command_topic": "/arm/cmd"}, config,
                                        "inference")
    assert given["command_topic"] == "/arm/cmd"
    assert launch_plan.topic_overrides({"joint_states_topic": "/js"}, config,
                                       "camera_ingest") == {"joint_state_topic": "/js"}


def test_a_relative_topic_of_a_named_robot_resolves_where_the_fleet_server_looks(
        tmp_path, rclpy_context):
    from rclpy.node import Node

    from oxygen_ros.ros.robot_topics import robot_topic

    config = tmp_path / "relative.yaml"
    config.write_text("inference:\n  ros__parameters:\n    observation_topic: oxygen/obs\n"
                      "camera_ingest:\n  ros__parameters:\n    observation_topic: oxygen/obs\n"
                      "    camera_topics: [cameras/base/image_raw, /cameras/wrist/image_raw]\n")
    ingest = launch_plan.topic_overrides({"namespace": "alpha"}, config, "camera_ingest")
    assert ingest["camera_topics"] == ["cameras/base/image_raw", "/alpha/cameras/wrist/image_raw"]
    robot = Node("camera_ingest", namespace="alpha", context=rclpy_context)
    server = Node("inference", context=rclpy_context)
    try:
        assert robot.resolve_topic_name(ingest["observation_topic"]) == "/alpha/oxygen/obs"
        assert server.resolve_topic_name(robot_topic("alpha", "oxygen/obs")) == "/alpha/oxygen/obs"
        assert [robot.resolve_topic_name(t) for t in ingest["camera_topics"]] == [
            "/alpha/cameras/base/image_raw", "/alpha/cameras/wrist/image_raw"]
    finally:
        robot.destroy_node()
        server.destroy_node()


def test_a_topic_that_expands_to_no_topic_name_where_the_node_runs_stops_the_start(tmp_path):
    """'{ns}/dialogue' is /alpha/dialogue for a robot's node, '//dialogue' in the root
    namespace, which rcl would refuse when the node creates it."""
    config = tmp_path / "ns.yaml"
    config.write_text("inference:\n  ros__parameters:\n    dialogue_topic: '{ns}/dialogue'\n")
    launch_plan.config_file({"config_file": str(config)}, CONFIG)       # no namespace yet
    with pytest.raises(ValueError) as refused:
        launch_plan.node_parameters({}, config, "inference")
    assert str(refused.value) == (
        "inference: dialogue_topic must be a ROS topic name for /inference, not "
        "'{ns}/dialogue': topic name must not contain repeated '/' ({ns}/dialogue expands "
        "to //dialogue)")
    planned = rcl_yaml.load(launch_plan.node_parameters({"namespace": "alpha"}, config,
                                                        "inference"))
    assert planned["/alpha/inference"]["ros__parameters"]["dialogue_topic"] == "{ns}/dialogue"
    # a fleet server creates a robot's topics as <robot>/<name>: '~/cmd' there is alpha/~/cmd
    config.write_text("inference:\n  ros__parameters:\n    command_topic: '~/cmd'\n")
    launch_plan.node_parameters({}, config, "inference")
    with pytest.raises(ValueError) as refused:
        launch_plan.fleet_parameters({"robots": "[alpha, beta]"}, config)
    assert str(refused.value) == (
        "inference: command_topic must be a ROS topic name for /inference's robot alpha, not "
        "'~/cmd': topic name must not have tilde '~' unless it is the first character "
        "(character 7)")
    # an action name leaves room for rcl_action's /_action/cancel_goal (227 characters)
    for length, refused in ((227, False), (228, True)):
        config.write_text("inference:\n  ros__parameters:\n    ask_action: "
                          f"/{'a' * (length - 1)}\n")
        if refused:
            with pytest.raises(ValueError, match="ask_action must be a ROS action name"):
                launch_plan.config_file({"config_file": str(config)}, CONFIG)
        else:
            launch_plan.node_parameters({}, config, "inference")


def test_a_camera_ingest_in_no_served_robots_namespace_is_warned_of(tmp_path, capsys):
    """A fleet server reads /<robot>/oxygen/observation: `oxygen-ros run -p
    inference:robots:=[alpha]` would start a camera_ingest that feeds no robot."""
    config = tmp_path / "fleet.yaml"
    config.write_text("inference:\n  ros__parameters:\n    robots: [alpha]\n")
    planned = config.read_text()
    config_check.check_together(config, planned, {"camera_ingest": "/camera_ingest",
                                                  "inference": "/inference"})
    assert capsys.readouterr().err == (
        "warning: inference serves robots ['alpha'], each from /<robot>/oxygen/observation: "
        "/camera_ingest feeds none of them (start each robot's camera_ingest in its "
        "namespace: humanoid.launch.py namespace:=<robot> inference:=remote)\n")
    config_check.check_together(config, planned, {"camera_ingest": "/alpha/camera_ingest",
                                                  "inference": "/inference"})
    config_check.check_together(config, planned, {"inference": "/inference"})
    assert capsys.readouterr().err == ""


def test_a_robots_own_section_names_its_topics_as_written_and_wins(tmp_path):
    config = tmp_path / "robots.yaml"
    rig = ["/rig/base", "/rig/left", "/rig/right"]
    config.write_text(yaml.dump({
        "/alpha/camera_ingest": {"ros__parameters": {"camera_topics": rig}},
        "camera_ingest": {"ros__parameters": {"camera_topics": ["/c/c0", "/c/c1", "/c/c2"],
                                              "observation_topic": "/obs"}},
        "/**": {"ros__parameters": {"instruction_topic": "/task"}},
        "/alpha/inference": {"ros__parameters": {"command_topic": "/arm/cmd"}}}))
    ingest = launch_plan.topic_overrides({"namespace": "alpha"}, config, "camera_ingest")
    assert ingest["camera_topics"] == rig               # the robot's own, as written
    assert ingest["observation_topic"] == "/alpha/obs"  # the bare section's, placed
    assert ingest["instruction_topic"] == "/alpha/task"  # the wildcard's, placed
    beta = launch_plan.topic_overrides({"namespace": "beta"}, config, "camera_ingest")
    assert beta["camera_topics"] == ["/beta/c/c0", "/beta/c/c1", "/beta/c/c2"]
    planned = rcl_yaml.load(launch_plan.node_parameters({"namespace": "alpha"}, config,
                                                        "inference"))
    assert planned["/alpha/inference"]["ros__parameters"]["command_topic"] == "/arm/cmd"
    assert planned["/alpha/inference"]["ros__parameters"]["instruction_topic"] == "/alpha/task"
    planned = rcl_yaml.load(launch_plan.node_parameters({"namespace": "alpha"}, config,
                                                        "camera_ingest"))
    assert planned["/alpha/camera_ingest"]["ros__parameters"]["camera_topics"] == rig
    # the fleet demo's -p camera_ingest values win over the robot's own section, their
    # topics placed under the robot as the bare section's are
    given = {"camera_topics": ["/cam/a", "cam/b", "/cam/c"], "joint_state_topic": "/js",
             "image_size": 96}
    demo = rcl_yaml.load(launch_plan.namespaced_ingest(config, "alpha", given))
    expected = {"camera_topics": ["/alpha/cam/a", "cam/b", "/alpha/cam/c"],
                "joint_state_topic": "/alpha/js", "image_size": 96,
                "observation_topic": "/alpha/obs"}
    section = demo["/alpha/camera_ingest"]["ros__parameters"]
    assert {name: section[name] for name in expected} == expected


def test_a_section_under_the_started_nodes_name_wins_and_one_no_node_reads_is_warned_of(
        tmp_path, capsys):
    config = tmp_path / "robots.yaml"
    config.write_text("inference:\n  ros__parameters:\n    preset: tiny\n    dry_run: true\n"
                      "/alpha/inference:\n  ros__parameters:\n    dry_run: false\n"
                      "gamma:\n  inference:\n    ros__parameters:\n      dry_run: false\n"
                      "/**/inference:\n  ros__parameters:\n    control_rate_hz: 40.0\n"
                      "/*/camera_ingest:\n  ros__parameters:\n    image_size: 224\n")
    given = rcl_yaml.load(launch_plan.node_parameters({"namespace": "alpha"}, config,
                                                      "inference"))
    assert given["/alpha/inference"]["ros__parameters"]["dry_run"] is False
    assert given["/alpha/inference"]["ros__parameters"]["preset"] == "tiny"
    warned = capsys.readouterr().err
    assert "section '/gamma/inference' reaches no node this start runs (inference runs as " \
           "'/alpha/inference' and reads the 'inference' section and '/alpha/inference')" in warned
    assert warned.count("reaches no node") == 1       # '/**/inference' reaches every one
    launch_plan.node_parameters({}, config, "camera_ingest")
    assert "section '/*/camera_ingest' reaches no node" in capsys.readouterr().err
    launch_plan.node_parameters({"namespace": "alpha"}, config, "camera_ingest")
    assert capsys.readouterr().err == ""
    # a fleet server is one node: no robot's section reaches it
    launch_plan.fleet_parameters({"robots": "[alpha, beta]"}, config)
    warned = capsys.readouterr().err
    assert "section '/alpha/inference' reaches no node" in warned
    assert "section '/gamma/inference' reaches no node" in warned
    launch_plan.node_parameters({}, launch_plan.config_file({}, CONFIG), "inference")
    assert capsys.readouterr().err == ""


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


def test_a_launch_argument_meant_for_the_file_that_it_does_not_read_is_warned_of():
    """launch ignores an undeclared name:=value without a word; a near miss of a declared
    argument, or a node's parameter given as one, is named; another name (an including
    file's own) is left alone."""
    declared = [*launch_plan.MODEL_ARGUMENTS, *launch_plan.TOPIC_ARGUMENTS, "config_file"]
    nodes = ("camera_ingest", "inference")
    given = {"joint_state_topic": "/js", "checkpont": "/ckpt", "camera_topics": "[/a]",
             "robot_description": "<robot/>", "preset": "tiny", "max_age_s": "2.0",
             "ros_namespace": "/alpha", "emulate_tty": "True"}   # launch's, launch_ros's own
    assert launch_plan.ignored_arguments(given, declared + ["namespace"], nodes) == [
        "camera_topics:= is no argument of this launch file: camera_ingest's parameter "
        "camera_topics is set in the YAML config_file:= names",
        "checkpont:= is no argument of this launch file, and is ignored: did you mean "
        "checkpoint:=?",
        "joint_state_topic:= is no argument of this launch file, and is ignored: did you "
        "mean joint_states_topic:=?",
        "max_age_s:= is no argument of this launch file: camera_ingest's parameter "
        "max_age_s is set in the YAML config_file:= names"]
    assert launch_plan.ignored_arguments({"camera_topics": "[/a]"}, declared,
                                         ("inference",)) == []     # the fleet server's
    assert launch_plan.ignored_arguments({"robot": "[a, b]"}, ["robots", "server"],
                                         ("inference",)) == [
        "robot:= is no argument of this launch file, and is ignored: did you mean robots:=?"]
    assert launch_plan.ignored_arguments({name: "" for name in declared}, declared, nodes) == []


def test_the_fleet_server_gets_its_yaml_values_the_given_arguments_and_its_robots():
    config = launch_plan.config_file({"preset": "tiny"}, CONFIG)
    given = {"preset": "tiny", "dry_run": "false", "robots": "[alpha, beta]"}
    assert rcl_yaml.load(launch_plan.fleet_parameters(given, config))["/inference"] == {
        "ros__parameters": _section(config, "inference") | {
            "preset": "tiny", "dry_run": False,
            "robots": ["alpha", "beta"]}}
    assert launch_plan.fleet_robots("alpha, beta") == ["alpha", "beta"]
    for bad, why in (("[]", "names no robot"), ("[a, a]", "named twice"),
                     ("[alpha, 2b]", "'2b'"), ("['']", "give each robot a name"),
                     ("[x_]", "not ending with an underscore"), ("[_x]", "'_x'"),
                     ("[x__y]", "single underscores")):
        with pytest.raises(ValueError, match=why):
            launch_plan.fleet_parameters({"robots": bad}, config)


@pytest.mark.parametrize("name", ["arm_1", "A2b", "x_", "_x", "x__y", "2b"])
def test_a_robot_name_is_taken_exactly_when_rcl_takes_the_node_names_it_makes(name):
    """The robot's name prefixes node names (`inference_<name>_control`, as remap rules)
    and namespaces its topics: rcl's argument parser is the judge."""
    from rclpy.context import Context

    import rclpy
    context = Context()
    try:
        rclpy.init(context=context, args=["oxygen", "--ros-args",
                                          "-r", f"__node:=inference_{name}_control",
                                          "-r", f"__ns:=/{name}"])
        rclpy.shutdown(context=context)
        taken = True
    except rclpy._rclpy_pybind11.RCLError:
        taken = False
    try:
        launch_plan.fleet_robots(f"[{name}]")
        assert taken, f"{name!r} is taken but rcl refuses it"
    except ValueError:
        assert not taken, f"{name!r} is refused but rcl takes it"


# strings launch_ros would retype if given them in a dict: it reads each by YAML 1.1
# (`yes` a bool) and writes `y` bare, which rcl reads as a bool (a list mixing types then)
TRICKY = """
/**:
  ros__parameters:
    use_sim_time: true
camera_ingest:
  ros__parameters:
    camera_topics: ["/cameras/base/image_raw/compressed",
                    "/cameras/left_wrist/image_raw/compressed"]
    camera_names: ["base", "left_wrist"]
    image_size: 28
inference:
  ros__parameters:
    preset: tiny
    camera_names: ["base", "left_wrist"]
    joint_names: [x, "y", z, "n", "on", "1e-3"]
    joint_lower_limits: [-1.0, -1.0, -1.0, -1.0, -1.0, -1.0]
    joint_upper_limits: [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    default_instruction: "yes"
"""


def rcl_parameters(domain: int, path: Path, name: str, namespace: str = "") -> dict:
    """What rcl gives a node of that name from the parameters file (public rclpy only)."""
    import rclpy
    from rclpy.context import Context
    from rclpy.node import Node

    context = Context()
    rclpy.init(args=["launch_plan_test", "--ros-args", "--params-file", str(path)],
               context=context, domain_id=domain)
    try:
        node = Node(name, namespace=namespace, context=context,
                    automatically_declare_parameters_from_overrides=True)
        values = {key: parameter.value
                  for key, parameter in node.get_parameters_by_prefix("").items()}
        node.destroy_node()
        return values
    finally:
        rclpy.shutdown(context=context)


@pytest.mark.parametrize("namespace", ["", "alpha"])
def test_each_launched_node_gets_its_parameters_as_rcl_types_them(tmp_path, ros_domain,
                                                                    namespace):
    config = tmp_path / "robot.yaml"
    config.write_text(TRICKY)
    arguments = {"config_file": str(config), "namespace": namespace, "dry_run": "true"}
    config = launch_plan.config_file(arguments, CONFIG)
    written = tmp_path / "inference.yaml"
    written.write_text(launch_plan.node_parameters(arguments, config, "inference"))
    inference = rcl_parameters(ros_domain, written, "inference", namespace)
    assert inference["joint_names"] == ["x", "y", "z", "n", "on", "1e-3"]
    assert inference["default_instruction"] == "yes" and inference["dry_run"] is True
    assert inference["use_sim_time"] is True      # the YAML's /**, no argument given
    assert inference.get("observation_topic", "/oxygen/observation") == (
        f"/{namespace}" if namespace else "") + "/oxygen/observation"   # else the code's
    written.write_text(launch_plan.node_parameters(arguments | {"use_sim_time": "off"},
                                                   config, "camera_ingest"))
    ingest = rcl_parameters(ros_domain, written, "camera_ingest", namespace)
    assert ingest["image_size"] == 28 and ingest["use_sim_time"] is False   # given: it wins
    assert ingest["camera_names"] == ["base", "left_wrist"]
    assert ingest["camera_topics"][0] == (f"/{namespace}" if namespace else "") + \
        "/cameras/base/image_raw/compressed"


def test_a_renamed_fleet_server_gets_its_parameters_as_rcl_types_them(tmp_path, ros_domain):
    config = tmp_path / "robot.yaml"
    config.write_text(TRICKY)
    arguments = {"config_file": str(config), "robots": "[alpha, beta]", "server": "rack_1",
                 "use_sim_time": "false"}
    written = tmp_path / "server.yaml"
    written.write_text(launch_plan.fleet_parameters(arguments, config))
    server = rcl_parameters(ros_domain, written, "rack_1")
    assert server["robots"] == ["alpha", "beta"] and server["use_sim_time"] is False
    assert server["joint_names"] == ["x", "y", "z", "n", "on", "1e-3"]
    assert server["default_instruction"] == "yes" and server["preset"] == "tiny"
    assert "robots" not in rcl_parameters(ros_domain, written, "inference")
    with pytest.raises(ValueError, match="use_sim_time"):
        launch_plan.fleet_parameters(arguments | {"use_sim_time": "maybe"}, config)


def test_the_launch_decisions_need_only_pyyaml():
    """`ros2 launch` runs the launch file in the ROS install's own Python, where torch and
    the other model libraries may be absent (installed in a venv for the nodes only)."""
    probe = r'''
import sys
from pathlib import Path

HEAVY = ("torch", "numpy", "cv2", "tqdm", "safetensors", "sentencepiece", "triton", "rclpy")


class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HEAVY:
            raise ModuleNotFoundError(f"{name} is not in the launching Python")


sys.meta_path.insert(0, Absent())
from oxygen_ros.ros import launch_plan

arguments = {"namespace": "alpha", "preset": "tiny", "dry_run": "false"}
config = launch_plan.config_file(arguments, Path(sys.argv[1]))
print(launch_plan.node_parameters(arguments, config, "camera_ingest"))
print(launch_plan.fleet_parameters({"robots": "[alpha, beta]", "server": "rack"}, config))
'''
    result = subprocess.run([sys.executable, "-c", probe, str(CONFIG)], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "'/alpha/camera_ingest':" in result.stdout, result.stdout
    assert "'/rack':" in result.stdout and "- 'beta'" in result.stdout, result.stdout
