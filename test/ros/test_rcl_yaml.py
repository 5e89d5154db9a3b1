"""rcl_yaml types a parameters YAML as rcl itself does (checked against rcl, through
rclpy's public API), and what it writes rcl reads back as it was."""

import math

import pytest
from rcl_interfaces.msg import ParameterDescriptor

from oxygen_ros.ros import rcl_yaml

pytestmark = pytest.mark.ros

# spellings where YAML 1.1 (PyYAML) and rcl part ways, and ordinary ones
SPELLINGS = ["1e-3", "Y", "n", "On", "1_000", "~", "null", "0x1f", "017", "+5", "-0", "inf",
             ".inf", "-.INF", ".nan", "1.5", "5.", ".5", "abc", "1e999",
             "99999999999999999999", "'60'", "\"true\"", "[1, 2]", "[1.5, 2.0]", "[a, 'Y']"]


def rcl_values(domain: int, path, names) -> dict:
    """What rcl gives a node for each parameter of the file at path (public rclpy only)."""
    import rclpy
    from rclpy.context import Context
    from rclpy.node import Node

    context = Context()
    rclpy.init(args=["rcl_yaml_test", "--ros-args", "--params-file", str(path)],
               context=context, domain_id=domain)
    try:
        node = Node("x", context=context)
        values = {name: node.declare_parameter(name, None, ParameterDescriptor(
            dynamic_typing=True)).value for name in names}
        node.destroy_node()
        return values
    finally:
        rclpy.shutdown(context=context)


def same(a, b) -> bool:
    if isinstance(b, list):
        return list(a) == b and all(type(x) is type(y) for x, y in zip(a, b))
    both_nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return type(a) is type(b) and (a == b or both_nan)


def test_plain_and_quoted_scalars_are_typed_as_rcl_types_them(tmp_path, ros_domain):
    names = [f"p{i}" for i in range(len(SPELLINGS))]
    text = "x:\n  ros__parameters:\n" + "".join(
        f"    {name}: {spelling}\n" for name, spelling in zip(names, SPELLINGS))
    (tmp_path / "params.yaml").write_text(text)
    ours = rcl_yaml.load(text)["x"]["ros__parameters"]
    theirs = rcl_values(ros_domain, tmp_path / "params.yaml", names)
    differ = [(s, ours[n], theirs[n]) for s, n in zip(SPELLINGS, names)
              if not same(theirs[n], ours[n])]
    assert differ == []
    assert ours["p0"] == 0.001 and ours["p1"] is True and ours["p4"] == "1_000"


def test_what_it_writes_rcl_reads_back_as_it_was(tmp_path, ros_domain):
    values = {"text_like_a_bool": "Y", "text_like_a_number": "1e-3", "empty": "",
              "small": 1e-5, "whole": 60, "flag": False, "floats": [1.0, 2.5],
              "infinite": math.inf, "words": ["a", "on"]}
    (tmp_path / "params.yaml").write_text(rcl_yaml.dump({"x": {"ros__parameters": values}}))
    theirs = rcl_values(ros_domain, tmp_path / "params.yaml", list(values))
    assert [name for name in values if not same(theirs[name], values[name])] == []


def test_a_key_without_a_value_is_refused_as_rcl_refuses_it():
    import yaml

    with pytest.raises(yaml.YAMLError, match="a key without a value"):
        rcl_yaml.load("x:\n  ros__parameters:\n    checkpoint:\n")
