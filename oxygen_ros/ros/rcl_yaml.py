"""Reads and writes parameters YAML as rcl's parser (rcl_yaml_param_parser) types it, with
no ROS import.

PyYAML's YAML 1.1 rules differ from rcl's: `1e-3` is a string to PyYAML and a double to rcl,
`Y` a bool to rcl, `1_000` an int to PyYAML and a string to rcl, `~` null to PyYAML and a
string to rcl. rcl types a plain (unquoted) scalar as a bool word, else a whole strtol
(base 0: 0x1f, 017), else a whole strtod (1e-3, inf, .nan), else a string; a quoted one is
a string; an empty plain one is refused."""

import math
import re

import yaml

TRUE = {"Y", "y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"}
FALSE = {"N", "n", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"}
YAML_FLOATS = {".nan": math.nan, ".NaN": math.nan, ".NAN": math.nan} | {
    f"{sign}.{word}": (-math.inf if sign == "-" else math.inf)
    for sign in ("", "+", "-") for word in ("inf", "Inf", "INF")}
INTEGER = re.compile(r"[+-]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")
DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|infinity|nan)",
                     re.IGNORECASE)


def scalar(text: str):
    """A plain scalar as rcl types it."""
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    if INTEGER.fullmatch(text):
        digits = text.lstrip("+-")
        base = 16 if digits[:2] in ("0x", "0X") else 8 if digits.startswith("0") else 10
        value = int(digits, base) * (-1 if text.startswith("-") else 1)
        if -2**63 <= value < 2**63:      # else strtol's ERANGE: strtod's turn
            return value
    if text in YAML_FLOATS:
        return YAML_FLOATS[text]
    if DECIMAL.fullmatch(text):
        value = float(text)
        if math.isfinite(value) or not text.lstrip("+-")[:1].isdigit():   # ERANGE: a string
            return value
    return text


class _Loader(yaml.SafeLoader):
    """Every plain scalar through scalar(); mapping keys stay the strings they are; a key
    given twice in one mapping merges the two mappings, or takes the last value, as rcl."""

    def construct_mapping(self, node, deep=False):
        mapping = {}
        for key_node, value_node in node.value:
            key = (self.construct_scalar(key_node) if isinstance(key_node, yaml.ScalarNode)
                   else self.construct_object(key_node, deep))
            value = self.construct_object(value_node, deep)
            mapping[key] = _merged(mapping[key], value) if key in mapping else value
        return mapping


def _merged(first, last):
    """A key's two values as rcl takes them: mappings merged (the last's values winning),
    else the last."""
    if not (isinstance(first, dict) and isinstance(last, dict)):
        return last
    merged = dict(first)
    for key, value in last.items():
        merged[key] = _merged(merged[key], value) if key in merged else value
    return merged


_Loader.yaml_implicit_resolvers = {}     # no YAML 1.1 typing: plain scalars arrive as str


def _construct_str(loader: _Loader, node: yaml.ScalarNode):
    text = loader.construct_scalar(node)
    if node.style is not None:           # quoted (or a block scalar): a string, as written
        return text
    if text == "":
        raise yaml.constructor.ConstructorError(
            None, None, "a key without a value (rcl refuses it; write '' for an empty string)",
            node.start_mark)
    return scalar(text)


_Loader.add_constructor("tag:yaml.org,2002:str", _construct_str)
_Loader.add_constructor("tag:yaml.org,2002:map", lambda loader, node: loader.construct_mapping(
    node, deep=True))


def load(text: str):
    """The document as rcl types its values (yaml.YAMLError where it is not YAML)."""
    return yaml.load(text, Loader=_Loader)


def repeated_keys(text: str) -> list[tuple[str, int, int, bool]]:
    """Each key a mapping of the document gives twice, as (key, first line, last line,
    whether both values are mappings): rcl, like this module, merges two mappings and takes
    the last of two values otherwise, without a word."""
    found, seen = [], set()

    def walk(node) -> None:
        if id(node) in seen:     # an alias of a node walked already (or of itself)
            return
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    if key.value in first:
                        line, earlier = first[key.value]
                        found.append((key.value, line, key.start_mark.line + 1,
                                      isinstance(earlier, yaml.MappingNode)
                                      and isinstance(value, yaml.MappingNode)))
                    else:
                        first[key.value] = (key.start_mark.line + 1, value)
                walk(value)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                walk(item)
    walk(yaml.compose(text, Loader=_Loader))
    return found


class _Dumper(yaml.SafeDumper):
    """Strings quoted, so rcl reads each back as the string it is (`Y` is no bool)."""


_Dumper.add_representer(str, lambda dumper, text: dumper.represent_scalar(
    "tag:yaml.org,2002:str", text, style="'"))


def dump(document) -> str:
    """YAML rcl reads back as `document` (a float written with its point or exponent)."""
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False)
