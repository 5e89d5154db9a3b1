"""Repository-root conftest: makes the checkout importable and keeps DDS on loopback."""

import os
from pathlib import Path

import torch

# Without CUDA the Triton kernels run in Triton's interpreter (exact, slow). Must be set
# before any kernel module is imported: triton.jit reads it when it decorates.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# Set before any test imports rclpy; child processes inherit it.
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("ROS_DOMAIN_ID", str(40 + os.getpid() % 50))
# Loopback-only transports with a shared-memory segment large enough for camera frames.
os.environ.setdefault("FASTDDS_DEFAULT_PROFILES_FILE",
                      str(Path(__file__).resolve().parent / "config" / "fastdds_localhost.xml"))
