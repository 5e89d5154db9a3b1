"""The inference node as ROS 2 robot software expects it (real rclpy, separate processes):
a managed node driven through its lifecycle services, and dialogue as the Ask action."""

from graph_helpers import Lifecycle, Probe, ask_ready, executable, results, write_params
from lifecycle_msgs.msg import Transition
from rclpy.action import ActionClient
from std_msgs.msg import String

from oxygen_ros.action import Ask

CAMERAS = ["/cameras/base/image_raw", "/cameras/left_wrist/image_raw"]


def start_graph(processes, tmp_path, **inference):
    params = write_params(tmp_path / "params.yaml", inference=inference)
    ingest = processes.start(executable("camera_ingest"), "--ros-args", "--params-file", params)
    node = processes.start(executable("inference"), "--ros-args", "--params-file", params)
    camera = processes.python("-m", "oxygen_ros.ros.synthetic_camera", "--ros-args",
                              "-p", "rate_hz:=20.0", "-p", "width:=64", "-p", "height:=48",
                              "-p", f"camera_topics:={CAMERAS}")
    return ingest, node, camera


def test_lifecycle_transitions_gate_the_commands_and_load_the_weights_once(
        processes, tmp_path, rclpy_context):
    _, node, _ = start_graph(processes, tmp_path, autostart=False)
    probe = Probe(rclpy_context)
    lifecycle = Lifecycle(probe, node)
    state = lifecycle.state

    def transition(transition_id):
        assert lifecycle.transition(transition_id), "".join(node.lines)[-2000:]

    try:
        assert state() == "unconfigured"
        probe.spin(1.0)
        assert not probe.chunks and not probe.commands     # no model, nothing out

        transition(Transition.TRANSITION_CONFIGURE)
        assert state() == "inactive"
        assert probe.spin(20.0, until=lambda: len(probe.chunks) >= 5), "the engine never ran"
        assert not probe.commands                           # chunks yes, commands no

        transition(Transition.TRANSITION_ACTIVATE)
        assert state() == "active"
        assert probe.spin(10.0, until=lambda: len(probe.commands) >= 20)

        transition(Transition.TRANSITION_DEACTIVATE)
        assert state() == "inactive"
        probe.spin(1.0)      # what was published before the transition comes in (it queued)
        count = len(probe.commands)
        probe.spin(1.0)
        assert len(probe.commands) == count, "commands after deactivate"
        chunks = len(probe.chunks)
        assert probe.spin(5.0, until=lambda: len(probe.chunks) > chunks)   # engine goes on

        transition(Transition.TRANSITION_ACTIVATE)
        count = len(probe.commands)
        assert probe.spin(10.0, until=lambda: len(probe.commands) >= count + 20)
        transition(Transition.TRANSITION_DEACTIVATE)
        transition(Transition.TRANSITION_CLEANUP)
        assert state() == "unconfigured"
        chunks = len(probe.chunks)
        probe.spin(1.0)
        assert len(probe.chunks) == chunks                  # the engine has stopped
        log = "".join(node.lines)
        assert log.count("model preset tiny") == 1, log     # loaded once before cleanup
    finally:
        probe.close()


def ask(probe, client, node, question, max_tokens=0, cancel_after=None):
    """Send a goal; (accepted, feedback texts, result, status)."""
    feedback = []
    sent = client.send_goal_async(Ask.Goal(question=question, max_tokens=max_tokens),
                                  feedback_callback=lambda m: feedback.append(m.feedback))
    assert probe.spin(20.0, until=sent.done)
    handle = sent.result()
    if not handle.accepted:
        return False, [], None, None
    if cancel_after is not None:
        assert probe.spin(20.0, until=lambda: len(feedback) >= cancel_after)
        handle.cancel_goal_async()
    result, = results(probe, [handle], node)
    return True, feedback, result.result, result.status


