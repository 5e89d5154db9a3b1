"""Every dialogue request path has a stated capacity and answers every request inside it
(real rclpy, separate processes): more Ask clients at once than max_pending_requests are
each accepted or rejected, the accepted all finish, and the counters add up; a goal still
decoding at Ctrl-C gets its result (finish_reason shutdown, stamped with the observation it
read) before the process exits, and stays ACCEPTED while its answer streams;
request ids go on counting across a cleanup and configure; a goal whose acceptance cannot
reach its client still runs, frees its place and is counted as a lost response; a request
before any usable observation says in the log why it waits (no observation, or how many
were dropped as bad input), and ends timeout."""

import os
import signal

from graph_helpers import Lifecycle, Probe, ask_ready, executable, results, write_params
from lifecycle_msgs.msg import Transition
from oxygen_ros.msg import Observation
from rclpy.action import ActionClient
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String
from test_bad_input import observation
from test_lifecycle_and_ask import start_graph

from oxygen_ros.action import Ask
from oxygen_ros.ros import qos
from oxygen_ros.ros.dialogue_router import ask_client_qos

LIMIT = 8
UNKNOWN, ACCEPTED, ABORTED = 0, 1, 6     # action_msgs/GoalStatus
RESULT_ASKED_AGAIN_AFTER_S = 12.0   # past Kilted rclpy's default result_timeout (10 s)


def test_more_goals_at_once_than_the_limit_are_all_answered_and_counted(
        processes, tmp_path, rclpy_context):
    _, node, _ = start_graph(processes, tmp_path, max_pending_requests=LIMIT,
                             stop_at_eos=False)
    probe = Probe(rclpy_context)
    clients = [ActionClient(probe.node, Ask, "/oxygen/ask", **ask_client_qos(3 * LIMIT))
               for _ in range(3 * LIMIT)]
    try:
        ask_ready(probe, clients, node)
        assert probe.spin(60.0, until=lambda: len(probe.chunks) >= 3)
        sent = [c.send_goal_async(Ask.Goal(question=f"question {i}", max_tokens=40))
                for i, c in enumerate(clients)]
        assert probe.spin(60.0, until=lambda: all(g.done() for g in sent)), \
            (f"{sum(not g.done() for g in sent)} of {len(sent)} goals never answered",
             probe.counter("inference", "lost_responses"), "".join(node.lines)[-2000:])
        handles = [g.result() for g in sent if g.result().accepted]
        rejected = len(sent) - len(handles)
        assert LIMIT <= len(handles) < len(sent) and rejected > 0, len(handles)
        answers = [r.result for r in results(probe, handles, node, timeout=120.0)]
        reasons = [answer.finish_reason for answer in answers]
        assert reasons == ["length"] * len(handles), reasons
        assert all(len(answer.answer) > 0 for answer in answers)

        def counted():
            return (probe.counter("inference", "rejected_goals"),
                    probe.counter("inference", "dialogue_requests"),
                    probe.counter("inference", "dialogue_length"))
        expected = (rejected, len(handles), len(handles))
        assert probe.spin(10.0, until=lambda: counted() == expected), (counted(), expected)
        assert sum(expected[:2]) == len(sent)
    finally:
        for client in clients:
            client.destroy()
        probe.close()


