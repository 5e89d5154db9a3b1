"""Declares ROS parameters from parameter specs (type, description, range, allowed values)
and refuses at set time any value the node's own check refuses, with its reason.

A whole number given for a float parameter (`control_rate_hz: 60` in a YAML, `-p
...:=60`, `ros2 param set ... 60`, `[-3, 3]` for a float list) is taken as that float,
as its writer means it; rclpy alone refuses its type."""

from array import array
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
    floats = {name for name, spec in specs.items() if float in (spec.type, spec.element_type)}
    for name, spec in specs.items():
        if spec.default == ():   # rclpy takes [] for a byte array: declare the type
            declared = node.declare_parameter(name, Parameter.Type.STRING_ARRAY,
                                              descriptor(spec, note, read_only))
            if declared.value is None:    # no override
                node.set_parameters([Parameter(name, Parameter.Type.STRING_ARRAY, [])])
            continue
        default = list(spec.default) if isinstance(spec.default, tuple) else spec.default
        if name in floats:
            default = _given_as_float(node, name, default)
        node.declare_parameter(name, default, descriptor(spec, note, read_only),
                               ignore_override=name in floats)
    node.add_pre_set_parameters_callback(lambda parameters: [
        Parameter(p.name, value=whole_as_float(p.value)) if p.name in floats else p
        for p in parameters])


def whole_as_float(value):
    """A whole number (not a bool), or a list of numbers, as float(s); anything else as it
    is."""
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, (list, tuple, array)) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return [float(v) for v in value]
    return value


def _given_as_float(node, name: str, default):
    """The value the node's overrides give a float parameter (or a list of floats), whole
    numbers as floats; `default` where none is given. The override is read through a
    parameter declared without a type, then undeclared; a value that is no number is a
    ValueError naming it (a typed declaration would take the type of the value)."""
    given = node.declare_parameter(name, None, ParameterDescriptor(dynamic_typing=True)).value
    node.undeclare_parameter(name)
    if given is None:
        return default
    value = whole_as_float(given)
    if isinstance(default, list) != isinstance(value, list) or not isinstance(value,
                                                                             (float, list)):
        wanted = "a list of numbers" if isinstance(default, list) else "a number"
        raise ValueError(f"{name} must be {wanted}, not {given!r}")
    return value


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
