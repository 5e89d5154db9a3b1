"""A generated bag replayed through camera_ingest and inference (separate processes) gives
per-step actions at the control rate, chunks, streamed dialogue, memory and diagnostics."""

from graph_helpers import Probe, executable, write_params

from oxygen_ros.ros.stamps import stamp_ns
from oxygen_ros.ros.demo_bag import DemoBagSpec, write_demo_bag

BAG_S = 8.0


def test_replayed_bag_drives_actions_dialogue_memory_and_diagnostics(tmp_path, processes,
                                                                      rclpy_context):
    bag = write_demo_bag(tmp_path / "bag", DemoBagSpec(
        duration_s=BAG_S, camera_hz=20.0, encoding="jpeg", width=64, height=48, cameras=2,
        dialogue=((1.0, "what do you see?"), (2.5, "and now?"))))
    params = write_params(tmp_path / "params.yaml", ingest={"camera_topics": [
        "/cameras/base/image_raw/compressed", "/cameras/left_wrist/image_raw/compressed"]})
    ingest = processes.start(executable("camera_ingest"), "--ros-args", "--params-file", params)
    inference = processes.start(executable("inference"), "--ros-args", "--params-file", params)
    probe = Probe(rclpy_context)
    assert probe.spin(30.0, until=lambda: "oxygen_ros: inference" in probe.diagnostics), \
        "inference node did not come up"
    replay = processes.python("-m", "oxygen_ros.cli", "replay", str(bag), "--restamp",
                              "--wait-for-subscribers", "10", "--delay", "0.5")
    assert probe.spin(15.0, until=lambda: len(probe.commands) > 50 and probe.observations), \
        "no actions"
    # 50 Hz +- 10 % in every report (each about the second before its stamp) from a second
    # after the first that saw commands (when the first chunk comes is the loaded
    # machine's, not the rate's) to 0.5 s before the bag's end: its stamps are the
    # replay's clock (--restamp), which the reports share
    first_frame = stamp_ns(probe.observations[0][1].header.stamp)
    end = first_frame + round((BAG_S - 0.5) * 1e9)
    probe.report_after("inference", end)
    reports = [(stamp, float(values["action_rate_hz"]))
               for stamp, values in probe.reports_of("inference") if first_frame < stamp <= end]
    started = next(stamp for stamp, rate in reports if rate > 0)
    rates = [rate for stamp, rate in reports if stamp >= started + 1_000_000_000]
    assert len(rates) >= 3 and all(45.0 <= rate <= 55.0 for rate in rates), reports
    assert len(probe.chunks) >= 10
    chunk = probe.chunks[-1]
    assert (chunk.horizon, chunk.action_dim) == (4, 6) and len(chunk.actions) == 24
    probe.spin(6.0, until=lambda: len({m.request_id for m in probe.dialogue if m.final}) == 2
               and probe.memory)
    assert replay.wait(timeout=20) == 0
    by_request = {}
    for message in probe.dialogue:
        by_request.setdefault(message.request_id, []).append(message)
    assert len(by_request) == 2
    for messages in by_request.values():
        assert [m.seq for m in messages] == list(range(len(messages)))
        assert [m.final for m in messages] == [False] * (len(messages) - 1) + [True]
        assert "".join(m.text for m in messages)
    assert probe.memory and probe.memory[0].text
    assert probe.memory[0].window_end.sec >= probe.memory[0].window_start.sec
    level, _, values, _ = probe.diagnostics["oxygen_ros: inference"]
    assert float(values["action_rate_hz"]) > 40 and int(values["frames"]) > 10
    assert int(values["kv_pages_total"]) == 512 and "tokens_per_s" in values
    assert int(values["kv_bytes_peak"]) > 0
    owners = {k: int(v) for k, v in values.items()
              if k.startswith("kv_bytes_") and k not in ("kv_bytes_in_use", "kv_bytes_peak")}
    assert sum(owners.values()) == int(values["kv_bytes_in_use"])   # bytes held per owner
    assert "oxygen_ros: camera_ingest" in probe.diagnostics
    assert ingest.poll() is None and inference.poll() is None
    probe.close()
