# oxygen_ros — fresh-machine setup, the main job and the tests.
#   make run    set everything up, then run the main job (the trained demo model on CPU)
#   make test   set everything up, then run the whole test suite
# Setup is cached: the venv is updated only when a requirements file changes, the messages
# only when msg/ or the build files change; a second run takes seconds.

# ROS_DISTRO=jazzy: the same setup and suite on ROS 2 Jazzy wheels, in its own venv.
ROS_DISTRO ?= kilted
ifeq ($(ROS_DISTRO),kilted)
VENV       ?= .venv
ROS_WHEELS := requirements-ros-wheels.txt
BUILD_DIR  := build/cmake
else ifeq ($(ROS_DISTRO),jazzy)
VENV       ?= .venv-jazzy
ROS_WHEELS := requirements-ros-wheels-jazzy.txt
BUILD_DIR  := build/cmake-jazzy
else
$(error ROS_DISTRO must be kilted or jazzy, not '$(ROS_DISTRO)')
endif
PYTHON     ?= python3
PY         := $(VENV)/bin/python
# make test TESTS='test/ros test/test_config.py': only those (.ci/run does so on Jazzy); the 15
# slowest tests are listed at the end, so that a CI log says where its time went
TESTS      ?= test
# DDS traffic never leaves loopback; each run picks its own domain.
export ROS_AUTOMATIC_DISCOVERY_RANGE := LOCALHOST
export ROS_DOMAIN_ID ?= 71
export FASTDDS_DEFAULT_PROFILES_FILE ?= $(abspath config/fastdds_localhost.xml)
export AMENT_PREFIX_PATH := $(abspath $(VENV))
export PYTHONUNBUFFERED := 1

PY_SOURCES := $(shell find oxygen_ros -name '*.py' -not -path '*/__pycache__/*')
BUILD_INPUTS := CMakeLists.txt package.xml cmake/entry_point.py.in $(wildcard msg/*.msg) \
                $(wildcard action/*.action) \
                $(wildcard launch/*) $(wildcard config/*) $(wildcard models/*/*) $(PY_SOURCES)

.PHONY: setup run test clean

setup: $(VENV)/.installed

$(VENV)/.requirements: $(ROS_WHEELS) requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r $(ROS_WHEELS)
	$(PY) tools/fix_ros_wheel_cmake.py $(abspath $(VENV))
	touch $@

# Generates the messages and installs the package into the venv exactly as colcon
# would into an install space (same CMakeLists.txt).
$(VENV)/.installed: $(VENV)/.requirements $(BUILD_INPUTS)
	mkdir -p $(BUILD_DIR)
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
	  -DCMAKE_PREFIX_PATH=$(abspath $(VENV)) -DCMAKE_INSTALL_PREFIX=$(abspath $(VENV)) \
	  -DPython3_EXECUTABLE=$(abspath $(PY)) > $(BUILD_DIR).log 2>&1 || (cat $(BUILD_DIR).log; exit 1)
	cmake --build $(BUILD_DIR) -j 2 >> $(BUILD_DIR).log 2>&1 || (cat $(BUILD_DIR).log; exit 1)
	cmake --install $(BUILD_DIR) >> $(BUILD_DIR).log 2>&1 || (cat $(BUILD_DIR).log; exit 1)
	touch $@

run: setup
	$(PY) -m oxygen_ros.cli demo

test: setup
	$(PY) -m pytest -q --durations=15 $(TESTS)

clean:
	rm -rf $(VENV) build