def test_ask_streams_the_answer_of_the_topic_path_cancels_and_rejects_beyond_the_queue(
        processes, tmp_path, rclpy_context):
    # no answer ends early at the random model's EOS: the long ones run until cancelled
    ingest, node, camera = start_graph(processes, tmp_path, max_pending_requests=2,
                                       dialogue_max_tokens=12, stop_at_eos=False)
    probe = Probe(rclpy_context)
    client = ActionClient(probe.node, Ask, "/oxygen/ask")
    try:
        ask_ready(probe, [client], node)
        # the probe hears the observations too before they stop (under load its reader can
        # match camera_ingest's writer well after the inference node's chunks reach it)
        assert probe.spin(60.0, until=lambda: len(probe.chunks) >= 3
                          and len(probe.observations) >= 3)
        # no new observations: both paths read the same newest prefix
        processes.stop(camera, ingest)
        # once the watchdog says stale no frame starts; one still running ends meanwhile
        assert probe.spin(30.0, until=lambda: probe.diagnostics.get(
            "oxygen_ros: inference", (0, "", {}))[2].get("watchdog") == "stale")
        probe.spin(1.0)

        accepted, feedback, result, status = ask(probe, client, node, "what do you see?")
        assert accepted and status == 4 and result.finish_reason == "length"  # SUCCEEDED
        # feedback and the result travel apart, and rclpy's client forgets a goal's feedback
        # callback once its result is in: what streamed is the answer's start, in order
        probe.spin(1.0)
        assert result.answer.startswith("".join(f.text for f in feedback)), \
            (feedback, result.answer)
        assert [f.seq for f in feedback] == list(range(len(feedback)))
        probe.requests.publish(String(data="what do you see?"))
        assert probe.spin(20.0, until=lambda: any(m.final for m in probe.dialogue))
        topic = [m for m in probe.dialogue if m.request_id == 1]
        assert "".join(m.text for m in topic) == result.answer     # the same answer
        assert topic[-1].finish_reason == result.finish_reason
        # both are stamped with the observation they read: the newest frame's, which is the
        # newest published chunk's unless that frame ended after the watchdog's stop (its
        # chunk withheld, counted chunk_after_stop; its prefix still the newest)
        read, newest = result.observation_stamp, probe.chunks[-1].header.stamp
        assert read == newest or (
            (read.sec, read.nanosec) > (newest.sec, newest.nanosec)
            and probe.counter("inference", "chunk_after_stop") >= 1), (read, newest)
        assert all(m.header.stamp == read for m in topic)
        # to the nanosecond: a client can look up the frame an answer or a chunk is about
        # (the newest observations: the probe's queue keeps the last 10 when it falls behind)
        seen = {(m.header.stamp.sec, m.header.stamp.nanosec) for _, m in probe.observations}
        assert (read.sec, read.nanosec) in seen, (read, sorted(seen)[-3:])
        assert (newest.sec, newest.nanosec) in seen, (newest, sorted(seen)[-3:])

        pages = lambda: int(probe.diagnostics["oxygen_ros: inference"][2]["kv_pages_in_use"])  # noqa: E731
        probe.spin(1.2)
        idle_pages = pages()
        accepted, feedback, result, status = ask(probe, client, node, "tell me a long story",
                                                 max_tokens=400, cancel_after=2)
        assert accepted and status == 5 and result.finish_reason == "cancelled"  # CANCELED
        assert 2 <= len(feedback) and len(result.answer) < 400
        assert probe.spin(5.0, until=lambda: pages() == idle_pages), (pages(), idle_pages)

        # the queue holds two requests: further goals are rejected at once, and counted
        long_goals = [client.send_goal_async(Ask.Goal(question=f"story {i}", max_tokens=400))
                      for i in range(4)]
        assert probe.spin(20.0, until=lambda: all(g.done() for g in long_goals))
        accepted = [g.result().accepted for g in long_goals]
        assert accepted == [True, True, False, False], accepted
        assert probe.spin(3.0, until=lambda: probe.counter("inference", "rejected_goals") == 2)
        handles = [g.result() for g in long_goals if g.result().accepted]
        for handle in handles:
            handle.cancel_goal_async()
        probe.spin(1.0)
    finally:
        client.destroy()
        probe.close()
