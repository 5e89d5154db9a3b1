"""RobotPort: one robot's side of the inference node — its observation, instruction and
dialogue topics, its Ask action, its chunk, trajectory, dialogue and memory outputs, its
control process (commands and watchdog), and its DiagnosticStatus.

A server for several robots (the node's `robots`) has one port per robot, every name under
`/<robot>/` (`/oxygen/observation` becomes `/<robot>/oxygen/observation`); one robot's
silent cameras or bad input trip only its own watchdog and counters. A single robot is the
one port named "", its names as the parameters give them."""

import dataclasses
import itertools
import math
import time
from collections import Counter, OrderedDict, deque
from typing import Optional

import numpy as np
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from std_msgs.msg import String

from oxygen_ros.msg import ActionChunk, DialogueChunk, MemorySummary, Observation
from oxygen_ros.ros import control_link, conversions, diagnostics, inference_health, qos, stamps
from oxygen_ros.ros.command_gate import CommandGate, StopMark
from oxygen_ros.ros.control_link import ControlSettings
from oxygen_ros.ros.diagnostics import guarded
from oxygen_ros.ros.dialogue_router import DialogueRouter
from oxygen_ros.ros.node_entities import destroy_entities
from oxygen_ros.ros.robot_topics import robot_topic

FRAME_STAMPS_KEPT = 4096   # frames whose observation stamps answers can still cite
OBSERVATIONS_KEPT = 4096   # observations whose chunk may still come (a slow model's)


