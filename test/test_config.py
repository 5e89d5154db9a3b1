"""Every shipped parameters YAML (one per preset) documents exactly the parameters the
nodes declare, with the declared types, and both nodes agree on the cameras."""

from pathlib import Path

import pytest
import yaml

from oxygen_ros.ros.inference_node import PARAMETERS
from oxygen_ros.ros.launch_plan import PRESET_CONFIGS

REPO = Path(__file__).resolve().parent.parent
CONFIGS = {name: yaml.safe_load((REPO / "config" / name).read_text())
           for name in PRESET_CONFIGS.values()}
each_config = pytest.mark.parametrize("config", list(CONFIGS.values()), ids=list(CONFIGS))


@each_config
def test_inference_section_lists_every_declared_parameter(config):
    documented = set(config["inference"]["ros__parameters"])
    assert documented == set(PARAMETERS), (documented ^ set(PARAMETERS))


@each_config
def test_config_values_have_the_declared_types(config):
    for name, value in config["inference"]["ros__parameters"].items():
        default = PARAMETERS[name][0]
        assert type(value) is type(default), (name, value, default)


def test_camera_ingest_section_lists_every_declared_parameter(rclpy_context):
    from oxygen_ros.ros.camera_ingest import CameraIngest

    node = CameraIngest(context=rclpy_context)
    try:
        declared = set(node._parameters) - {"use_sim_time", "start_type_description_service"}
    finally:
        node.destroy_node()
    for config in CONFIGS.values():
        assert set(config["camera_ingest"]["ros__parameters"]) == declared


@each_config
def test_both_nodes_agree_on_the_cameras_and_the_preset_config_names_its_preset(config):
    ingest, inference = (config[n]["ros__parameters"] for n in ("camera_ingest", "inference"))
    assert ingest["camera_names"] == inference["camera_names"]
    assert len(ingest["camera_topics"]) == len(ingest["camera_names"])
    assert CONFIGS[PRESET_CONFIGS[inference["preset"]]] is config
