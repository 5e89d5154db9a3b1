"""Declares ROS parameters from parameter specs (type, description, range, allowed values)
and refuses at set time any value the node's own check refuses, with its reason.

A whole number given for a float parameter (`control_rate_hz: 60` in a YAML, `-p
...:=60`, `ros2 param set ... 60`, `[-3, 3]` for a float list) is taken as that float,
as its writer means it; rclpy alone refuses its type. At start a value of another type
is refused naming the parameter and the type it needs (at set time, rclpy's type check
refuses it). rclpy's own use_sim_time is refused as the node's parameters are, where the
node took its clock at start (freeze_clock)."""

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
    if spec.rule is not None:
        described.additional_constraints = spec.rule.allowed
    return described


def declare(node, specs: dict[str, Spec], note: str = "", read_only: bool = False) -> None:
    """Declare every parameter, typed, with the value the node's overrides (YAML,
    --ros-args) give it, else its default; note is appended to each description (when it
    applies). A value of the wrong type is a ValueError naming the parameter. A read-only
    parameter refuses every later set."""
    for name, spec in specs.items():
        described = descriptor(spec, note, read_only)
        value = _given(node, name, spec)
        if value == []:   # rclpy takes [] for a byte array: declare the type
            node.declare_parameter(name, Parameter.Type.STRING_ARRAY, described,
                                   ignore_override=True)
            node.set_parameters([Parameter(name, Parameter.Type.STRING_ARRAY, [])])
        else:
            node.declare_parameter(name, value, described, ignore_override=True)
    node.add_pre_set_parameters_callback(
        lambda parameters: [_as_float(specs.get(p.name), p) for p in parameters])


def _given(node, name: str, spec: Spec):
    """The value the node's overrides give the parameter, as its type (Spec.typed), or its
    default. The override is read through a parameter declared without a type, then
    undeclared (/parameter_events shows it declared twice): a typed declaration would
    refuse a whole number for a float, and take the type of the override where no default
    fixes it."""
    given = node.declare_parameter(name, None, ParameterDescriptor(dynamic_typing=True)).value
    node.undeclare_parameter(name)
    value = spec.default if given is None else spec.typed(name, given)
    return list(value) if isinstance(value, tuple) else value


def _as_float(spec: Optional[Spec], parameter: Parameter) -> Parameter:
    """At set time: a whole number (or a list of numbers) for a float parameter as float(s);
    any other parameter as it is (a wrong type for rclpy's type check to refuse)."""
    if spec is None or float not in (spec.type, spec.element_type):
        return parameter
    try:
        value = spec.typed(parameter.name, parameter.value)
    except ValueError:
        return parameter
    return Parameter(parameter.name, value=value)


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


def freeze_clock(node, why: Callable[[], Optional[str]]) -> None:
    """From now on setting rclpy's use_sim_time is refused, with why()'s reason, while why()
    gives one: the node took its clock at start (or configure) and handed it on (a control
    process started with it), so a change would leave its parts on two clocks. Called after
    rclpy's own clock callback was added, so it is asked first and its refusal stops that
    one."""
    def on_set(parameters) -> SetParametersResult:
        reason = why() if any(p.name == "use_sim_time" for p in parameters) else None
        return SetParametersResult(successful=reason is None, reason=reason or "")

    node.add_on_set_parameters_callback(on_set)
