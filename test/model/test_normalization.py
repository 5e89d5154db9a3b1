"""A checkpoint's normalization statistics, read as its own format applies them: lerobot's
normalization_mapping per feature (quantiles, q10/q90, min/max, mean/std, identity) with
lerobot's formulas, openpi's norm_stats.json with openpi's; statistics that are missing,
misshapen or unreadable are refused naming the file, never read as identity."""

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from oxygen_ros.model.normalization import (MissingStatistics, check_joints, load_lerobot,
                                            load_openpi)

STATS = {"mean": 1.0, "std": 0.5, "min": -4.0, "max": 4.0, "q01": -2.0, "q99": 2.0,
         "q10": -1.0, "q90": 3.0}


def lerobot_dir(tmp_path, features=("observation.state", "action"), **override):
    tensors = {f"{feature}.{stat}": np.full(4, value, np.float32)
               for feature in features for stat, value in STATS.items()}
    tensors |= {key: np.asarray(value, np.float32) for key, value in override.items()}
    save_file(tensors, str(tmp_path / "policy_preprocessor_step_0_normalizer_processor.safetensors"))
    return tmp_path


def mapping(state, action):
    return {"type": "pi05", "normalization_mapping": {"VISUAL": "IDENTITY", "STATE": state,
                                                      "ACTION": action}}


@pytest.mark.parametrize("mode, state_in, state_out, action_in, action_out", [
    ("QUANTILES", 1.0, 0.5, 0.5, 1.0),            # 2 (x - q01) / (q99 - q01) - 1
    ("QUANTILE10", 1.0, 0.0, 0.5, 2.0),           # q10 / q90
    ("MIN_MAX", 2.0, 0.5, 0.5, 2.0),              # min / max
    ("MEAN_STD", 2.0, 2.0, 0.5, 1.25),            # (x - mean) / (std + 1e-8); x std + mean
    ("IDENTITY", 3.0, 3.0, 0.5, 0.5),
])
def test_lerobot_normalizes_each_feature_as_its_config_maps_it(tmp_path, mode, state_in,
                                                              state_out, action_in, action_out):
    norm = load_lerobot(lerobot_dir(tmp_path), mapping(mode, mode))
    np.testing.assert_allclose(norm.normalize_state(np.full(4, state_in)), state_out, rtol=1e-6)
    np.testing.assert_allclose(norm.unnormalize_actions(np.full((2, 4), action_in)), action_out,
                               rtol=1e-6)
    assert f"state {mode.lower().replace('quantiles', 'quantile')}" in norm.source \
        or mode == "IDENTITY" and "state identity" in norm.source


def test_lerobot_state_and_actions_may_differ_and_a_config_without_mapping_means_quantiles(
        tmp_path):
    directory = lerobot_dir(tmp_path)
    norm = load_lerobot(directory, mapping("IDENTITY", "MEAN_STD"))
    assert norm.state is None and norm.normalize_state(np.ones(4)).tolist() == [1.0] * 4
    np.testing.assert_allclose(norm.unnormalize_actions(np.full((1, 4), 0.5)), 1.25)
    default = load_lerobot(directory, {"type": "pi05"})
    np.testing.assert_allclose(default.normalize_state(np.ones(4)), 0.5)


def test_lerobot_statistics_the_config_needs_but_the_file_lacks_are_refused(tmp_path):
    directory = lerobot_dir(tmp_path, features=("observation.state",))
    with pytest.raises(MissingStatistics, match="no statistics of action.*normalized units"):
        load_lerobot(directory, mapping("QUANTILES", "QUANTILES"))
    with pytest.raises(ValueError, match="'SOMETIMES' is not one of"):
        load_lerobot(directory, mapping("QUANTILES", "SOMETIMES"))


def test_lerobot_statistics_of_different_lengths_are_refused(tmp_path):
    directory = lerobot_dir(tmp_path, **{"action.q99": np.full(2, 2.0)})
    with pytest.raises(ValueError, match=r"action: q01 and q99 must be vectors of one length, "
                                         r"not of shapes \[4\] and \[2\]"):
        load_lerobot(directory, mapping("QUANTILES", "QUANTILES"))


def test_lerobot_statistics_crossed_or_with_a_negative_std_are_refused(tmp_path):
    directory = lerobot_dir(tmp_path, **{"action.q01": [-2.0, 3.0, -2.0, 3.0],
                                         "observation.state.std": [0.5, 0.5, -0.5, 0.5]})
    with pytest.raises(ValueError, match=r"action: q01 above q99 in dimensions \[1, 3\]"):
        load_lerobot(directory, mapping("QUANTILES", "QUANTILES"))
    with pytest.raises(ValueError, match=r"observation.state: std below 0 in dimensions \[2\]"):
        load_lerobot(directory, mapping("MEAN_STD", "MIN_MAX"))
    overflowing = lerobot_dir(tmp_path, **{"action.q01": [-3e38, -2.0, -2.0, -2.0],
                                           "action.q99": [3e38, 2.0, 2.0, 2.0]})
    with pytest.raises(ValueError, match=r"action: \('q01', 'q99'\) in dimensions \[0\] span "
                                         r"more than a float32 holds"):
        load_lerobot(overflowing, mapping("QUANTILES", "QUANTILES"))