def test_a_goal_whose_acceptance_cannot_reach_its_client_still_runs_and_frees_its_place(
        processes, tmp_path, rclpy_context):
    _, node, _ = start_graph(processes, tmp_path, max_pending_requests=2, stop_at_eos=False)
    probe = Probe(rclpy_context)
    # a client whose answer reader asks for transient-local durability matches no writer of
    # the server's (volatile): the server accepts its goals and cannot tell it so (each a
    # lost response in /diagnostics), runs them all the same, and their places come back
    # when their answers end
    deaf = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL)
    deaf_client = ActionClient(probe.node, Ask, "/oxygen/ask", goal_service_qos_profile=deaf)
    client = ActionClient(probe.node, Ask, "/oxygen/ask")
    try:
        # (not ask_ready: the deaf client's wait_for_server never returns True, as rmw
        # counts its answer side)
        assert client.wait_for_server(timeout_sec=60.0), "".join(node.lines)[-2000:]
        assert probe.spin(60.0, until=lambda: probe.counter("inference", "ask_clients") == 2)
        assert probe.spin(60.0, until=lambda: len(probe.chunks) >= 3)
        unanswered = [deaf_client.send_goal_async(Ask.Goal(question=f"deaf {i}", max_tokens=5))
                      for i in range(2)]
        ran = lambda: probe.counter("inference", "dialogue_length")  # noqa: E731
        lost = lambda: probe.counter("inference", "lost_responses")  # noqa: E731
        assert probe.spin(60.0, until=lambda: ran() == 2 and lost() == 2
                          and probe.counter("inference", "pending_dialogue") == 0), \
            (ran(), lost(), "".join(node.lines)[-2000:])
        log = "".join(node.lines)
        assert log.count("failed to send response (timeout)") == 1, log[-2000:]  # the first
        assert not any(g.done() for g in unanswered)
        sent = client.send_goal_async(Ask.Goal(question="and me?", max_tokens=5))
        assert probe.spin(60.0, until=sent.done) and sent.result().accepted
        result, = results(probe, [sent.result()], node)
        assert result.result.finish_reason == "length"
        # a client that heard nothing can ask for the result again, long after it ended
        probe.spin(RESULT_ASKED_AGAIN_AFTER_S)
        again, = results(probe, [sent.result()], node)
        assert (again.status, again.result) == (result.status, result.result), again
    finally:
        deaf_client.destroy()
        client.destroy()
        probe.close()


def test_a_goal_decoding_at_ctrl_c_gets_its_result_with_finish_reason_shutdown(
        processes, tmp_path, rclpy_context):
    _, node, _ = start_graph(processes, tmp_path, stop_at_eos=False)
    probe = Probe(rclpy_context)
    client = ActionClient(probe.node, Ask, "/oxygen/ask")
    try:
        ask_ready(probe, [client], node)
        assert probe.spin(60.0, until=lambda: len(probe.chunks) >= 3)
        feedback = []
        sent = client.send_goal_async(Ask.Goal(question="tell me a long story", max_tokens=5000),
                                      feedback_callback=feedback.append)
        assert probe.spin(60.0, until=sent.done) and sent.result().accepted
        handle = sent.result()
        result = handle.get_result_async()
        assert probe.spin(60.0, until=lambda: len(feedback) >= 3)
        # it streams while ACCEPTED: no execute coroutine waits in the node's executor
        assert probe.spin(60.0, until=lambda: handle.status != UNKNOWN)
        assert handle.status == ACCEPTED, handle.status
        os.killpg(node.pid, signal.SIGINT)          # Ctrl-C
        assert probe.spin(60.0, until=result.done), "".join(node.lines)[-2000:]
        answer = result.result().result
        assert answer.finish_reason == "shutdown" and result.result().status == ABORTED
        # the answer read an observation: its stamp, not zero
        now = probe.node.get_clock().now().nanoseconds * 1e-9
        stamp = answer.observation_stamp.sec + answer.observation_stamp.nanosec * 1e-9
        assert now - 60.0 < stamp < now, (stamp, now)
        # the result is the whole answer; feedback comes in order, and a piece the client's
        # keep-last queue dropped under load shows as a gap in seq
        seqs = [f.feedback.seq for f in feedback]
        assert seqs == sorted(set(seqs)), seqs
        gapless = ""
        for index, piece in enumerate(feedback):
            if piece.feedback.seq != index:
                break
            gapless += piece.feedback.text
        assert answer.answer.startswith(gapless), (gapless, answer.answer)
        position = 0                    # and every piece received is the answer's, in order
        for piece in feedback:
            found = answer.answer.find(piece.feedback.text, position)
            assert found >= 0, (piece.feedback.seq, piece.feedback.text, answer.answer)
            position = found + len(piece.feedback.text)
        output = processes.finish(node, timeout=30)
        assert node.returncode == 0 and "Traceback" not in output, output[-2000:]
        assert "shutting down: 1 open Ask goal(s) end with finish_reason shutdown" in output
    finally:
        client.destroy()
        probe.close()


