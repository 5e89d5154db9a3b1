"""Declares ROS parameters from parameter specs: type, description, range, allowed values."""

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor

from oxygen_ros.engine.parameters import Spec


def descriptor(spec: Spec) -> ParameterDescriptor:
    described = ParameterDescriptor(description=spec.description)
    if spec.range is not None:
        low, high = spec.range
        if spec.type is float:
            described.floating_point_range = [FloatingPointRange(from_value=float(low),
                                                                 to_value=float(high))]
        else:
            described.integer_range = [IntegerRange(from_value=int(low), to_value=int(high))]
    if spec.choices is not None:
        described.additional_constraints = f"one of: {', '.join(map(str, spec.choices))}"
    return described


def declare(node, specs: dict[str, Spec]) -> None:
    for name, spec in specs.items():
        default = list(spec.default) if isinstance(spec.default, tuple) else spec.default
        node.declare_parameter(name, default, descriptor(spec))


def values(node, specs: dict[str, Spec]) -> dict:
    """name -> the parameter's current value."""
    return {name: node.get_parameter(name).value for name in specs}
