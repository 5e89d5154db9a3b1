"""One import direction through the package: cache → model → engine → demo → ros → bench →
cli; each layer imports only the layers before it (and the leaves anyone may use). Held
twice: every import statement in the source, at any depth (one inside a function too),
and the real imports of each layer's modules with every later layer made unimportable."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "oxygen_ros"
LAYERS = ("cache", "model", "engine", "demo", "ros", "bench", "cli")
LEAVES = {"resources", "progress", "process_memory"}   # import nothing of the package
GENERATED = {"msg": "ros", "action": "ros"}        # rosidl's modules, the ROS layer's


def layer_of(module: str) -> str:
    """The layer of a dotted oxygen_ros module name ('' for the package itself)."""
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else ""
    return GENERATED.get(name, name)


def package_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every oxygen_ros import in a source file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("oxygen_ros")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.startswith("oxygen_ros"):
            names = [f"{node.module}.{a.name}" if node.module == "oxygen_ros" else node.module
                     for a in node.names]
            found += [(node.lineno, name) for name in names]
    return found


def upward_imports(layer: str) -> list[str]:
    allowed = set(LAYERS[:LAYERS.index(layer) + 1]) | LEAVES
    wrong = []
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        for line, module in package_imports(path):
            if layer_of(module) not in allowed:
                wrong.append(f"{path.relative_to(REPO)}:{line} imports {module}")
    return wrong


def test_every_module_belongs_to_a_layer_or_is_a_leaf():
    tops = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
            if p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists())}
    assert tops - {"__init__"} == set(LAYERS) | LEAVES
    for leaf in LEAVES:
        assert package_imports(PACKAGE / f"{leaf}.py") == [], leaf


@pytest.mark.parametrize("layer", LAYERS)
def test_no_source_imports_a_later_layer(layer):
    assert upward_imports(layer) == []


PROBE = r'''
import importlib, pkgutil, sys

layer, later = sys.argv[1], sys.argv[2].split(",") if sys.argv[2] else []
blocked = ["oxygen_ros." + name for name in later]


class LaterLayers:
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in blocked):
            raise ModuleNotFoundError(f"{name} is a later layer than {layer}")


sys.meta_path.insert(0, LaterLayers())
package = importlib.import_module("oxygen_ros." + layer)
for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
    if not info.name.endswith(".__main__"):     # that one runs the command line
        importlib.import_module(info.name)
print("imported", layer)
'''


@pytest.mark.parametrize("layer", LAYERS)
def test_each_layer_imports_with_every_later_layer_unimportable(layer):
    later = LAYERS[LAYERS.index(layer) + 1:]
    later += tuple(name for name, owner in GENERATED.items() if owner in later)
    result = subprocess.run([sys.executable, "-c", PROBE, layer, ",".join(later)], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"imported {layer}" in result.stdout
