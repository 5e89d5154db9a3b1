"""DialogueRouter: dialogue between ROS clients and the engine, each answer to the client
that asked. Two ways in:

- the String request topic: request ids 1, 2, 3, ... in arrival order over the node's
  lifetime (a reconfigure goes on counting), of its own (action goals do not use them up);
  the answer streams as DialogueChunk messages with that id;
- the Ask action: feedback carries the text as it decodes, the result the whole answer and
  its finish reason; cancelling ends the answer at once and frees its KV pages. A goal
  stays ACCEPTED while its answer streams and executes when the answer has ended, its
  result at hand: rclpy's executor polls every waiting execute coroutine whenever anything
  wakes it, so 64 goals awaiting their answers starved the engine thread (docs/requests.md,
  tools/ask_flood.py).

One router per robot (its topic and Ask action; the requests are about its observations).

Capacity: the engine holds max_pending_requests dialogue requests per robot (waiting,
running or not yet taken in). An action goal beyond it is rejected, a topic request ends at
once with finish_reason queue_full; both are counted (rejected_goals, rejected_requests).
An accepted goal holds its place in the engine from acceptance until its answer ends, so
neither goals accepted at once nor topic requests in between can take it. The action's
goal, cancel and result services and its feedback queue hold
ask_queue_depth(max_pending_requests) messages each, so that many clients asking at once
are all answered (accepted or rejected); a finished goal's result can be asked for
again for RESULT_KEPT_S; the request topic holds 1000.

Shutdown: wind_down() ends every open goal with finish_reason shutdown (aborted) and
rejects new ones; the node keeps spinning until winding_down() is False so the results
reach their clients before the executor stops.
"""

import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Iterator, Optional

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from oxygen_ros.action import Ask
from oxygen_ros.engine.request import COMPLETED
from oxygen_ros.ros import conversions, stamps

MAX_REQUEST_CHARS = 4096   # longer request text is cut before tokenization (and counted)
ASK_QUEUE_FACTOR, ASK_QUEUE_MIN, ASK_QUEUE_MAX = 4, 10, 4096
WAIT_LOG_EVERY_S = 5.0    # a robot's "a dialogue request waits" line, at most this often
# how long a finished goal's result can be asked for again: Jazzy's rclpy default; Kilted's
# (10 s) left a client whose first result response was lost with status UNKNOWN
RESULT_KEPT_S = 900


def ask_queue_depth(max_pending_requests: int) -> int:
    """Messages each Ask service and the feedback queue hold: the accepted goals plus room
    for three times as many to be answered with a rejection, within DDS-friendly bounds."""
    return min(ASK_QUEUE_MAX, max(ASK_QUEUE_MIN, ASK_QUEUE_FACTOR * max_pending_requests))


def ask_qos(max_pending_requests: int) -> dict:
    """ActionServer keyword arguments: reliable queues ask_queue_depth deep (rclpy's service
    default is 10: 50 clients asking at once left 39 with no answer at all)."""
    profile = _reliable(ask_queue_depth(max_pending_requests))
    return dict(goal_service_qos_profile=profile, result_service_qos_profile=profile,
                cancel_service_qos_profile=profile, feedback_pub_qos_profile=profile)


def ask_client_qos(clients_at_once: int) -> dict:
    """ActionClient keyword arguments for an Ask client among `clients_at_once` asking
    together: a service's answers reach every client's reader and each keeps only its own,
    so a reader rclpy's default 10 deep lost answers meant for it (24 clients at once: 5-10
    never answered, with no error on either side)."""
    profile = _reliable(ask_queue_depth(clients_at_once))
    return dict(goal_service_qos_profile=profile, result_service_qos_profile=profile,
                cancel_service_qos_profile=profile, feedback_sub_qos_profile=profile)


def _reliable(depth: int) -> QoSProfile:
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth,
                      reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE)


def _goal_id(goal_handle) -> bytes:
    return bytes(goal_handle.goal_id.uuid)


@dataclass
class _Goal:
    handle: object
    request_id: int = 0
    reason: str = ""            # the finish reason, once the answer has ended
    pieces: list = field(default_factory=list)
    seq: int = 0
    stamp_ns: int = 0           # the observation the answer is about (ROS time; 0: none)
    missing_cameras: tuple = ()  # the configured cameras that observation lacked
    # a piece and the end, on different threads: no piece that the result lacks
    lock: threading.Lock = field(default_factory=threading.Lock)


