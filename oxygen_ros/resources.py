"""Finds the package's shared files (config/, launch/) in a checkout or an install space."""

from pathlib import Path


def share_path(*parts: str) -> Path:
    source = Path(__file__).resolve().parent.parent.joinpath(*parts)
    if source.exists():
        return source
    from ament_index_python.packages import get_package_share_directory
    return Path(get_package_share_directory("oxygen_ros")).joinpath(*parts)
