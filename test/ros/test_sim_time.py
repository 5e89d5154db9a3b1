"""Nodes on use_sim_time keep reporting on /diagnostics while /clock stands still (a bag
that ended or is paused, a halted simulator): the diagnostics run on the host's steady
clock and say what matters then, that no observation is fresh (separate processes)."""

from graph_helpers import Probe, executable, write_params


def test_diagnostics_keep_coming_while_the_simulated_clock_stands_still(
        tmp_path, processes, rclpy_context):
    params = write_params(tmp_path / "params.yaml")
    for name in ("camera_ingest", "inference"):   # no /clock is ever published: time 0
        processes.start(executable(name), "--ros-args", "--params-file", params,
                        "-p", "use_sim_time:=true")
    probe = Probe(rclpy_context)
    statuses = ("oxygen_ros: inference", "oxygen_ros: camera_ingest")
    assert probe.spin(90.0, until=lambda: all(len(probe.messages.get(name, ())) >= 3
                                              for name in statuses)), probe.messages.keys()
    level, message, values, _ = probe.diagnostics["oxygen_ros: inference"]
    assert level == 2 and message == "no fresh observations: actions stopped", message
    level, message, values, _ = probe.diagnostics["oxygen_ros: camera_ingest"]
    assert level == 1 and values["silent_cameras"] == "2", message
    assert message == "no frames for 2 s on /cameras/base/image_raw, /cameras/left_wrist/image_raw"
    probe.close()
