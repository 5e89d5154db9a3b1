"""Finds the package's shared files (config/, launch/) in a checkout or an install space."""

from pathlib import Path


def share_path(*parts: str) -> Path:
    here = Path(__file__).resolve().parent
    source = here.parent.joinpath(*parts)
    if source.exists():
        return source
    # an install prefix (a venv, colcon's install/oxygen_ros) holds the package at
    # lib/pythonX.Y/site-packages/oxygen_ros and its shared files at share/oxygen_ros:
    # found without AMENT_PREFIX_PATH, so every command works from a plain shell
    if len(here.parents) > 3:
        installed = here.parents[3] / "share" / "oxygen_ros"
        if installed.is_dir():
            return installed.joinpath(*parts)
    from ament_index_python.packages import get_package_share_directory
    return Path(get_package_share_directory("oxygen_ros")).joinpath(*parts)
