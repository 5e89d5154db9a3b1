"""topic_name_problem says what rclpy's own validators say, on names hypothesis makes up."""

from hypothesis import given, settings
from hypothesis import strategies as st
from rclpy.exceptions import InvalidTopicNameException
from rclpy.expand_topic_name import expand_topic_name
from rclpy.validate_full_topic_name import validate_full_topic_name
from rclpy.validate_topic_name import validate_topic_name

from oxygen_ros.ros.topic_names import LONGEST, action_name_problem, topic_name_problem

PIECES = st.sampled_from(["a", "Z", "0", "7", "_", "/", "~", "{", "}", " ", ".", "-", "é",
                          "{node}", "{ns}", "{namespace}", "{x}", "{1}", "//", "cam"])


def rcl_says(name: str, node: str = "/alpha/inference") -> tuple[str, str]:
    """(rcl_validate_topic_name's message or '', the expanded name's refusal or '') for
    the node with full name `node`."""
    try:
        validate_topic_name(name)
    except InvalidTopicNameException as error:
        return str(error).splitlines()[0].removeprefix("Invalid topic name: ").rstrip(":"), ""
    namespace, _, base = node.rpartition("/")
    try:
        validate_full_topic_name(expand_topic_name(name, base, namespace or "/"))
    except (InvalidTopicNameException, ValueError) as error:
        return "", str(error).splitlines()[0]
    return "", ""


@settings(max_examples=2000, deadline=None)
@given(st.lists(PIECES, max_size=8).map("".join),
       st.sampled_from(["/inference", "/alpha/inference", "/robot_1/camera_ingest"]))
def test_the_same_names_pass_and_the_same_reason_is_given(name, node):
    """Given the node, exactly rclpy's verdict; without it, that of a namespaced node (a
    name only the root namespace refuses passes: '{ns}/x')."""
    ours = topic_name_problem(name, node)
    unexpanded, expanded = rcl_says(name, node)
    assert bool(ours) == bool(unexpanded or expanded), (name, node, ours, unexpanded, expanded)
    if unexpanded:
        assert ours.startswith(unexpanded), (name, ours, unexpanded)
    assert bool(topic_name_problem(name)) == any(rcl_says(name)), name


def test_examples_with_the_character_pointed_at():
    assert topic_name_problem("/oxygen/joint_command") == ""
    assert topic_name_problem("~/chunks") == topic_name_problem("{node}/x") == ""
    assert topic_name_problem("not a valid topic!!") == (
        "topic name must not contain characters other than alphanumerics, '_', '~', '{', "
        "or '}' (character 4)")
    assert topic_name_problem("/cam/0/image") == (
        "topic name token must not start with a number (character 6)")
    assert topic_name_problem("{robot}/x") == "unknown substitution {robot} (character 1)"
    assert topic_name_problem("") == "topic name must not be empty string"
    assert topic_name_problem("{ns}/x") == topic_name_problem("{ns}/x", "/alpha/inference") == ""
    assert topic_name_problem("{ns}/x", "/inference") == (
        "topic name must not contain repeated '/' ({ns}/x expands to //x)")


def test_the_length_limit_of_an_expanded_name():
    assert topic_name_problem("/" + "a" * (LONGEST - 1)) == ""
    assert topic_name_problem("/" + "a" * LONGEST).startswith("topic length should not exceed")
    assert topic_name_problem("a" * LONGEST).startswith("topic length")   # '/' + it
    assert topic_name_problem("~/" + "a" * (LONGEST - 12), "/alpha/inference") == (
        f"topic length should not exceed {LONGEST} characters (~/{'a' * (LONGEST - 12)} "
        f"expands to {LONGEST + 5})")
    try:
        validate_full_topic_name("/" + "a" * LONGEST)
    except InvalidTopicNameException:
        pass
    else:
        raise AssertionError("rmw takes longer names than LONGEST")
    validate_full_topic_name("/" + "a" * (LONGEST - 1))


def test_an_action_name_leaves_room_for_rcl_actions_suffix(rclpy_context):
    """rclpy's ActionServer takes exactly the names action_name_problem passes."""
    from rclpy.action import ActionServer
    from rclpy.node import Node

    from oxygen_ros.action import Ask

    node = Node("inference", namespace="/alpha", context=rclpy_context)
    try:
        for name in ("~/" + "a" * 210, "~/" + "a" * 211, "ask", "a" * 220, "a" * 221):
            problem = action_name_problem(name, "/alpha/inference")
            try:
                ActionServer(node, Ask, name, lambda goal: None).destroy()
                created = True
            except ValueError:
                created = False
            assert created == (problem == ""), (len(name), problem)
    finally:
        node.destroy_node()
