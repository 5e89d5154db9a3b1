"""One check per value: what the nodes' configure refuses (and therefore what a parameter
set refuses) — every bad value a hostile `ros2 param set` tried, each with its reason."""

import math
import re
from array import array

import pytest

from oxygen_ros.engine.parameters import specs
from oxygen_ros.model.config import PRESETS
from oxygen_ros.ros.node_parameters import (
    IngestParameters,
    inference_config,
    inference_specs,
    ingest_specs,
)

NAN = math.nan


def inference_values(**changes):
    return {name: spec.default for name, spec in inference_specs().items()} | changes


def ingest_values(**changes):
    return {name: spec.default for name, spec in ingest_specs().items()} | changes


def test_the_defaults_pass():
    params, config = inference_config(inference_values())
    assert config.action_dt_s == pytest.approx(1 / params.control_rate_hz)
    IngestParameters(**ingest_values())


@pytest.mark.parametrize("name, value, reason", [
    ("frame_period_s", -1.0, "frame_period_s must be in"),
    ("frame_period_s", 0.0, "frame_period_s must be in"),
    ("frame_period_s", NAN, "frame_period_s must be finite"),
    ("request_timeout_s", -1.0, "request_timeout_s must be in"),
    ("dialogue_max_tokens", -5, "dialogue_max_tokens must be in"),
    ("memory_max_tokens", 0, "memory_max_tokens must be in"),
    ("temperature", NAN, "temperature must be finite"),
    ("temperature", math.inf, "temperature must be finite"),
    ("top_p", -3.0, "top_p must be in"),
    ("top_p", 0.0, "top_p must be above 0"),
    ("joint_names", (), "joint_names must be distinct names, at least one"),
    ("joint_names", ("a",) * 14, "joint_names must be distinct"),
    ("joint_lower_limits", (NAN,) * 14, "joint_lower_limits must be finite"),
    ("joint_upper_limits", (-2.0,) + (1.0,) * 13, "above joint_upper_limits for ['joint_0']"),
    ("chunk_switch", "teleport", "chunk_switch must be"),
    ("device", "quantum", "device must match"),
    ("device", "cuda:x", "device must match"),
    ("dtype", "float16", "dtype must be"),
    ("preset", "huge", "preset must be"),
    ("camera_names", (), "camera_names must be distinct names, at least one"),
    ("control_rate_hz", NAN, "control_rate_hz must be finite"),
    ("language_floor", 1.5, "language_floor must be in"),
    ("blend_s", -0.1, "blend_s must be in"),
    ("action_dt_s", -0.02, "action_dt_s must be in"),
    ("memory_period_s", -1.0, "memory_period_s must be in"),
    ("page_size", 0, "page_size must be in"),
    ("max_tokens_per_frame", 2, "tokens_per_frame <= max_tokens_per_frame"),
    ("tokens_per_frame", 0, "tokens_per_frame must be in"),      # no language would decode
    ("robots", ("",), "robot name '': give each robot a name"),
    ("robots", ("arm", "x__y"), "robot name 'x__y': use letters, digits and single"),
    ("robots", ("arm_",), "not ending with an underscore"),
    ("command_topic", "bad topic", "command_topic must be a ROS topic name, not 'bad topic': "
                                   "topic name must not contain characters other than "
                                   "alphanumerics, '_', '~', '{', or '}' (character 4)"),
    ("ask_action", "~ask", "ask_action must be a ROS action name, not '~ask': topic name must "
                           "not have a tilde '~' that is not followed by a forward slash"),
    ("memory_topic", "{robot}/memory", "unknown substitution {robot} (character 1)"),
    ("checkpoint", "null", "checkpoint must be a path, or '' for none, not 'null': rcl has "
                           "no YAML null: it reads this word as a path no file has"),
    ("tokenizer", "~", "tokenizer must be a path, or '' for none, not '~'"),
    ("dialogue_template", "Q: {question}\nA: ", "{question} is none of its fields (its "
                                                "fields: {text}; a literal brace is written"),
    ("dialogue_template", "Robot, answer: ", "has no {text}: the question would never"),
    ("dialogue_template", "{text} {", "Single '{' encountered"),
    ("memory_template", "Summary {frames}: ", "{frames} is none of its fields (its fields: "
                                              "{previous}, {first}, {last}"),
    ("memory_template", "{first:s}", "Unknown format code 's'"),
    ("memory_template", "{previous}", "is blank once filled: the model would get no prompt"),
])
def test_a_bad_inference_value_is_refused_with_its_reason(name, value, reason):
    with pytest.raises(ValueError, match=re.escape(reason)):
        inference_config(inference_values(**{name: value}))


