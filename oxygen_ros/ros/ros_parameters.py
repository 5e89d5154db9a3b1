"""Declares ROS parameters from parameter specs (type, description, range, allowed values)
and refuses at set time any value the node's own check refuses, with its reason."""

from typing import Callable, Optional

from rcl_interfaces.msg import (FloatingPointRange, IntegerRange, ParameterDescriptor,
                                SetParametersResult)
from rclpy.parameter import Parameter

from oxygen_ros.engine.parameters import Spec


def descriptor(spec: Spec, note: str = "", read_only: bool = False) -> ParameterDescriptor:
    described = ParameterDescriptor(description=spec.description + note, read_only=read_only)
    if spec.range is not None:
        low, high = spec.range
        if spec.type is float:
            described.floating_point_range = [FloatingPointRange(from_value=float(low),
                                                                 to_value=float(high))]
        else:
            described.integer_range = [IntegerRange(from_value=int(low), to_value=int(high))]
    if spec.choices is not None:
        described.additional_constraints = f"one of: {', '.join(map(repr, spec.choices))}"
    if spec.pattern is not None:
        described.additional_constraints = f"matches the regular expression {spec.pattern}"
    return described


def declare(node, specs: dict[str, Spec], note: str = "", read_only: bool = False) -> None:
    """Declare every parameter; note is appended to each description (when it applies).
    A read-only parameter takes its value from the node's overrides (YAML, --ros-args) and
    refuses every later set."""
    for name, spec in specs.items():
        if spec.default == ():   # rclpy takes [] for a byte array: declare the type
            declared = node.declare_parameter(name, Parameter.Type.STRING_ARRAY,
                                              descriptor(spec, note, read_only))
            if declared.value is None:    # no override
                node.set_parameters([Parameter(name, Parameter.Type.STRING_ARRAY, [])])
            continue
        default = list(spec.default) if isinstance(spec.default, tuple) else spec.default
        node.declare_parameter(name, default, descriptor(spec, note, read_only))


def values(node, specs: dict[str, Spec]) -> dict:
    """name -> the parameter's current value."""
    return {name: node.get_parameter(name).value for name in specs}


def refuse_bad_values(node, specs: dict[str, Spec], check: Callable[[dict], object],
                      frozen: Callable[[], Optional[str]]) -> None:
    """From now on a SetParameters request is refused, with the reason, when frozen() says
    why these parameters cannot change now, or when check (the node's one check of its
    values, raising ValueError) refuses the values the change would leave."""
    def on_set(parameters) -> SetParametersResult:
        changes = {p.name: p.value for p in parameters if p.name in specs}
        if not changes:
            return SetParametersResult(successful=True)
        reason = frozen()
        if reason is None:
            try:
                check(values(node, specs) | changes)
            except (ValueError, TypeError) as error:
                reason = str(error)
        return SetParametersResult(successful=reason is None, reason=reason or "")

    node.add_on_set_parameters_callback(on_set)