class DialogueRouter:
    def __init__(self, node, engine, action_name: str, publisher, counters, bad_input,
                 topic_ids: Optional[Iterator[int]] = None, server=None, robot: str = ""):
        self.node, self.engine, self.robot = node, engine, robot
        self.publisher, self.counters, self.bad_input = publisher, counters, bad_input
        self._lock = threading.Lock()
        self._topic_ids = topic_ids or itertools.count(1)
        self._routes: dict[int, object] = {}   # engine request id -> topic id (int) or _Goal
        self._held = 0                         # goals accepted, not yet submitted
        self._cancelled_early: set[bytes] = set()   # goal ids cancelled before submission
        self._open = 0                         # goals taken in, result not yet handed over
        self._ended: dict[bytes, _Goal] = {}   # goal id -> answer ended, not yet executed
        self._closing = False
        self._wait_logged = -WAIT_LOG_EVERY_S     # when "a dialogue request waits" was said
        self.server = self._bind(server, (action_name, engine.config.max_pending_requests))

    def _bind(self, server, key: tuple):
        """The Ask server of an earlier configure, its callbacks now ours, if its name and
        depth still fit; else a new one. Reused because rclpy 9 cannot destroy an action
        server safely while the executor waits (the node died with 'action server pointer
        is invalid' in one of a few lifecycle cleanups) and each new one costs memory."""
        if server is not None and server.oxygen_key == key:
            server.register_goal_callback(self._on_goal)
            server.register_cancel_callback(self._on_cancel)
            server.register_execute_callback(self._execute)
            server.register_handle_accepted_callback(self.on_accepted)
            return server
        if server is not None:
            server.destroy()
        server = ActionServer(self.node, Ask, key[0], execute_callback=self._execute,
                              handle_accepted_callback=self.on_accepted,
                              goal_callback=self._on_goal, cancel_callback=self._on_cancel,
                              callback_group=ReentrantCallbackGroup(),
                              result_timeout=RESULT_KEPT_S, **ask_qos(key[1]))
        server.oxygen_key = key
        return server

    def clients(self) -> int:
        """Ask clients this node has discovered (a goal sent before the server has matched
        its client may get no response from Fast DDS: see docs/requests.md)."""
        return self.node.count_clients(f"{self.server.oxygen_key[0]}/_action/send_goal")

    def destroy(self) -> None:
        """The engine is going away: open goals end, new ones are rejected until the next
        router takes the server over (the node destroys it last)."""
        self.wind_down()
        self.node = self.engine = self.publisher = None   # no cycle keeps them alive

    def wind_down(self) -> int:
        """Shutting down: new goals are rejected, open ones end (finish_reason shutdown);
        how many ended (counting those accepted but not yet taken in)."""
        with self._lock:
            self._closing = True
            held = self._held
        ended = self.abandon_all() + held
        if ended:
            self.node.get_logger().info(f"shutting down: {ended} open Ask goal(s) end with "
                                        "finish_reason shutdown")
        return ended

    def winding_down(self) -> bool:
        """Some goal's result is not yet handed to the action server."""
        with self._lock:
            return self._open > 0

    # -- in ----------------------------------------------------------------------------
    def _cut(self, text: str) -> Optional[str]:
        if conversions.is_blank(text):
            self.bad_input("empty_request", "dialogue request without text ignored")
            return None
        if len(text) > MAX_REQUEST_CHARS:
            self.bad_input("truncated_request", f"{len(text)} characters cut to "
                                                f"{MAX_REQUEST_CHARS}")
            return text[:MAX_REQUEST_CHARS]
        return text

    def on_request(self, msg) -> None:
        """A String request from the topic."""
        text = self._cut(msg.data)
        if text is None:
            return
        with self._lock:  # routed before the engine can answer it
            topic_id = next(self._topic_ids)
            self._routes[self.engine.submit_dialogue(text, robot=self.robot)] = topic_id
        self.counters["dialogue_requests"] += 1
        self.node.get_logger().debug(f"dialogue request {topic_id}: {text[:60]!r}")
        self._before_any_observation()

    def _on_goal(self, goal) -> GoalResponse:
        blank = conversions.is_blank(goal.question)
        with self._lock:
            if not self._closing and not blank and self.engine.hold_place(self.robot):
                self._held += 1
                return GoalResponse.ACCEPT
            if self._closing or not blank:
                self.counters["rejected_goals"] += 1
                return GoalResponse.REJECT
        self.bad_input("empty_request", "Ask goal without a question rejected")
        return GoalResponse.REJECT

    def _on_cancel(self, goal_handle) -> CancelResponse:
        with self._lock:
            request_id = next((i for i, route in self._routes.items()
                               if isinstance(route, _Goal) and route.handle is goal_handle), None)
            if request_id is None:     # accepted, not taken in yet: cancelled when it is
                self._cancelled_early.add(_goal_id(goal_handle))
        if request_id is not None and not self._closing:
            self.engine.cancel_dialogue(request_id)
            self.node.wake_engine()
        return CancelResponse.ACCEPT

    def on_accepted(self, goal_handle) -> None:
        """An accepted goal goes to the engine; its execution is held back until its answer
        has ended (see the module docstring)."""
        goal = _Goal(goal_handle)
        question = self._cut(goal_handle.request.question) or " "
        with self._lock:
            self._held -= 1
            self._open += 1
            cancelled = _goal_id(goal_handle) in self._cancelled_early
            self._cancelled_early.discard(_goal_id(goal_handle))
            closing = self._closing
            if not closing:   # routed before the engine can answer it
                goal.request_id = self.engine.submit_dialogue(
                    question, goal_handle.request.max_tokens or None, robot=self.robot,
                    held=True)
                self._routes[goal.request_id] = goal
                self.counters["dialogue_requests"] += 1
                if cancelled:
                    self.engine.cancel_dialogue(goal.request_id)
        if closing:           # accepted just before the shutdown began
            if self.engine is not None:
                self.engine.give_back_place(self.robot)
            self.counters["dialogue_shutdown"] += 1
            self._end(goal, "shutdown")
        else:
            self.node.wake_engine()
            self._before_any_observation()

    def _before_any_observation(self) -> None:
        """Say why an answer does not come: no observation has arrived yet to answer about
        (it waits for one, and ends `timeout` after request_timeout_s); once in
        WAIT_LOG_EVERY_S for this robot (each robot its own line), not for a refused robot,
        whose requests end robot_refused at once."""
        robot = self.engine.robot_of(self.robot)
        now = time.monotonic()
        if robot.observed or robot.refused or now < self._wait_logged + WAIT_LOG_EVERY_S:
            return
        self._wait_logged = now
        whose = f" of robot {self.robot}" if self.robot else ""
        timeout = self.engine.config.request_timeout_s
        dropped = self.counters["dropped_observations"]
        why = (f"{dropped} arrived and were dropped as bad input (the log and /diagnostics "
               "name why)" if dropped else "check camera_ingest and its camera topics")
        self.node.get_logger().warning(
            f"a dialogue request waits: no observation{whose} has been usable yet to "
            f"answer about ({why}); "
            + (f"it ends 'timeout' after request_timeout_s ({timeout:g} s) if none comes"
               if timeout else "it waits until one comes (request_timeout_s 0)"))

    def _end(self, goal: _Goal, reason: str) -> None:
        """The answer has ended: the goal executes now and its result is at hand."""
        with goal.lock:
            goal.reason = reason
        with self._lock:
            self._ended[_goal_id(goal.handle)] = goal
        try:   # this router's callback, also if a reconfigure has bound the server anew
            goal.handle.execute(self._execute)
        except Exception:  # noqa: BLE001 - the server went away (cleanup): nobody to tell
            with self._lock:
                self._ended.pop(_goal_id(goal.handle), None)
                self._open -= 1

    def _execute(self, goal_handle) -> Ask.Result:
        with self._lock:
            goal = self._ended.pop(_goal_id(goal_handle))
        try:
            if goal.reason == "cancelled" and goal_handle.is_cancel_requested:
                goal_handle.canceled()
            elif goal.reason in COMPLETED:
                goal_handle.succeed()
            else:
                goal_handle.abort()
        except Exception:  # noqa: BLE001 - the server went away (cleanup): nobody to tell
            pass
        finally:
            with self._lock:
                self._open -= 1
                self._cancelled_early.discard(_goal_id(goal_handle))   # cancelled as it ended
        return Ask.Result(request_id=goal.request_id, answer="".join(goal.pieces),
                          finish_reason=goal.reason,
                          observation_stamp=stamps.time_from_ns(goal.stamp_ns),
                          missing_cameras=list(goal.missing_cameras))

    # -- out (engine thread) ---------------------------------------------------------------
    def on_text(self, chunk, stamp_ns: int, missing_cameras: tuple = ()) -> None:
        """A piece of an answer, stamped with the observation it is about (which lacked
        `missing_cameras`): to its topic client or its action goal."""
        with self._lock:
            route = self._routes.pop(chunk.request_id, None) if chunk.final \
                else self._routes.get(chunk.request_id)
        if chunk.final:
            self.counters[f"dialogue_{chunk.finish_reason}"] += 1
        if isinstance(route, _Goal):
            text = conversions.ros_text(chunk.text)
            with route.lock:   # not held while publishing: rclpy takes locks of its own
                if route.reason:   # ended meanwhile (a shutdown): its result holds the answer
                    return
                route.stamp_ns, route.missing_cameras = stamp_ns, missing_cameras
                seq = route.seq
                if text:
                    route.pieces.append(text)
                    route.seq += 1
            if text:               # in the result already: it may reach the client after it
                route.handle.publish_feedback(Ask.Feedback(seq=seq, text=text))
            if chunk.final:
                self._end(route, chunk.finish_reason)
        elif route is not None:
            self.publisher.publish(conversions.dialogue_msg(chunk, stamp_ns, missing_cameras,
                                                            request_id=route))

    def abandon_all(self) -> int:
        """The engine is going away: every open goal ends (aborted, finish_reason shutdown);
        how many did."""
        with self._lock:
            goals = [r for r in self._routes.values() if isinstance(r, _Goal)]
            self._routes.clear()
        for goal in goals:
            self.counters["dialogue_shutdown"] += 1
            self._end(goal, "shutdown")
        return len(goals)
