#!/usr/bin/env bash
# The core without ROS, on the GPU machine's versions: Python 3.12, torch 2.11, triton 3.6
# (with `pip install .`, so setup.py's requirements, plus sentencepiece and pytest) and
# nothing of ROS. Runs the model, cache and engine tests (Triton kernels under
# TRITON_INTERPRET=1 on a CPU) and the core benchmarks from the CLI. Not part of
# `make test`: the registry's torch 2.11 wheel pulls several GB of CUDA libraries. NumPy
# stays below 2.4 here: triton 3.6's interpreter turns a loop bound loaded from memory (a
# 1-element array) into an int with int(array), which NumPy 2.4 refuses ("only
# 0-dimensional arrays can be converted to Python scalars");
# triton 3.7 (requirements.txt) does not, and compiled kernels never run the interpreter.
#   tools/core_without_ros.sh            # uses python3.12 on PATH (or PYTHON=...)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.12}
VENV=${VENV:-build/core-py312}
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    . 'torch==2.11.*' 'triton==3.6.*' 'numpy<2.4' sentencepiece pytest hypothesis
"$VENV/bin/python" - <<'PY'
import importlib.util, sys, torch, triton
assert importlib.util.find_spec("rclpy") is None, "this environment must not have ROS"
print(f"python {sys.version.split()[0]}, torch {torch.__version__}, triton {triton.__version__}")
PY
export TRITON_INTERPRET=1 ROS_DOMAIN_ID=0
"$VENV/bin/python" -m pytest -q -m "not ros" -p no:cacheprovider \
    test/model test/cache test/engine test/bench/test_model_bench.py test/test_core_without_ros.py
"$VENV/bin/python" -m oxygen_ros.cli bench-model --preset tiny --repeats 2
"$VENV/bin/python" -m oxygen_ros.cli bench --preset tiny --frames 4
echo "core without ROS: OK"
