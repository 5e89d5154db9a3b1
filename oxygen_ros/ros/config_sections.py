"""A parameters YAML's node sections as rcl keys them (namespaces nest them; `*` and `**`
match namespace tokens), and the warnings the launch decisions print on stderr: a section
no node of a start reads, among them."""

import re
import sys
from pathlib import Path
from typing import Optional

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


def node_sections(path: Path, document: dict, within: str = "", full_names: bool = False,
                  problems: Optional[list] = None):
    """(node name, its ros__parameters) for each node section, through namespace levels
    (and nodes nested beside a ros__parameters, as rcl reads them); with full_names, the
    name with its namespaces ('/alpha/inference'). A section rcl would refuse is a
    ValueError, or with `problems`, a line added to it and the section left out."""
    for key, value in document.items():
        name = f"{within}/{str(key).strip('/')}"
        problem = _shape_problem(name.lstrip("/"), value)
        if problem:
            if problems is None:
                raise ValueError(f"config file {path}: {problem}")
            problems.append(problem)
            continue
        if "ros__parameters" in value:
            yield name if full_names else name.rsplit("/", 1)[-1], \
                value["ros__parameters"] or {}
            nested = {key: inner for key, inner in value.items() if key != "ros__parameters"}
            yield from node_sections(path, nested, name, full_names, problems)
        else:
            yield from node_sections(path, value, name, full_names, problems)


def _shape_problem(name: str, value) -> str:
    """What rcl (or the nodes) would refuse in the shape of the section `name`, or ''."""
    if not isinstance(value, dict) or ("ros__parameters" not in value and not all(
            isinstance(inner, dict) for inner in value.values())):
        return (f"section {name!r} needs 'ros__parameters:' above its parameters (or nodes "
                "under it, for a namespace)")
    if "ros__parameters" not in value:
        return ""
    if not isinstance(value["ros__parameters"] or {}, dict):
        return f"{name}'s ros__parameters must map parameter names to values"
    loose = next((key for key, inner in value.items()
                  if key != "ros__parameters" and not isinstance(inner, dict)), None)
    if loose is not None:
        return (f"section {name!r} has {loose!r} beside its ros__parameters, which rcl "
                "refuses (indent it under ros__parameters:)")
    return ""