@pytest.mark.parametrize("name, value, reason", [
    ("image_size", -1, "image_size must be in"),
    ("image_size", 0, "image_size must be in"),
    ("max_image_pixels", -1, "max_image_pixels must be in"),
    ("camera_topics", (), "must be non-empty"),
    ("max_age_s", NAN, "max_age_s must be finite"),
    ("sync_slop_s", -0.1, "sync_slop_s must be in"),
    ("resize_mode", "crop", "resize_mode must be"),
    ("camera_topics", ("/cameras/base", "/cameras/0", "/cameras/right"), "camera_topics must be a ROS topic name, "
     "not '/cameras/0': topic name token must not start with a number (character 10)"),
    ("joint_state_topic", "", "topic name must not be empty string"),
    ("observation_topic", "/oxygen/observation/", "must not end with a forward slash"),
])
def test_a_bad_camera_ingest_value_is_refused_with_its_reason(name, value, reason):
    with pytest.raises(ValueError, match=re.escape(reason)):
        IngestParameters(**ingest_values(**{name: value}))


def test_good_values_at_the_edges_pass():
    inference_config(inference_values(device="cuda:1", temperature=0.0, top_p=1.0,
                                      memory_period_s=0.0, request_timeout_s=0.0,
                                      joint_lower_limits=(0.5,) * 14,
                                      joint_upper_limits=(0.5,) * 14,
                                      dialogue_template="{text}",
                                      memory_template="{first}-{last}: {previous!r}"))


def test_the_allowed_names_are_the_ones_the_model_code_knows():
    from oxygen_ros.model.loading import DTYPES

    assert inference_specs()["preset"].choices == tuple(PRESETS)
    assert set(inference_specs()["dtype"].choices) == {"auto"} | set(DTYPES)


def test_every_number_parameter_has_a_range():
    unbounded = [name for name, spec in (inference_specs() | specs(IngestParameters)).items()
                 if spec.type in (int, float) and spec.element_type is None
                 and spec.range is None]
    assert unbounded == []


@pytest.mark.parametrize("name, given, typed", [
    ("control_rate_hz", 60, 60.0), ("control_rate_hz", 60.5, 60.5),
    ("joint_lower_limits", [-3, 2.5], [-3.0, 2.5]), ("joint_lower_limits", (1,), [1.0]),
    ("joint_lower_limits", array("q", [2]), [2.0]),     # rclpy's integer array
    ("dialogue_max_tokens", 12, 12), ("dry_run", False, False),
    ("joint_names", ["a", "b"], ["a", "b"]), ("robots", [], [])])
def test_a_value_is_taken_as_its_parameters_type_as_the_user_means_it(name, given, typed):
    value = inference_specs()[name].typed(name, given)
    assert value == typed and type(value) is type(typed)
    assert all(type(v) is type(t) for v, t in zip(value, typed)) if isinstance(typed, list) \
        else True


@pytest.mark.parametrize("name, given, reason", [
    ("control_rate_hz", "fast", "control_rate_hz must be a number, not 'fast'"),
    ("control_rate_hz", True, "control_rate_hz must be a number, not True"),
    ("dialogue_max_tokens", 12.0, "dialogue_max_tokens must be a whole number, not 12.0"),
    ("dialogue_max_tokens", False, "must be a whole number, not False"),
    ("dialogue_max_tokens", 1e20, "dialogue_max_tokens must be a whole number, not 1e+20 (rcl "
                                  "reads a number beyond 64 bits as a float)"),
    ("dry_run", "false", "dry_run must be true or false, not 'false'"),
    ("dry_run", 0, "dry_run must be true or false, not 0"),
    ("checkpoint", 7, "checkpoint must be a string, not 7"),
    ("joint_names", "base", "joint_names must be a list of strings, not 'base'"),
    ("joint_lower_limits", [-1, "x"], "must be a number (each of joint_lower_limits), not 'x'")])
def test_a_value_of_another_type_is_refused_naming_the_type(name, given, reason):
    with pytest.raises(ValueError, match=re.escape(reason)):
        inference_specs()[name].typed(name, given)
