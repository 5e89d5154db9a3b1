"""package.xml and requirements.txt declare everything the code imports."""

import ast
import importlib.metadata
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCES = sorted((REPO / "oxygen_ros").rglob("*.py")) + sorted((REPO / "launch").glob("*.py"))


def imported_top_level_modules(paths):
    modules = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    return modules - {"oxygen_ros"} - set(sys.stdlib_module_names)


def package_xml_dependencies():
    root = ET.parse(REPO / "package.xml").getroot()
    tags = ("depend", "exec_depend", "build_depend", "buildtool_depend")
    return {element.text.strip() for tag in tags for element in root.iter(tag)}


def requirement_lines(files=("requirements.txt", "requirements-ros-wheels.txt")):
    for name in files:
        for line in (REPO / name).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line and not line.startswith("-r"):
                yield line


def requirement_name(line: str) -> str:
    return re.split(r"[\[=<>~ ]", line)[0].lower().replace("_", "-")


# Modules that only exist on a full ROS 2 install (launch files) or are imported optionally.
ROS_ONLY = {"launch": "launch", "launch_ros": "launch_ros", "cv_bridge": "cv_bridge"}
# rosdep keys of pip-only Python modules that package.xml names by their rosdep key.
ROSDEP_KEYS = {"numpy": "python3-numpy", "yaml": "python3-yaml", "tqdm": "python3-tqdm"}


def test_package_xml_is_format_3_and_builds_messages_with_ament_cmake():
    root = ET.parse(REPO / "package.xml").getroot()
    assert root.tag == "package" and root.get("format") == "3"
    assert root.find("export/build_type").text == "ament_cmake"
    assert "rosidl_interface_packages" in {e.text for e in root.iter("member_of_group")}
    assert {"rosidl_default_generators", "ament_cmake_python"} <= package_xml_dependencies()


def test_package_xml_covers_every_ros_package_the_code_imports():
    distributions = importlib.metadata.packages_distributions()
    declared = package_xml_dependencies()
    missing = []
    for module in sorted(imported_top_level_modules(SOURCES)):
        dists = distributions.get(module, [])
        if module in ROS_ONLY:
            needed = ROS_ONLY[module]
        elif any(d.lower().startswith("ros-") for d in dists):
            needed = module  # a ROS package: rclpy, sensor_msgs, ...
        elif module in ROSDEP_KEYS:
            needed = ROSDEP_KEYS[module]
        else:
            continue
        if needed not in declared:
            missing.append(f"{module} (package.xml needs {needed})")
    assert not missing, missing


def test_requirements_cover_every_third_party_module_the_code_imports():
    """Robot installs use requirements.txt alone: every non-ROS import must be there."""
    distributions = importlib.metadata.packages_distributions()
    core = {requirement_name(line) for line in requirement_lines(["requirements.txt"])}
    missing = []
    for module in sorted(imported_top_level_modules(SOURCES)):
        if module in ROS_ONLY:
            continue
        dists = {d.lower().replace("_", "-") for d in distributions.get(module, [])}
        assert dists, f"{module} is imported but not installed"
        if any(d.startswith("ros-") for d in dists):
            continue  # ROS packages: package.xml on a robot, the wheels file here
        if not dists & core:
            missing.append(f"{module} (from {sorted(dists)})")
    assert not missing, missing


def test_requirements_pin_every_ros_wheel_to_one_distro():
    pins = {}
    for line in requirement_lines():
        if line.startswith("ros-"):
            name, _, version = line.partition("==")
            assert version, f"{name} is not pinned exactly"
            pins[name] = version
    assert pins["ros-rclpy[fastrtps]"] == "9.1.2"  # Kilted
    for msgs in ("ros-std-msgs", "ros-sensor-msgs", "ros-trajectory-msgs", "ros-diagnostic-msgs"):
        assert pins[msgs] == "5.5.1", msgs


def test_setup_py_builds_a_wheel_with_every_module_and_the_cli(tmp_path):
    import shutil
    import subprocess
    import zipfile

    source = tmp_path / "source"  # build out of tree: setuptools writes build/ beside setup.py
    source.mkdir()
    for name in ("setup.py", "package.xml", "oxygen_ros", "resource", "launch", "config"):
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy
        copy(REPO / name, source / name)
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(source)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    wheel, = tmp_path.glob("oxygen_ros-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {str(p.relative_to(REPO)) for p in (REPO / "oxygen_ros").rglob("*.py")}
    assert expected <= names, sorted(expected - names)
    entry_points = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "oxygen-ros = oxygen_ros.cli:main" in entry_points
