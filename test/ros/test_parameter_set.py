"""`ros2 param set` as a client sends it (the SetParameters service of a node in its own
process): a value the node's configure would refuse is refused at once with the reason, a
good one is taken while the node is unconfigured (a whole number where a float is declared
too, as a YAML or `ros2 param set ... 60` gives it), and none is taken (and silently
ignored) while it runs; camera_ingest's parameters are read-only. rclpy's own use_sim_time
is refused alike (the node hands its clock on at configure, or reads it at start)."""

import math

import pytest
from graph_helpers import Lifecycle, Probe, call, executable, write_params
from lifecycle_msgs.msg import Transition
from rcl_interfaces.srv import DescribeParameters, GetParameters, SetParameters
from rclpy.parameter import Parameter

pytestmark = pytest.mark.ros

RANGE = "out of range"   # rclpy's own check of a declared range (NaN too)
BAD = [  # values a hostile client once set successfully: (name, value, the reason says)
    ("frame_period_s", -1.0, RANGE), ("frame_period_s", math.nan, RANGE),
    ("frame_period_s", 0.0, RANGE), ("request_timeout_s", -1.0, RANGE),
    ("dialogue_max_tokens", -5, RANGE), ("temperature", math.nan, RANGE),
    ("top_p", -3.0, RANGE), ("chunk_switch", "teleport", "chunk_switch must be"),
    ("device", "quantum", "device must match"),
    ("joint_lower_limits", [math.nan] * 6, "joint_lower_limits must be finite"),
    ("command_topic", "bad topic", "command_topic must be a ROS topic name, not 'bad topic'"),
    ("dialogue_topic", "{ns}/x", "dialogue_topic must be a ROS topic name for /inference, not "
                                 "'{ns}/x': topic name must not contain repeated '/' ({ns}/x "
                                 "expands to //x)"),
]


class Parameters:
    """A node's parameter services (those `ros2 param` calls), each request sent again while
    unanswered (graph_helpers.call): setting or reading a parameter twice is harmless."""

    def __init__(self, probe, node, name: str):
        self.probe, self.node = probe, node
        self.setter = probe.node.create_client(SetParameters, f"{name}/set_parameters")
        self.getter = probe.node.create_client(GetParameters, f"{name}/get_parameters")
        self.describer = probe.node.create_client(DescribeParameters,
                                                  f"{name}/describe_parameters")

    def set_one(self, name, value, kind=None):
        parameter = Parameter(name, kind, value) if kind else Parameter(name, value=value)
        request = SetParameters.Request(parameters=[parameter.to_parameter_msg()])
        return call(self.probe, self.setter, request, self.node, 60.0).results[0]

    def get_one(self, name):
        request = GetParameters.Request(names=[name])
        return call(self.probe, self.getter, request, self.node, 60.0).values[0]

    def describe(self, names):
        request = DescribeParameters.Request(names=names)
        return call(self.probe, self.describer, request, self.node, 60.0).descriptors


def test_inference_refuses_bad_values_with_the_reason_and_freezes_while_configured(
        processes, tmp_path, rclpy_context):
    # whole numbers where floats are declared, as a user writes them
    params = write_params(tmp_path / "params.yaml", inference={
        "autostart": False, "memory_period_s": 2, "joint_upper_limits": [3, 3, 3, 3, 3, 3]})
    node = processes.start(executable("inference"), "--ros-args", "--params-file", params)
    probe = Probe(rclpy_context)
    client = Parameters(probe, node, "/inference")
    assert client.get_one("memory_period_s").double_value == 2.0
    assert list(client.get_one("joint_upper_limits").double_array_value) == [3.0] * 6

    for name, value, reason in BAD:
        result = client.set_one(name, value)
        assert not result.successful, (name, value)
        assert reason in result.reason, (name, result.reason)
    assert client.get_one("temperature").double_value == 0.0
    empty = client.set_one("joint_names", [], Parameter.Type.STRING_ARRAY)
    assert not empty.successful and "joint_names must be distinct names" in empty.reason
    crossed = client.set_one("joint_upper_limits", [-9.0] * 6)
    assert not crossed.successful and "above joint_upper_limits" in crossed.reason

    assert client.set_one("control_rate_hz", 60).successful   # unconfigured; `ros2 param
    assert client.set_one("joint_lower_limits", [-3] * 6).successful  # set` sends an int
    assert list(client.get_one("joint_lower_limits").double_array_value) == [-3.0] * 6
    wrong = client.set_one("control_rate_hz", "fast")
    assert not wrong.successful
    # rclpy's own clock parameter is taken while unconfigured (configure hands it on)
    assert client.set_one("use_sim_time", True).successful
    assert client.set_one("use_sim_time", False).successful
    assert Lifecycle(probe, node).transition(Transition.TRANSITION_CONFIGURE, timeout=120.0)
    frozen = client.set_one("control_rate_hz", 70.0)
    assert not frozen.successful and "inference is configured" in frozen.reason
    assert client.get_one("control_rate_hz").double_value == 60.0
    # its control process runs on the clock configure gave it: no second clock
    clock = client.set_one("use_sim_time", True)
    assert not clock.successful and "inference is configured" in clock.reason
    assert client.get_one("use_sim_time").bool_value is False
    temperature, device, command = client.describe(["temperature", "device", "command_topic"])
    assert temperature.floating_point_range[0].to_value == 1000.0
    assert "cuda" in device.additional_constraints
    assert command.additional_constraints == "a ROS topic name"


def test_camera_ingest_parameters_are_read_only(processes, tmp_path, rclpy_context):
    params = write_params(tmp_path / "params.yaml")
    node = processes.start(executable("camera_ingest"), "--ros-args", "--params-file", params)
    probe = Probe(rclpy_context)
    client = Parameters(probe, node, "/camera_ingest")
    for name, value in [("image_size", 0), ("image_size", 56), ("max_age_s", math.nan)]:
        result = client.set_one(name, value)
        assert not result.successful and "read-only" in result.reason, (name, result.reason)
    assert client.get_one("image_size").integer_value == 28
    clock = client.set_one("use_sim_time", True)
    assert not clock.successful and "reads use_sim_time at start" in clock.reason
    assert client.get_one("use_sim_time").bool_value is False
