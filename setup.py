"""pip packaging of the oxygen_ros Python sources (core + nodes, without the messages).

The ROS 2 build is CMakeLists.txt (colcon, or `make setup` here): it generates the
messages and installs these same sources. This file serves `pip install .` where only the
core is wanted (model, cache, engine, `oxygen-ros bench`), e.g. on a GPU workstation.
"""

from setuptools import find_packages, setup

setup(
    name="oxygen_ros",
    version="0.1.0",
    description="π0.5-style VLA inference on one unified, paged KV cache, served over ROS 2",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["oxygen_ros", "oxygen_ros.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/oxygen_ros"]),
        ("share/oxygen_ros", ["package.xml"]),
        ("share/oxygen_ros/launch", ["launch/humanoid.launch.py", "launch/fleet.launch.py"]),
        ("share/oxygen_ros/config", ["config/humanoid.yaml"]),
    ],
    install_requires=["torch>=2.4", "numpy", "safetensors", "opencv-python-headless",
                      "tqdm"],
    entry_points={"console_scripts": ["oxygen-ros = oxygen_ros.cli:main"]},
)