def test_lerobot_files_that_disagree_are_refused_naming_both(tmp_path):
    directory = lerobot_dir(tmp_path)
    save_file({"action.q01": np.full(4, -20.0, np.float32),
               "action.q99": np.full(4, 2.0, np.float32)},
              str(tmp_path / "policy_postprocessor_step_0_unnormalizer_processor.safetensors"))
    with pytest.raises(ValueError, match=r"policy_postprocessor_step_0_unnormalizer_processor"
                                         r"\.safetensors and .*policy_preprocessor_step_0_"
                                         r"normalizer_processor\.safetensors disagree on "
                                         r"action\.q01"):
        load_lerobot(directory, mapping("QUANTILES", "QUANTILES"))
    # the same values in both files (lerobot writes them so) are one set
    save_file({"action.q01": np.full(4, -2.0, np.float32),
               "action.q99": np.full(4, 2.0, np.float32)},
              str(tmp_path / "policy_postprocessor_step_0_unnormalizer_processor.safetensors"))
    norm = load_lerobot(directory, mapping("QUANTILES", "QUANTILES"))
    np.testing.assert_allclose(norm.unnormalize_actions(np.full((1, 4), 0.5)), 1.0)


def test_the_robots_joints_must_be_the_dimensions_the_statistics_cover(tmp_path):
    norm = load_lerobot(lerobot_dir(tmp_path), mapping("QUANTILES", "QUANTILES"))
    check_joints(norm, 4)
    with pytest.raises(ValueError, match=r"5 joint_names, but the state statistics \(lerobot "
                                         r".*\) have 4 dimensions: list the joints the "
                                         r"checkpoint was trained on"):
        check_joints(norm, 5)
    actions_only = load_lerobot(tmp_path, mapping("IDENTITY", "QUANTILES"))
    with pytest.raises(ValueError, match="3 joint_names, but the action statistics"):
        check_joints(actions_only, 3)
    check_joints(load_lerobot(tmp_path, mapping("IDENTITY", "IDENTITY")), 3)
    # a model that does not read the state (state_prompt none): only the actions must match
    check_joints(norm, 4, state_read=False)
    (tmp_path / "libero").mkdir()
    libero = lerobot_dir(tmp_path / "libero", **{"action.q01": np.full(3, -2.0),
                                                 "action.q99": np.full(3, 2.0)})
    with pytest.raises(ValueError, match="3 joint_names, but the state statistics"):
        check_joints(load_lerobot(libero, mapping("QUANTILES", "QUANTILES")), 3)
    check_joints(load_lerobot(libero, mapping("QUANTILES", "QUANTILES")), 3, state_read=False)


def openpi_dir(tmp_path, text):
    (tmp_path / "assets" / "droid").mkdir(parents=True)
    (tmp_path / "assets" / "droid" / "norm_stats.json").write_text(text)
    return tmp_path


def test_openpi_statistics_apply_openpis_formula(tmp_path):
    entry = {"q01": [-2.0] * 4, "q99": [2.0] * 4, "mean": [0.0] * 4, "std": [1.0] * 4}
    norm = load_openpi(openpi_dir(tmp_path, json.dumps(
        {"norm_stats": {"state": entry, "actions": entry}})))
    np.testing.assert_allclose(norm.normalize_state(np.ones(4)), 3 / (4 + 1e-6) * 2 - 1)
    np.testing.assert_allclose(norm.unnormalize_actions(np.zeros((1, 4))), 0.5e-6, atol=1e-7)


@pytest.mark.parametrize("text, reason", [
    ('{"state": {}, "actions": {}}', "found no 'norm_stats' object"),       # no wrapper
    ('{"norm_stats": {"state": {}, "action": {}}}', r"found \['action', 'state'\]"),
    ("[1, 2]", "found no 'norm_stats' object"),
    ('{"norm_stats": {', "unreadable normalization statistics"),
    ('{"norm_stats": {"state": {"q01": [0], "q99": [1]}, "actions": {"q01": "low", '
     '"q99": [1]}}}', "are not numbers"),
    ('{"norm_stats": {"state": {"q01": [0, 2, 1], "q99": [1, 1, 1]}, "actions": {"q01": [0], '
     '"q99": [1]}}}', r"state: q01 above q99 in dimensions \[1\] \(swapped"),
])
def test_openpi_statistics_that_are_not_openpis_are_refused_naming_the_file(tmp_path, text,
                                                                           reason):
    directory = openpi_dir(tmp_path, text)
    with pytest.raises(ValueError, match=reason) as error:
        load_openpi(directory)
    assert "norm_stats.json" in str(error.value)
