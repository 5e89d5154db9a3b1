"""config/humanoid.yaml documents exactly the parameters the nodes declare, and its
values are accepted by them."""

from pathlib import Path

import yaml

from oxygen_ros.ros.inference_node import PARAMETERS

REPO = Path(__file__).resolve().parent.parent
CONFIG = yaml.safe_load((REPO / "config" / "humanoid.yaml").read_text())


def test_inference_section_lists_every_declared_parameter():
    documented = set(CONFIG["inference"]["ros__parameters"])
    assert documented == set(PARAMETERS), (documented ^ set(PARAMETERS))


def test_config_values_have_the_declared_types():
    for name, value in CONFIG["inference"]["ros__parameters"].items():
        default = PARAMETERS[name][0]
        assert type(value) is type(default), (name, value, default)


def test_camera_ingest_section_lists_every_declared_parameter(rclpy_context):
    from oxygen_ros.ros.camera_ingest import CameraIngest

    node = CameraIngest(context=rclpy_context)
    try:
        declared = set(node._parameters) - {"use_sim_time", "start_type_description_service"}
    finally:
        node.destroy_node()
    assert set(CONFIG["camera_ingest"]["ros__parameters"]) == declared


def test_both_nodes_agree_on_the_camera_names():
    assert (CONFIG["camera_ingest"]["ros__parameters"]["camera_names"]
            == CONFIG["inference"]["ros__parameters"]["camera_names"])
