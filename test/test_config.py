"""Each default is said once, in the code: the nodes declare exactly the dataclass fields
with their defaults and limits, every shipped YAML sets only what its preset changes,
and docs/parameters.md is the generator's current output."""

from pathlib import Path

import pytest

from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.engine.parameters import specs
from oxygen_ros.ros import config_check, parameter_docs, rcl_yaml
from oxygen_ros.ros.launch_plan import PRESET_CONFIGS
from oxygen_ros.ros.node_parameters import (
    ENGINE_DIFFERENCES,
    engine_config,
    inference_specs,
    ingest_specs,
)

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / "config"
NODE_SPECS = {"camera_ingest": ingest_specs(), "inference": inference_specs()}
OVERRIDES = parameter_docs.shipped_overrides(CONFIG)
each_config = pytest.mark.parametrize("name", sorted(OVERRIDES))
ROS_OWN = {"use_sim_time", "start_type_description_service"}


def _plain(value):
    return list(value) if isinstance(value, (tuple, list)) or hasattr(value, "typecode") \
        else value


def test_docs_parameters_md_is_the_generators_output():
    written = (REPO / "docs" / "parameters.md").read_text()
    assert written == parameter_docs.render(CONFIG), \
        f"docs/parameters.md is stale: run `{parameter_docs.COMMAND}`"
    assert parameter_docs.COMMAND in written.splitlines()[0]


@each_config
def test_a_shipped_yaml_sets_only_parameters_that_exist_and_differ_from_the_default(name):
    for node, given in OVERRIDES[name].items():
        declared = NODE_SPECS[node]
        assert set(given) <= set(declared), (node, set(given) - set(declared))
        for parameter, value in given.items():
            spec = declared[parameter]
            assert _plain(value) != _plain(spec.default), (node, parameter, value)
            if spec.element_type is None:
                assert type(value) is spec.type, (node, parameter, value)
            else:
                assert all(type(v) is spec.element_type for v in value), (node, parameter)
            spec.check(parameter, value)


@each_config
def test_both_nodes_agree_on_the_cameras_and_the_preset_config_names_its_preset(name):
    document = rcl_yaml.load((CONFIG / name).read_text())
    ingest, inference = (config_check.planned_values(CONFIG / name, document, node, f"/{node}")
                         for node in ("camera_ingest", "inference"))
    assert _plain(ingest["camera_names"]) == _plain(inference["camera_names"])
    assert len(ingest["camera_topics"]) == len(ingest["camera_names"])
    assert PRESET_CONFIGS[inference["preset"]] == name


def test_the_node_runs_the_engines_defaults_except_where_it_says_it_differs():
    values = {name: spec.default for name, spec in inference_specs().items()}
    node_engine = engine_config(values, control_period_s=0.02)
    engine = EngineConfig()
    differ = {name for name in specs(EngineConfig)
              if getattr(node_engine, name) != getattr(engine, name)}
    assert differ == {"frame_period_s"}       # action_dt_s 0 is one 50 Hz tick: 0.02 s
    assert set(ENGINE_DIFFERENCES) == {"frame_period_s", "action_dt_s"}
    assert engine.frame_period_s is None and node_engine.frame_period_s == 0.5


def _declared(node) -> dict:
    return {name: node.get_parameter(name).value for name in node._parameters
            if name not in ROS_OWN}


def _descriptor_matches(node, name, spec, note, read_only=False):
    descriptor = node.describe_parameter(name)
    assert descriptor.description == spec.description + note, name
    assert descriptor.read_only == read_only, name
    if spec.pattern is not None:
        assert spec.pattern in descriptor.additional_constraints, name
    if spec.range is not None:
        declared = (descriptor.floating_point_range or descriptor.integer_range)[0]
        assert (declared.from_value, declared.to_value) == spec.range, name
    if spec.choices is not None:
        assert all(c in descriptor.additional_constraints for c in spec.choices), name


@pytest.mark.ros
def test_the_inference_node_declares_every_default_as_the_code_says_it(rclpy_context):
    from oxygen_ros.ros.inference_node import InferenceNode

    node = InferenceNode(context=rclpy_context,
                         cli_args=["--ros-args", "-p", "autostart:=false"])
    try:
        declared = _declared(node)
        expected = inference_specs()
        assert set(declared) == set(expected)
        for name, spec in expected.items():
            if name != "autostart":
                assert _plain(declared[name]) == _plain(spec.default), name
            _descriptor_matches(node, name, spec, " (set while unconfigured; read at configure)")
    finally:
        node.destroy_node()


@pytest.mark.ros
def test_camera_ingest_declares_every_default_as_the_code_says_it(rclpy_context):
    from oxygen_ros.ros.camera_ingest import CameraIngest

    node = CameraIngest(context=rclpy_context)
    try:
        declared = _declared(node)
        assert set(declared) == set(ingest_specs())
        for name, spec in ingest_specs().items():
            assert _plain(declared[name]) == _plain(spec.default), name
            _descriptor_matches(node, name, spec, " (read at start)", read_only=True)
    finally:
        node.destroy_node()
