"""Real robots ship 720p cameras: three 1280x720 JPEG streams at 15 Hz and joint states at
100 Hz, replayed through camera_ingest with the default model in the same process
(`oxygen-ros run`), are published as observations, pair with their joint states, and
the 50 Hz commands keep their rate."""

import numpy as np
from graph_helpers import Probe

from oxygen_ros.ros.bag import DemoBagSpec, write_demo_bag

DURATION_S, CAMERA_HZ = 5.0, 15.0


def test_three_720p_jpeg_streams_and_100_hz_joint_states_with_the_model_in_process(
        tmp_path, processes, rclpy_context):
    bag = write_demo_bag(tmp_path / "hd", DemoBagSpec(
        duration_s=DURATION_S, camera_hz=CAMERA_HZ, joint_hz=100.0, width=1280, height=720,
        encoding="jpeg", dialogue=()))
    run = processes.python("-m", "oxygen_ros.cli", "run", "-p", "inference:dry_run:=false",
                           "-p", "inference:watchdog_ticks:=25")
    probe = Probe(rclpy_context)
    try:
        assert probe.spin(90.0, until=lambda: "oxygen_ros: inference" in probe.diagnostics), \
            "".join(run.lines)[-2000:]
        replay = processes.python("-m", "oxygen_ros.cli", "replay", str(bag), "--restamp",
                                  "--wait-for-subscribers", "30", "--delay", "0.5")
        assert probe.spin(60.0, until=lambda: replay.poll() is not None)
        probe.spin(1.5)                                  # the last diagnostics report
        ingest = probe.diagnostics["oxygen_ros: camera_ingest"][2]
        frames = int(DURATION_S * CAMERA_HZ)
        assert int(ingest["published"]) >= 0.95 * frames, ingest
        assert int(ingest["unpaired"]) == 0 and int(ingest["dropped"]) == 0, ingest
        assert int(ingest["conversion_errors"]) == 0, ingest
        times = np.array([t for t, _ in probe.commands])
        assert len(times) > 100, "no commands"
        steady = times[(times > times[0] + 1.0) & (times < times[-1] - 0.5)]
        assert np.diff(steady).max() < 0.1, np.diff(steady).max()
        assert probe.counter("inference", "internal_error") == 0
    finally:
        probe.close()
