"""The control process's DDS environment: Fast DDS without shared memory, on loopback when
the node's discovery is; other RMWs and the user's own profile untouched."""

import xml.etree.ElementTree as ElementTree

from oxygen_ros.resources import share_path
from oxygen_ros.ros.control_dds import LOCALHOST_PROFILE, PROFILE_VARIABLES, control_environment

NS = {"dds": "http://www.eprosima.com"}


def test_localhost_discovery_runs_on_the_loopback_profile_without_shared_memory(tmp_path):
    profile = str(share_path(*LOCALHOST_PROFILE))
    fast_dds_3, fast_dds_2 = tmp_path / "kilted", tmp_path / "jazzy"
    (fast_dds_3 / "share" / "fastdds").mkdir(parents=True)
    (fast_dds_2 / "share" / "fastrtps").mkdir(parents=True)
    for prefix, variable in ((fast_dds_3, "FASTDDS_DEFAULT_PROFILES_FILE"),
                             (fast_dds_2, "FASTRTPS_DEFAULT_PROFILES_FILE")):
        env = control_environment({"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
                                   "FASTDDS_DEFAULT_PROFILES_FILE": "/elsewhere.xml",
                                   "AMENT_PREFIX_PATH": str(prefix), "ROS_DOMAIN_ID": "7"})
        assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SUBNET"
        # only the variable that Fast DDS reads (Fast DDS 3 warns about the other)
        assert [env.get(name) for name in PROFILE_VARIABLES] == \
            [profile if name == variable else None for name in PROFILE_VARIABLES]
        assert env["ROS_DOMAIN_ID"] == "7" and env["PYTHONUNBUFFERED"] == "1"
    assert "ROS_LOCALHOST_ONLY" not in control_environment({"ROS_LOCALHOST_ONLY": "1"})
    assert control_environment({"ROS_LOCALHOST_ONLY": "1"})[PROFILE_VARIABLES[0]] == profile


def test_the_loopback_profile_has_one_udp_transport_and_loopback_locators():
    root = ElementTree.parse(share_path(*LOCALHOST_PROFILE)).getroot()
    types = [t.text for t in root.iterfind(".//dds:transport_descriptor/dds:type", NS)]
    assert types == ["UDPv4"]
    assert [a.text for a in root.iterfind(".//dds:interfaceWhiteList/dds:address", NS)] \
        == ["127.0.0.1"]
    assert root.find(".//dds:useBuiltinTransports", NS).text == "false"
    builtin = root.find(".//dds:builtin", NS)
    addresses = [a.text for a in builtin.iterfind(".//dds:address", NS)]
    assert addresses == ["127.0.0.1", "127.0.0.1"]      # discovery: own locator, peer


def test_other_discovery_keeps_the_users_profile_or_takes_udp_builtin():
    assert control_environment({})["FASTDDS_BUILTIN_TRANSPORTS"] == "UDPv4"
    users = {"FASTRTPS_DEFAULT_PROFILES_FILE": "/robot.xml"}
    env = control_environment(users)
    assert "FASTDDS_BUILTIN_TRANSPORTS" not in env and env["FASTRTPS_DEFAULT_PROFILES_FILE"] \
        == "/robot.xml"


def test_other_rmws_are_left_alone():
    environ = {"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp",
               "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    assert control_environment(environ) == dict(environ, PYTHONUNBUFFERED="1")