def test_request_ids_go_on_counting_across_cleanup_and_configure(
        processes, tmp_path, rclpy_context):
    _, node, _ = start_graph(processes, tmp_path, autostart=False, stop_at_eos=False)
    probe = Probe(rclpy_context)
    lifecycle = Lifecycle(probe, node)
    client = ActionClient(probe.node, Ask, "/oxygen/ask")

    def transition(transition_id):
        assert lifecycle.transition(transition_id), "".join(node.lines)[-3000:]

    def ask_both():
        """A topic request and a goal: (topic request id, goal request id)."""
        finals = len([m for m in probe.dialogue if m.final])
        probe.requests.publish(String(data="what do you see?"))
        assert probe.spin(60.0, until=lambda: len([m for m in probe.dialogue if m.final])
                          > finals)
        topic_id = [m for m in probe.dialogue if m.final][-1].request_id
        ask_ready(probe, [client], node)
        sent = client.send_goal_async(Ask.Goal(question="and now?"))
        assert probe.spin(60.0, until=sent.done) and sent.result().accepted
        result, = results(probe, [sent.result()], node)
        return topic_id, result.result.request_id

    try:
        ids = []
        for _ in range(2):
            transition(Transition.TRANSITION_CONFIGURE)
            assert probe.spin(60.0, until=lambda: len(probe.chunks) >= 3)
            ids.append(ask_both())
            transition(Transition.TRANSITION_CLEANUP)
            probe.chunks.clear()
        assert [topic for topic, _ in ids] == [1, 2]
        goal_ids = [goal for _, goal in ids]
        assert goal_ids[1] > goal_ids[0], goal_ids
    finally:
        client.destroy()
        probe.close()


def test_a_request_before_any_observation_says_why_it_waits_and_ends_timeout(
        processes, tmp_path, rclpy_context):
    """No observation at all: check the cameras; observations dropped as bad input (joint
    names the node does not know): how many, and where the reason is."""
    params = write_params(tmp_path / "params.yaml", inference={"request_timeout_s": 2.0})
    node = processes.start(executable("inference"), "--ros-args", "--params-file", params)
    probe = Probe(rclpy_context)                     # no camera_ingest: no observation
    observations = probe.node.create_publisher(Observation, "/oxygen/observation",
                                               qos.RELIABLE)

    def ask_until_timeout(finals: int) -> str:
        probe.requests.publish(String(data="what do you see?"))
        assert probe.spin(60.0, until=lambda: sum(c.final for c in probe.dialogue) > finals), \
            "".join(node.lines)[-2000:]
        assert [c.finish_reason for c in probe.dialogue if c.final] == ["timeout"] * (finals + 1)
        # it read no observation: its stamp says so (zero), not a time no frame has
        assert {(c.header.stamp.sec, c.header.stamp.nanosec) for c in probe.dialogue} == {(0, 0)}
        return "".join(node.lines)

    try:
        assert probe.spin(60.0, until=lambda: probe.requests.get_subscription_count() > 0
                          and observations.get_subscription_count() > 0)
        assert probe.spin(60.0, until=lambda: "oxygen_ros: inference" in probe.diagnostics)
        log = ask_until_timeout(0)
        assert ("a dialogue request waits: no observation has been usable yet to answer about "
                "(check camera_ingest and its camera topics)") in log, log[-2000:]
        assert "ends 'timeout' after request_timeout_s (2 s)" in log, log[-2000:]
        for _ in range(3):
            observations.publish(observation(probe, names=["elbow", "wrist"]))
        assert probe.spin(30.0, until=lambda: probe.counter("inference",
                                                            "dropped_observations") == 3)
        assert probe.counter("inference", "joint_names_mismatch") == 3
        probe.spin(6.0)               # past the 5 s the waiting line is throttled for
        log = ask_until_timeout(1)
        assert ("no observation has been usable yet to answer about (3 arrived and were "
                "dropped as bad input (the log and /diagnostics name why))") in log, log[-2000:]
    finally:
        probe.close()
