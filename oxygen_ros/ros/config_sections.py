"""A parameters YAML's node sections as rcl keys them (namespaces nest them; `*` and `**`
match namespace tokens), and the warnings the launch decisions print on stderr: a section
no node of a start reads, among them."""

import re
import sys
from pathlib import Path

from oxygen_ros.ros import rcl_yaml


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def unreached_sections(config: Path, node: str, *started: str) -> None:
    """Warn of each section of `node` in the config that no node of `node` this start runs,
    each named in `started` ('/alpha/inference'), reads: one under another namespace or
    name (the bare `<node>:` section is the one every start gives its node)."""
    document = rcl_yaml.load(config.read_text()) or {}
    own = [name for name in started if name != f"/{node}"]
    for full, _ in node_sections(config, document, full_names=True):
        if full.rsplit("/", 1)[-1] == node and not reaches(full, f"/{node}", *started):
            warn(f"config file {config}: section {full!r} reaches no node this start runs "
                  f"({node} runs as {' and '.join(map(repr, started))} and reads the "
                  f"{node!r} section" + (f" and {', '.join(map(repr, own))}" if own else "")
                  + ")")


def reaches(section: str, *names: str) -> bool:
    """Whether a section's full name reaches a node of one of `names`, as rcl matches its
    wildcards (`*` one namespace token, `**` any number of them)."""
    pattern = "".join("(/[^/]+)*" if token == "**" else "/[^/]+" if token == "*"
                      else "/" + re.escape(token) for token in section.strip("/").split("/"))
    return any(re.fullmatch(pattern, name) for name in names)


def node_sections(path: Path, document: dict, within: str = "", full_names: bool = False):
    """(node name, its ros__parameters) for each node section, through namespace levels
    (and nodes nested beside a ros__parameters, as rcl reads them); with full_names, the
    name with its namespaces ('/alpha/inference')."""
    for key, value in document.items():
        name = f"{within}/{str(key).strip('/')}"
        if not isinstance(value, dict) or ("ros__parameters" not in value and not all(
                isinstance(inner, dict) for inner in value.values())):
            raise ValueError(f"config file {path}: section {name.lstrip('/')!r} needs "
                             "'ros__parameters:' above its parameters (or nodes under it, "
                             "for a namespace)")
        if "ros__parameters" in value:
            parameters = value["ros__parameters"] or {}
            if not isinstance(parameters, dict):
                raise ValueError(f"config file {path}: {name.lstrip('/')}'s ros__parameters "
                                 "must map parameter names to values")
            loose = next((key for key, inner in value.items()
                          if key != "ros__parameters" and not isinstance(inner, dict)), None)
            if loose is not None:
                raise ValueError(f"config file {path}: section {name.lstrip('/')!r} has "
                                 f"{loose!r} beside its ros__parameters, which rcl refuses "
                                 f"(indent it under ros__parameters:)")
            yield name if full_names else name.rsplit("/", 1)[-1], parameters
            nested = {key: inner for key, inner in value.items() if key != "ros__parameters"}
            yield from node_sections(path, nested, name, full_names)
        else:
            yield from node_sections(path, value, name, full_names)
