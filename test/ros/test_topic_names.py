"""topic_name_problem says what rclpy's own validators say, on names hypothesis makes up."""

from hypothesis import given, settings
from hypothesis import strategies as st
from rclpy.exceptions import InvalidTopicNameException
from rclpy.expand_topic_name import expand_topic_name
from rclpy.validate_full_topic_name import validate_full_topic_name
from rclpy.validate_topic_name import validate_topic_name

from oxygen_ros.ros.topic_names import LONGEST, topic_name_problem

PIECES = st.sampled_from(["a", "Z", "0", "7", "_", "/", "~", "{", "}", " ", ".", "-", "é",
                          "{node}", "{ns}", "{namespace}", "{x}", "{1}", "//", "cam"])


def rcl_says(name: str) -> tuple[str, str]:
    """(rcl_validate_topic_name's message or '', the expanded name's refusal or '') for a
    node 'inference' in namespace /alpha."""
    try:
        validate_topic_name(name)
    except InvalidTopicNameException as error:
        return str(error).splitlines()[0].removeprefix("Invalid topic name: ").rstrip(":"), ""
    try:
        validate_full_topic_name(expand_topic_name(name, "inference", "/alpha"))
    except (InvalidTopicNameException, ValueError) as error:
        return "", str(error).splitlines()[0]
    return "", ""


@settings(max_examples=3000, deadline=None)
@given(st.lists(PIECES, max_size=8).map("".join))
def test_the_same_names_pass_and_the_same_reason_is_given(name):
    ours = topic_name_problem(name)
    unexpanded, expanded = rcl_says(name)
    assert bool(ours) == bool(unexpanded or expanded), (name, ours, unexpanded, expanded)
    if unexpanded:
        assert ours.startswith(unexpanded), (name, ours, unexpanded)


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


def test_the_length_limit_of_an_expanded_name():
    assert topic_name_problem("/" + "a" * (LONGEST - 1)) == ""
    assert topic_name_problem("/" + "a" * LONGEST).startswith("topic length should not exceed")
    assert topic_name_problem("a" * LONGEST).startswith("topic length")   # '/' + it
    try:
        validate_full_topic_name("/" + "a" * LONGEST)
    except InvalidTopicNameException:
        pass
    else:
        raise AssertionError("rmw takes longer names than LONGEST")
    validate_full_topic_name("/" + "a" * (LONGEST - 1))