class RobotPort:
    """Kept over reconfigures (by the node, per robot name): the Ask server, the control
    process and the request ids; the rest is made at configure (`bind`)."""

    def __init__(self, node, name: str):
        self.node, self.name = node, name
        self.counters: Counter = Counter()
        self.problems = diagnostics.BurstLogger(node.get_logger())
        # a fleet server's port is named by its robot, a robot's own node by its namespace
        robot = name or node.get_namespace().strip("/")
        self.status_name = "oxygen_ros: inference" + (f"/{robot}" if robot else "")
        self.engine = None
        self.dialogue: Optional[DialogueRouter] = None
        self.control: Optional[control_link.ControlLink] = None
        self._ask_server = None
        self._entities: list = []
        # request ids over the node's lifetime: a reconfigure goes on counting
        self._topic_ids = itertools.count(1)

    def get_logger(self):   # for guarded()
        return self.node.get_logger()

    def label(self) -> str:
        return f"robot {self.name}: " if self.name else ""

    # -- configure and cleanup -------------------------------------------------------------
    def bind(self, engine, params, config, control_settings: dict) -> None:
        """Start serving with this engine and these parameters: entities, Ask, control."""
        node, name = self.node, self.name
        self.engine, self.robot = engine, engine.robot_of(name)
        self.joint_names = list(params.joint_names)
        self.camera_names = list(config.camera_names)
        self.action_dt = config.action_dt_s
        self.instruction = params.default_instruction
        self.period = 1.0 / params.control_rate_hz
        self.watchdog_s = params.watchdog_ticks * self.period
        self.gate = CommandGate(params.joint_lower_limits, params.joint_upper_limits,
                                self.watchdog_s, params.watchdog_action == "hold", self.counters)
        self.image_size = node.image_size
        # (Observation stamped on the engine clock, receipt monotonic time)
        self.latest: Optional[tuple] = None
        self.stops = StopMark(self.watchdog_s, self.period)
        # engine stamp -> (ROS stamp in ns, receipt, cameras it lacked)
        self._observed: OrderedDict = OrderedDict()
        self._frame_sources: OrderedDict = OrderedDict()  # frame id -> (ROS stamp ns, lacked)
        self.chunk_latencies: deque = deque(maxlen=50)
        self.command_times: deque = deque(maxlen=control_link.TIMES_KEPT)
        self.frame_starts: deque = deque(maxlen=32)
        self.health = inference_health.Health()
        self._create_entities(params)
        self.control = control_link.running_link(self.control, ControlSettings(
            node.get_name() + (f"_{name}" if name else ""), node.get_namespace(),
            node.resolve_topic_name(robot_topic(name, params.command_topic)),
            trajectory_topic=node.resolve_topic_name(robot_topic(name, params.trajectory_topic)),
            joint_names=tuple(params.joint_names), **control_settings))
        if self.control.refused:
            node.get_logger().warning(f"{self.label()}control loop: {self.control.scheduling}")
        self.refusal = self.robot.refused        # as last logged
        if self.refusal:
            node.get_logger().error(f"{self.label()}{self.refusal}")

    def _create_entities(self, params) -> None:
        node, topic = self.node, lambda name: robot_topic(self.name, name)
        inputs = MutuallyExclusiveCallbackGroup()
        publisher, subscription = node.create_publisher, node.create_subscription
        self.chunk_pub = publisher(ActionChunk, topic(params.action_chunk_topic), qos.RELIABLE)
        self.dialogue_pub = publisher(DialogueChunk, topic(params.dialogue_topic),
                                      qos.RELIABLE_DEEP)
        self.memory_pub = publisher(MemorySummary, topic(params.memory_topic), qos.RELIABLE)
        self.dialogue = DialogueRouter(node, self.engine, topic(params.ask_action),
                                       self.dialogue_pub, self.counters, self.bad_input,
                                       self._topic_ids, self._ask_server, robot=self.name)
        self._ask_server = self.dialogue.server
        self._entities = [
            self.chunk_pub, self.dialogue_pub, self.memory_pub,
            subscription(Observation, topic(params.observation_topic),
                         guarded(self, self.on_observation), qos.RELIABLE, callback_group=inputs),
            subscription(String, topic(params.dialogue_request_topic),
                         guarded(self, self.dialogue.on_request), qos.RELIABLE_DEEP,
                         callback_group=inputs),
            subscription(String, topic(params.instruction_topic),
                         guarded(self, self.on_instruction), qos.LATCHED, callback_group=inputs)]

    def unbind(self) -> None:
        """The engine is going away: open goals end, commands stop, entities go."""
        if self.control is not None:   # idle until the next configure
            self.control.send(control_link.state_message(False))
        if self.dialogue is not None:
            self.dialogue.destroy()
            self.dialogue = None
        destroy_entities(self.node, self._entities)   # and empties the list
        self.engine = self.robot = None

    def destroy(self) -> None:
        self.unbind()
        if self.control is not None:
            self.control.close()
        if self._ask_server is not None:
            self._ask_server.destroy()

    def set_active(self, active: bool) -> None:
        self.control.send(control_link.state_message(active))

    # -- inputs -------------------------------------------------------------------------
    def bad_input(self, kind: str, detail: str) -> None:
        """Count every bad input; log each kind once per burst."""
        self.counters[kind] += 1
        self.problems.warn(kind, self.label() + detail)

    def on_observation(self, msg) -> None:
        decoded = self._decode(msg)
        if decoded is None:
            self.counters["dropped_observations"] += 1
            return
        observation, stamp_ns, age = decoded
        # used as stamped, its plan starts that late; on /clock (use_sim_time) stamps run
        # ahead of the node's time between the clock's ticks
        if -age > self.action_dt and not self.node.get_clock().ros_time_is_active:
            self.bad_input("clock_ahead", f"observation stamped {-age:.3f} s ahead of "
                           "this host's clock: its plan starts that late (synchronize the "
                           "clocks)")
        # the same age on the engine's clock: the plan deadline is physical time
        engine_stamp = self.engine.clock.now() - age
        observation = dataclasses.replace(observation, stamp=engine_stamp, robot=self.name)
        arrival = time.monotonic()
        self.stops.observation(arrival)
        missing = tuple(c for c in self.camera_names if c not in observation.images)
        self._observed[engine_stamp] = (stamp_ns, arrival, missing)
        while len(self._observed) > OBSERVATIONS_KEPT:
            self._observed.popitem(last=False)
        self.latest = (observation, arrival)
        self.control.send(control_link.observed_message(arrival))
        self.counters["observations"] += 1
        self.node.wake_engine()

    def _decode(self, msg):
        """The observation in `msg`, its stamp (ns) and its age on this node's clock; None,
        every problem counted, when it cannot be used."""
        stamp_ns = stamps.stamp_ns(msg.header.stamp)
        stamp = stamp_ns * 1e-9
        now_ns = self.node.get_clock().now().nanoseconds
        now = now_ns * 1e-9
        age_limit = max(1.0, self.watchdog_s)
        if stamp > now + age_limit:
            self.bad_input("future_stamp", "observation " + conversions.future_stamp_text(
                stamp - now, now_ns, self.node.get_parameter("use_sim_time").value))
            return None
        if stamp < now - age_limit:
            self.bad_input("stale_stamp", "observation " + conversions.stale_stamp_text(
                now - stamp, stamp_ns, self.node.get_parameter("use_sim_time").value))
            return None
        decoded = conversions.observation_from_msg(msg, self.camera_names, self.joint_names,
                                                   self.instruction, self.image_size)
        for problem in decoded.problems:
            what = decoded.details.get(problem)
            self.bad_input(problem, f"{what}, in observation at {stamp:.3f}" if what
                           else f"in observation at {stamp:.3f}")
        if decoded.observation is None:
            return None
        return decoded.observation, stamp_ns, now - stamp

    def on_instruction(self, msg: String) -> None:
        self.instruction = conversions.take_instruction(msg.data, self.instruction,
                                                        self.bad_input, self.node.get_logger())

    def fresh_observation(self):
        """The newest observation while the watchdog lets it act (None: none is fresh)."""
        latest = self.latest
        age = None if latest is None else time.monotonic() - latest[1]
        return latest[0] if self.gate.fresh(age) else None

    # -- outputs (engine thread) ----------------------------------------------------------
    def frame_source(self, frame_id: Optional[int]) -> tuple[int, tuple]:
        """(ROS stamp in ns, configured cameras it lacked) of the observation a frame ran on:
        zero and none for no frame (a request that ended before it read one), now and none
        for a frame no longer known."""
        if frame_id is None:
            return 0, ()
        source = self._frame_sources.get(frame_id)
        return (self.node.get_clock().now().nanoseconds, ()) if source is None else source

    def on_chunk(self, chunk) -> None:
        self.chunk_latencies.append(chunk.latency_s)
        self.frame_starts.append(self.engine.clock.now() - chunk.latency_s)
        stamp_ns, arrival, missing = self._observed.get(chunk.stamp, (None, math.nan, ()))
        if stamp_ns is None:    # its observation is long gone: the engine clock's offset
            stamp_ns = round((chunk.stamp - self.engine.clock.now()) * 1e9
                             + self.node.get_clock().now().nanoseconds)
        self._frame_sources[chunk.frame_id] = (stamp_ns, missing)
        while len(self._frame_sources) > FRAME_STAMPS_KEPT:
            self._frame_sources.popitem(last=False)
        if chunk.late:
            self.counters["deadline_misses"] += 1
            self.problems.warn("deadline_miss", f"{self.label()}chunk {chunk.frame_id} took "
                               f"{chunk.latency_s * 1e3:.0f} ms and arrived after the plan in "
                               "force needed its successor")
        if not np.isfinite(chunk.actions).all():     # the engine keeps the plan in force too
            return self.bad_input("non_finite_chunk", f"frame {chunk.frame_id} dropped")
        latest = self.latest
        if latest is not None and not self.gate.fresh(time.monotonic() - latest[1]):
            self.stops.stop(latest[1])
        if self.stops.outdated(arrival):
            self.robot.stop_actions()     # the next chunk starts a plan of its own
            self.counters["chunk_after_stop"] += 1
            self.node.get_logger().info(
                f"{self.label()}chunk {chunk.frame_id} was computed before the watchdog stopped "
                "the actions: not published (they resume on a fresh observation)")
            return
        # the control process plays it and, while active, publishes its trajectory
        now = self.node.get_clock().now().nanoseconds * 1e-9
        self.control.send(control_link.plan_message(chunk.actions[:, :len(self.joint_names)],
                                                    stamp_ns, self.action_dt, now, arrival))
        self.chunk_pub.publish(conversions.action_chunk_msg(
            chunk.frame_id, stamp_ns, chunk.actions, self.action_dt, self.joint_names))

    def on_text(self, chunk) -> None:
        if chunk.kind == "dialogue":  # memory text is published whole, as a MemorySummary
            self.dialogue.on_text(chunk, *self.frame_source(chunk.frame_id))

    def on_memory(self, summary) -> None:
        now_ns = self.node.get_clock().now().nanoseconds
        offset = now_ns * 1e-9 - self.engine.clock.now()

        def ros_stamp_ns(stamp: float) -> int:
            """The window's bound as its observation's own ROS stamp, else (long gone)
            through the engine clock's offset."""
            known = self._observed.get(stamp)
            return known[0] if known is not None else round((stamp + offset) * 1e9)

        self.memory_pub.publish(conversions.memory_msg(
            summary.text, now_ns, ros_stamp_ns(summary.window_start),
            ros_stamp_ns(summary.window_end)))

    # -- diagnostics ----------------------------------------------------------------------
    def real_time_report(self, torch_threads: int) -> dict:
        """This robot's real-time contract in numbers."""
        return inference_health.real_time_report(
            self.engine, self.robot.timing, self.counters, self.frame_starts,
            self.chunk_latencies, torch_threads)

    def report_capacity(self) -> None:
        notice = self.health.capacity_notice(self.robot.timing.capacity())
        # one call site per severity: rclpy raises when a call site's severity changes
        if notice is not None and notice[0] == "info":
            self.node.get_logger().info(self.label() + notice[1])
        elif notice is not None:
            self.node.get_logger().warning(self.label() + notice[1])

    def report_admission(self) -> None:
        """Log when run-time admission sheds this robot, or serves it (again, or after a
        refusal at start-up)."""
        refused = self.robot.refused
        if refused == self.refusal:
            return
        self.refusal = refused
        if refused:
            self.node.get_logger().error(self.label() + refused)
        else:
            self.node.get_logger().info(f"{self.label()}now served: the fleet's measured "
                                        "action paths leave room for this robot")

    def served_twice(self) -> str:
        """Why this robot is also served by another server ("": it is not): two servers
        naming one robot publish its chunks twice, and both say so."""
        topic = self.chunk_pub.topic_name
        servers = self.node.count_publishers(topic)
        if servers <= 1:
            return ""
        return (f"{self.label() or 'this robot: '}served by {servers} inference servers "
                f"({servers} publishers on {topic}); give each server a disjoint robot list")

    def status(self, engine_values: dict, engine_running: bool, active: bool, dry_run: bool,
               torch_threads: int, stuck: Optional[str] = None):
        """This robot's DiagnosticStatus for the period that just ended (stuck: why the
        engine's current frame counts as stuck, inference_health.stuck_frame)."""
        self.command_times.extend(self.control.poll(self.counters))
        commands = list(self.command_times)
        silent = self.control.silent()
        # the second up to the control process's report (up to now once it is overdue)
        until = self.control.reported_at if silent is None else time.monotonic()
        values = {
            "robot": self.name,
            "action_rate_hz": float(sum(until - 1.0 < t <= until for t in commands)),
            "command_gap_ms_max": inference_health.longest_gap(commands, until - 1.0) * 1e3,
        } | engine_values | {
            "pending_dialogue": self.engine.pending_dialogue_of(self.name),
            "dry_run": dry_run,
            "lifecycle": "active" if active else "inactive",
            "ask_clients": self.dialogue.clients(),
            "watchdog": "stale" if self.control.stale else "ok",
            "refused": self.robot.refused,
            "times_shed": self.robot.times_shed,
            "control_lost_messages": self.control.lost_messages,
        } | self.real_time_report(torch_threads) | self.health.values() | dict(self.counters)
        self.report_capacity()
        self.report_admission()
        capacity = self.robot.timing.capacity()
        level, message = self.health.verdict(
            engine_running=engine_running, control_running=self.control.running(),
            control_silent_s=silent,
            active=active, stale=self.control.stale,
            refused=self.robot.refused or self.served_twice(),
            targets_missed=(capacity.describe() if capacity is not None
                            and not capacity.meets_targets else None),
            deadline_misses=self.counters["deadline_misses"], counters=self.counters,
            stuck=stuck)
        return diagnostics.status(self.status_name, self.node.get_name(),
                                  getattr(diagnostics, level), message, values)
