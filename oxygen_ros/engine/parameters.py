"""Dataclass fields that carry their description, type and range or allowed values (no ROS)."""

import dataclasses
import math
import re
from array import array
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Optional


class Rule(NamedTuple):
    """A check a string (each item of a list) must pass beyond its type."""
    allowed: str                        # what passes, as the docs say it
    problem: Callable[[str], str]       # what is wrong with a value, '' if nothing


@dataclass(frozen=True)
class Spec:
    default: Any
    description: str
    range: Optional[tuple] = None        # (lowest, highest), both allowed
    choices: Optional[tuple] = None      # the allowed values
    kind: Optional[type] = None          # the value's type where the default cannot say (None)
    pattern: Optional[str] = None        # a regular expression a string value matches
    rule: Optional[Rule] = None          # a check each string passes

    @property
    def type(self) -> type:
        return self.kind or type(self.default)

    @property
    def element_type(self) -> Optional[type]:
        """The type of a sequence's items (None for a scalar)."""
        if not isinstance(self.default, (tuple, list)):
            return None
        return type(self.default[0]) if self.default else str

    def type_name(self) -> str:
        names = {bool: "bool", int: "int", float: "float", str: "string"}
        element = self.element_type
        return f"{names[element]}[]" if element else names[self.type]

    def typed(self, name: str, value):
        """value as this parameter's type, as a user means it: a whole number where a float
        is wanted is that float (a list's items too; a tuple or array comes back a list). A
        value of another type is a ValueError naming the parameter. None passes where it is
        the default."""
        if value is None and self.default is None:
            return None
        element = self.element_type
        if element is None:
            return _typed(name, self.type, value)
        if not isinstance(value, (list, tuple, array)):   # rclpy gives number lists as arrays
            raise ValueError(f"{name} must be a list of {KIND_NAMES[element][1]}, "
                             f"not {value!r}")
        return [_typed(name, element, item, f" (each of {name})") for item in value]

    def check(self, name: str, value) -> None:
        """Raise ValueError if value is not one of the choices, outside the range, or (a
        number or a list of them) not finite. None passes where it is the default."""
        if value is None and self.default is None:
            return
        numbers = value if self.element_type in (int, float) else (value,)
        if any(isinstance(v, float) and not math.isfinite(v) for v in numbers):
            raise ValueError(f"{name} must be finite, not {value!r}")
        if self.choices is not None and value not in self.choices:
            allowed = " or ".join(", ".join(repr(c) for c in self.choices).rsplit(", ", 1))
            raise ValueError(f"{name} must be {allowed}, not {value!r}")
        if self.pattern is not None and not re.fullmatch(self.pattern, value):
            raise ValueError(f"{name} must match {self.pattern}, not {value!r}")
        if self.rule is not None:
            for text in value if self.element_type is str else (value,):
                if problem := self.rule.problem(text):
                    raise ValueError(f"{name} must be {self.rule.allowed}, not {text!r}: "
                                     f"{problem}")
        if self.range is not None and not self.range[0] <= value <= self.range[1]:
            raise ValueError(f"{name} must be in [{self.range[0]}, {self.range[1]}], "
                             f"not {value!r}")


# a type -> (a value of it, values of it), as errors name them
KIND_NAMES = {bool: ("true or false", "true or false"), int: ("a whole number", "whole numbers"),
              float: ("a number", "numbers"), str: ("a string", "strings")}


# why a word meant as text arrives as a bool (rcl reads YAML 1.1 plain scalars)
BOOLEAN_WORDS = ("YAML reads y/n, yes/no, true/false and on/off as booleans: quote a word "
                 "meant as text, as 'n'")


def _typed(name: str, kind: type, value, which: str = ""):
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    hint = f" ({BOOLEAN_WORDS})" if kind is str and isinstance(value, bool) else ""
    if kind is int and isinstance(value, float) and value.is_integer() and abs(value) >= 2**63:
        hint = " (rcl reads a number beyond 64 bits as a float)"
    raise ValueError(f"{name} must be {KIND_NAMES[kind][0]}{which}, not {value!r}{hint}")


def parameter(default, description: str, *, range: Optional[tuple] = None,
              choices: Optional[tuple] = None, kind: Optional[type] = None,
              pattern: Optional[str] = None, rule: Optional[Rule] = None):
    """A dataclass field whose default, description and limits are said once, here."""
    spec = Spec(default, description, range, choices, kind, pattern, rule)
    return dataclasses.field(default=default, metadata={"spec": spec})


def specs(cls) -> dict[str, Spec]:
    """name -> Spec for every field of a dataclass made with parameter()."""
    return {f.name: f.metadata["spec"] for f in dataclasses.fields(cls)}


def check_all(instance) -> None:
    """Check every field of a parameters dataclass against its choices and range."""
    for name, spec in specs(type(instance)).items():
        spec.check(name, getattr(instance, name))


def build(cls, values: dict):
    """An instance of cls from the values of its fields (sequences become tuples)."""
    return cls(**{name: _frozen(values[name]) for name in specs(cls)})


def _frozen(value):
    # ROS gives arrays as lists or array.array
    return value if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") \
        else tuple(value)
