"""bench-fleet's verdicts: a robot is at targets only when it is served, holds at most 2 %
of its commands, misses no deadline and has every request answered; the headline is, per
mode, the most robots kept at targets in one run and the largest N with all of them."""

from dataclasses import asdict

from oxygen_ros.bench.fleet import FleetRun, at_targets, line, result, robot_at_targets, table


def robot(**changes) -> dict:
    return {"commands_hz": 50.0, "fresh_commands_hz": 50.0, "held_command_fraction": 0.0, "deadline_misses": 0,
            "chunk_latency_ms_p50": 150.0, "chunk_latency_ms_max": 200.0, "chunk_age_ms": 150.0,
            "action_path_ms_p95": 160.0, "dialogue_answers": 3, "dialogue_endings": {"eos": 3},
            "dialogue_requests": 3,
            "answer_accuracy": 1.0, "memory_accuracy": 1.0, "action_error": 0.1,
            "refused": "", "times_shed": 0, "camera_killed": False} | changes


def test_each_target_is_needed():
    assert at_targets({"a": robot(), "b": robot(held_command_fraction=0.02)})
    assert at_targets({"a": robot(dialogue_endings={"eos": 2, "length": 1})})
    for bad in (dict(held_command_fraction=0.021), dict(deadline_misses=1),
                dict(refused="refused: 4 robots would miss their targets"),
                dict(dialogue_answers=2, dialogue_endings={"eos": 2}), dict(commands_hz=0.0),
                dict(dialogue_endings={"eos": 2, "timeout": 1}),
                dict(dialogue_endings={"eos": 1, "robot_refused": 2})):
        assert not at_targets({"a": robot(), "b": robot(**bad)}), bad


def test_the_headline_counts_robots_at_targets_per_mode():
    def run(mode, count, ok=True, path=160.0, rss=600, refused=0):
        per_robot = {f"robot_{i}": robot(action_path_ms_p95=path,
                                         deadline_misses=0 if ok else 2,
                                         refused="refused: numbers" if i >= count - refused
                                         else "") for i in range(count)}
        return FleetRun(mode, count, per_robot, rss_bytes=rss * 2**20,
                        robots_at_targets=sum(map(robot_at_targets, per_robot.values())),
                        at_targets=at_targets(per_robot))
    runs = [run("fleet", 1), run("separate", 1), run("fleet", 2), run("separate", 2, ok=False),
            run("fleet", 4, path=240.0, rss=700, refused=1),
            run("separate", 4, ok=False, rss=2400)]
    data = result(runs)
    assert data["max_robots_at_targets"] == {"fleet": 3, "separate": 1}
    assert data["largest_fleet_all_at_targets"] == {"fleet": 2, "separate": 1}
    assert data["fleet_vs_separate_robots"] == 3.0
    assert data["ratios"]["fleet_action_path_4_vs_1"] == 1.5
    assert abs(data["ratios"]["fleet_rss_4_vs_1"] - 700 / 600) < 1e-9
    assert data["ratios"]["separate_rss_4_vs_fleet_4"] == 2400 / 700
    assert data["runs"][0] == asdict(runs[0]) and len(data["runs"]) == 6
    assert "most robots at targets: fleet 3, separate 1" in table(data)


def test_a_killed_camera_run_speaks_for_the_others_and_not_for_the_headline():
    per_robot = {f"robot_{i}": robot(fresh_commands_hz=49.5 - i) for i in range(3)}
    per_robot["robot_3"] = robot(camera_killed=True, fresh_commands_hz=20.0, commands_hz=20.0,
                                 dialogue_answers=1, dialogue_endings={"eos": 1},
                                 answer_accuracy=0.0)
    # one of its 3 requests unanswered
    per_robot["robot_2"] |= dict(dialogue_answers=2, dialogue_endings={"eos": 2})
    killed = FleetRun("fleet", 4, per_robot, camera_killed_at_s=4.0,
                      robots_at_targets=3, at_targets=False)
    whole = FleetRun("fleet", 2, {"robot_0": robot(), "robot_1": robot()},
                     robots_at_targets=2, at_targets=True)
    data = result([whole, killed])
    assert data["max_robots_at_targets"]["fleet"] == 2       # the killed run is not counted
    assert data["camera_killed"] == {
        "robots": 4, "killed_at_s": 4.0, "others_fresh_commands_hz_min": 47.5,
        "others_at_targets": 2, "others": 3, "others_answers": 8, "others_requests": 9,
        "others_answer_accuracy": 1.0, "others_memory_accuracy": 1.0}
    assert "the other 3 kept ≥ 47.5 Hz fresh commands, 2/3 at targets, answers 8/9" in table(data)


def test_a_run_line_tells_refused_at_start_up_from_shed_at_run_time():
    per_robot = {"a": robot(), "b": robot(refused="refused: 3 robots would miss their targets"),
                 "c": robot(refused="shed at run time: its plan could not be kept fed",
                            times_shed=2), "d": robot(times_shed=1)}   # shed, served again
    text = line(FleetRun("fleet", 4, per_robot))
    assert "refused 1 at start-up, shed 2, answers 12/12" in text, text
