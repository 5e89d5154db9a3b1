"""oxygen_ros: π0.5-style VLA inference on one unified, paged KV cache, served over ROS 2."""

# The generated message module oxygen_ros.msg is installed by rosidl into the install
# space (colcon's, or the venv's site-packages), while during development the sources are
# imported from the checkout: let the package span every oxygen_ros directory on sys.path.
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

__version__ = "0.1.0"
