"""Real robots ship 720p cameras: three 1280x720 JPEG streams at 15 Hz and joint states at
100 Hz, replayed through camera_ingest beside the default model (`oxygen-ros run`), are
published as observations, each with the joint state of its instant, and the 50 Hz command
timer keeps its period."""

from graph_helpers import Probe

from oxygen_ros.ros.stamps import stamp_ns
from oxygen_ros.ros.demo_bag import DemoBagSpec, write_demo_bag
from oxygen_ros.ros.node_parameters import ingest_specs

DURATION_S, CAMERA_HZ = 5.0, 15.0


def test_three_720p_jpeg_streams_and_100_hz_joint_states_beside_the_model(
        tmp_path, processes, rclpy_context):
    bag = write_demo_bag(tmp_path / "hd", DemoBagSpec(
        duration_s=DURATION_S, camera_hz=CAMERA_HZ, joint_hz=100.0, width=1280, height=720,
        encoding="jpeg", dialogue=()))
    run = processes.python("-m", "oxygen_ros.cli", "run", "-p", "inference:dry_run:=false",
                           "-p", "inference:watchdog_ticks:=150")
    probe = Probe(rclpy_context)
    try:
        assert probe.spin(90.0, until=lambda: "oxygen_ros: inference" in probe.diagnostics), \
            "".join(run.lines)[-2000:]
        replay = processes.python("-m", "oxygen_ros.cli", "replay", str(bag), "--restamp",
                                  "--wait-for-subscribers", "30", "--delay", "0.5")
        assert probe.spin(60.0, until=lambda: len(probe.commands) > 50 and probe.observations), \
            "no commands"
        assert probe.spin(60.0, until=lambda: replay.poll() is not None)
        probe.spin(1.5)                                  # the last diagnostics report
        ingest = probe.diagnostics["oxygen_ros: camera_ingest"][2]
        frames = int(DURATION_S * CAMERA_HZ)
        # a frame that finds no joint state within sync_slop_s is given up (`unpaired`), as it
        # should be; a loaded CI machine gave up 1 of 75, so that count is part of the 5 %
        # allowed here, not asserted 0: the pairing itself is checked below
        assert int(ingest["published"]) >= 0.95 * frames, ingest
        assert int(ingest["dropped"]) == 0, ingest
        assert int(ingest["conversion_errors"]) == 0, ingest
        # the node's own account of its timer, each second while the cameras streamed, by the
        # replay's stamps (a subscriber's receipt times also hold its own scheduling: beside a
        # busy core the probe here saw 0.7 s gaps while the node's longest was 44 ms); the
        # first 2 s hold the first chunks
        first_frame = stamp_ns(probe.observations[0][1].header.stamp)
        reports = probe.reports_stamped("inference", first_frame + 2_000_000_000,
                                        first_frame + round(DURATION_S * 1e9))
        assert len(reports) >= 2, probe.reports_of("inference")
        # a 3 s watchdog: the decode of three 720p streams on a busy core can hold the
        # observations back past the default 0.5 s, which stops the commands (as it should)
        assert probe.counter("inference", "watchdog_trips") == 0, "".join(run.lines)[-3000:]
        assert max(float(r["command_gap_ms_max"]) for r in reports) < 100.0, reports
        assert min(float(r["action_rate_hz"]) for r in reports) >= 45.0, reports
        assert len(probe.commands) > 100
        assert len(probe.observations) > frames // 2
        slop_ns = round(ingest_specs()["sync_slop_s"].default * 1e9)
        for _, observation in probe.observations:
            assert len(observation.state.position) > 0
            assert abs(stamp_ns(observation.state.header.stamp)
                       - stamp_ns(observation.header.stamp)) <= slop_ns
        assert probe.counter("inference", "internal_error") == 0, "".join(run.lines)[-3000:]
    finally:
        probe.close()
