"""inference node: owns the OxyGen engine; observations and dialogue in, actions, text,
memory summaries and diagnostics out.

A managed (lifecycle) node: `configure` loads the weights and calibrates, and from then on
the engine runs (chunks, dialogue, memory and diagnostics are published); `activate` starts
the per-step commands and trajectories, `deactivate` stops them at once; `cleanup` and
`shutdown` stop the engine and release the model. With autostart (the default) the node
configures and activates itself.

Threads: the engine runs control frames on its own thread (FrameLoop: a frame when the
plan in force needs a successor or the target period has passed, language in between);
the per-step commands come from the node's control process (control_link.py,
control_process.py), which the node sends each new chunk and each observation's arrival —
the commands never wait for inference, the executor or this process's interpreter lock.

Clocks: the engine schedules on its own monotonic clock; an observation's ROS stamp becomes
the same age at receipt, so the plan deadline holds on wall or simulated time.
"""

import dataclasses
import itertools
import sys
import threading
import time
from collections import Counter, OrderedDict, deque
from typing import Optional

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory

from oxygen_ros.engine.frame_loop import FrameLoop
from oxygen_ros.engine.memory_release import return_freed_memory
from oxygen_ros.engine.oxygen import OxygenEngine
from oxygen_ros.engine.threads import apply_torch_threads
from oxygen_ros.model.loading import load_model
from oxygen_ros.msg import ActionChunk, DialogueChunk, MemorySummary, Observation
from oxygen_ros.ros import control_link, conversions, diagnostics, inference_health, qos
from oxygen_ros.ros import ros_parameters
from oxygen_ros.ros.command_gate import CommandGate
from oxygen_ros.ros.control_link import ControlSettings
from oxygen_ros.ros.diagnostics import guarded
from oxygen_ros.ros.dialogue_router import DialogueRouter
from oxygen_ros.ros.executor import YieldingMultiThreadedExecutor
from oxygen_ros.ros.node_entities import destroy_entities
from oxygen_ros.ros.node_parameters import InferenceParameters, inference_config, inference_specs
from oxygen_ros.ros.run_node import run_node

FRAME_STAMPS_KEPT = 4096   # frames whose observation stamps answers can still cite
SET_WHEN = " (set while unconfigured; read at configure)"
CONFIGURED = ("inference is configured and reads its parameters at configure: deactivate "
              "and cleanup, set the parameter, then configure")


class InferenceNode(LifecycleNode):
    def __init__(self, **kwargs):
        super().__init__("inference", **kwargs)
        ros_parameters.declare(self, inference_specs(), SET_WHEN)
        ros_parameters.refuse_bad_values(self, inference_specs(), inference_config,
                                         lambda: None if self.engine is None else CONFIGURED)
        self.counters: Counter = Counter()
        self.problems = diagnostics.BurstLogger(self.get_logger())
        self.engine: Optional[OxygenEngine] = None
        self.configure_error: Optional[Exception] = None
        self._active = False
        self._entities: list = []                     # publishers, subscriptions, timers
        # request ids over the node's lifetime: a reconfigure goes on counting
        self._topic_ids, self._engine_ids = itertools.count(1), itertools.count(1)
        self._ask_server = None                       # kept over reconfigures: see DialogueRouter
        if self.get_parameter("autostart").value:
            if self.trigger_configure() != TransitionCallbackReturn.SUCCESS:
                raise self.configure_error or RuntimeError("inference: configure failed")
            self.trigger_activate()

    # -- lifecycle -------------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            self._configure()
        except Exception as error:  # a bad parameter or checkpoint: say it, stay unconfigured
            self.configure_error = error
            self.get_logger().error(f"configure failed: {error}")
            self._teardown()
            return TransitionCallbackReturn.FAILURE
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = True
        self._control.send(control_link.state_message(True))
        self.get_logger().info(f"active: commands at {1 / self.period:.0f} Hz"
                               f"{' (dry run: not published)' if self.dry_run else ''}")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        self._control.send(control_link.state_message(False))
        self.get_logger().info("inactive: no commands (chunks, dialogue and memory go on)")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._teardown()
        return TransitionCallbackReturn.SUCCESS

    on_shutdown = on_cleanup

    def _configure(self) -> None:
        params, config = inference_config(ros_parameters.values(self, inference_specs()))
        self.period = 1.0 / params.control_rate_hz
        self.joint_names = list(params.joint_names)
        self.camera_names = list(config.camera_names)
        self.action_dt = config.action_dt_s
        self.dry_run = params.dry_run
        self.instruction = params.default_instruction
        # read once: the control tick and the observation callback run at tens of Hz
        self.watchdog_s = params.watchdog_ticks * self.period
        self.gate = CommandGate(params.joint_lower_limits, params.joint_upper_limits,
                                self.watchdog_s, params.watchdog_action == "hold", self.counters)
        self.torch_threads = apply_torch_threads(params.torch_threads)
        self._load_model(params, config.seed)
        self.engine = OxygenEngine(
            self.model.model, config, tokenizer=self.model.tokenizer,
            normalization=self.model.normalization, on_chunk=self._on_chunk,
            on_text=self._on_text, on_memory=self._on_memory, dialogue_ids=self._engine_ids)
        self._reset_state()
        self._create_entities(params)
        self._stop, self._wake = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._engine_loop, name="oxygen-engine",
                                        args=(self.engine, self._stop), daemon=True)
        self._thread.start()
        self._control = control_link.running_link(getattr(self, "_control", None), ControlSettings(
            self.get_name(), self.get_namespace(), self.resolve_topic_name(params.command_topic),
            params.control_rate_hz, params.control_priority, params.joint_lower_limits,
            params.joint_upper_limits, self.watchdog_s, params.watchdog_action == "hold",
            # RTC chunks continue the plan they replace, so only the cross-fade fades
            config.blend_s if config.chunk_switch == "crossfade" else 0.0, not self.dry_run,
            self.get_parameter("use_sim_time").value))
        if self._control.refused:
            self.get_logger().warning(f"control loop: {self._control.scheduling}")
        self.get_logger().info(f"model {self.model.description}; {config.num_pages} KV pages; "
                               f"{self.torch_threads} torch threads; control loop: "
                               f"{self._control.scheduling}")
        self._report_capacity()

    def _load_model(self, params: InferenceParameters, seed: int) -> None:
        self.model = load_model(preset=params.preset, checkpoint=params.checkpoint,
                                tokenizer=params.tokenizer, device=params.device,
                                dtype=params.dtype, seed=seed,
                                prefix_attention=params.prefix_attention or None,
                                asset_id=params.asset_id, normalization=params.normalization,
                                heads=(params.attention_heads, params.attention_kv_heads,
                                       params.attention_head_dim),
                                vision_heads=params.vision_heads)
        model = self.model.model.config
        self.image_size = model.vision.image_size
        if len(self.joint_names) > model.action_dim:
            raise ValueError(f"{len(self.joint_names)} joints but the model acts on "
                             f"{model.action_dim} dimensions")

    def _reset_state(self) -> None:
        # (Observation stamped on the engine clock, receipt monotonic time, ROS stamp)
        self._latest: Optional[tuple] = None
        self._frame_ros_stamp = 0.0                    # ROS stamp of the frame's observation
        self._frame_ros_stamps: OrderedDict = OrderedDict()   # frame id -> that stamp (recent)
        self._chunk_latencies: deque = deque(maxlen=50)
        self._command_times: deque = deque(maxlen=500)
        self._frame_starts: deque = deque(maxlen=32)
        self._rates = (time.monotonic(), 0)
        self.health = inference_health.Health()

    def _create_entities(self, params: InferenceParameters) -> None:
        inputs, reports = MutuallyExclusiveCallbackGroup(), MutuallyExclusiveCallbackGroup()
        publisher, subscription = self.create_publisher, self.create_subscription
        self.chunk_pub = publisher(ActionChunk, params.action_chunk_topic, qos.RELIABLE)
        self.trajectory_pub = publisher(JointTrajectory, params.trajectory_topic, qos.RELIABLE)
        self.dialogue_pub = publisher(DialogueChunk, params.dialogue_topic, qos.RELIABLE_DEEP)
        self.memory_pub = publisher(MemorySummary, params.memory_topic, qos.RELIABLE)
        self.diagnostics_pub = publisher(DiagnosticArray, "/diagnostics", qos.RELIABLE)
        self.dialogue = DialogueRouter(self, self.engine, params.ask_action, self.dialogue_pub,
                                       self.counters, self._bad_input, self._topic_ids,
                                       self._ask_server)
        self._ask_server = self.dialogue.server
        self._entities = [
            self.chunk_pub, self.trajectory_pub, self.dialogue_pub,
            self.memory_pub, self.diagnostics_pub,
            subscription(Observation, params.observation_topic,
                         guarded(self, self.on_observation), qos.RELIABLE, callback_group=inputs),
            subscription(String, params.dialogue_request_topic,
                         guarded(self, self.dialogue.on_request), qos.RELIABLE_DEEP,
                         callback_group=inputs),
            subscription(String, params.instruction_topic, guarded(self, self.on_instruction),
                         qos.LATCHED, callback_group=inputs),
            self.create_timer(params.diagnostics_period_s, guarded(self, self.publish_diagnostics),
                              callback_group=reports)]

    def _teardown(self) -> None:
        """Stop the engine thread, end open goals, release entities and the model."""
        self._active = False
        if getattr(self, "_thread", None) is not None:
            self._stop.set()
            self._wake.set()
            self._thread.join(timeout=10.0)
            if self._thread.is_alive():   # it owns its engine and stops after this frame
                self.get_logger().warning("engine thread still in a frame after 10 s; it "
                                          "stops when the frame ends")
            self._thread = None
        if getattr(self, "_control", None) is not None:   # idle until the next configure
            self._control.send(control_link.state_message(False))
        if getattr(self, "dialogue", None) is not None:
            self.dialogue.destroy()
            self.dialogue = None
        destroy_entities(self, self._entities)   # and empties the list
        self.engine = self.model = None
        return_freed_memory()   # else reconfigures grow the process (memory_release.py)

    def wake_engine(self) -> None:
        self._wake.set()

    def wind_down(self) -> int:   # a stop signal: see run_node and DialogueRouter
        return self.dialogue.wind_down() if getattr(self, "dialogue", None) else 0

    def winding_down(self) -> bool:
        return getattr(self, "dialogue", None) is not None and self.dialogue.winding_down()

    def _report_capacity(self) -> None:
        notice = self.health.capacity_notice(self.engine.timing.capacity())
        # one call site per severity: rclpy raises when a call site's severity changes
        if notice is not None and notice[0] == "info":
            self.get_logger().info(notice[1])
        elif notice is not None:
            self.get_logger().warning(notice[1])

    # -- inputs -------------------------------------------------------------------------
    def _bad_input(self, kind: str, detail: str) -> None:
        """Count every bad input; log each kind once per burst."""
        self.counters[kind] += 1
        self.problems.warn(kind, detail)

    def on_observation(self, msg) -> None:
        stamp = conversions.to_seconds(msg.header.stamp)
        now = self.get_clock().now().nanoseconds * 1e-9
        age_limit = max(1.0, self.watchdog_s)
        if stamp > now + age_limit:
            return self._bad_input("future_stamp", f"observation stamped {stamp - now:.2f} s ahead")
        if stamp < now - age_limit:
            return self._bad_input("stale_stamp", f"observation {now - stamp:.2f} s old")
        decoded = conversions.observation_from_msg(msg, self.camera_names, self.joint_names,
                                                   self.instruction, self.image_size)
        for problem in decoded.problems:
            self._bad_input(problem, f"in observation at {stamp:.3f}")
        if decoded.observation is None:
            return
        # the same age on the engine's clock: the plan deadline is physical time
        engine_stamp = self.engine.clock.now() - (now - stamp)
        observation = dataclasses.replace(decoded.observation, stamp=engine_stamp)
        arrival = time.monotonic()
        self._latest = (observation, arrival, stamp)
        self._control.send(control_link.observed_message(arrival))
        self.counters["observations"] += 1
        self._wake.set()

    def on_instruction(self, msg: String) -> None:
        self.instruction = conversions.take_instruction(msg.data, self.instruction,
                                                        self._bad_input, self.get_logger())

    # -- the engine thread ----------------------------------------------------------------
    def _age(self) -> Optional[float]:
        """Seconds since the newest observation arrived (None: none yet)."""
        latest = self._latest
        return None if latest is None else time.monotonic() - latest[1]

    def _fresh(self) -> bool:
        return self.gate.fresh(self._age())

    def _engine_loop(self, engine, stop: threading.Event) -> None:
        # its own engine and stop event: a teardown that outwaits a slow frame, or a new
        # configure after it, must not change them under the running frame
        loop = FrameLoop(engine)
        while not stop.is_set() and self.context.ok():
            latest = self._latest if self._fresh() else None
            observation = None
            frames = engine.frames
            if latest is not None:
                observation, _, self._frame_ros_stamp = latest
                self._remember_frame(frames, self._frame_ros_stamp)
            try:
                pause = loop.run_once(observation)
            except Exception as error:  # a bad frame must not end the node
                if not self.context.ok():
                    break  # shutting down: publishers are gone
                self.counters["engine_errors"] += 1
                self.health.frame_failed(error)   # its requests ended with engine_error
                self.get_logger().error(f"engine frame failed: {error!r}",
                                        throttle_duration_sec=5.0)
                pause = engine.config.frame_period_s
            if engine.frames > frames:
                self._frame_starts.append(engine.clock.now())
            if pause > 0 and self._wake.wait(pause):
                self._wake.clear()

    def _remember_frame(self, frame_id: int, ros_stamp: float) -> None:
        """The ROS stamp of the observation a frame runs on, for the text about it (kept
        for the last FRAME_STAMPS_KEPT frames: over request_timeout_s's 60 s at 60 Hz)."""
        self._frame_ros_stamps[frame_id] = ros_stamp
        while len(self._frame_ros_stamps) > FRAME_STAMPS_KEPT:
            self._frame_ros_stamps.popitem(last=False)

    def _on_chunk(self, chunk) -> None:
        self._chunk_latencies.append(chunk.latency_s)
        if chunk.late:
            self.problems.warn("deadline_miss", f"chunk {chunk.frame_id} took "
                               f"{chunk.latency_s * 1e3:.0f} ms and arrived after the plan in "
                               "force needed its successor")
        actions = chunk.actions[:, :len(self.joint_names)]
        if not np.isfinite(actions).all():
            return self._bad_input("non_finite_chunk", f"frame {chunk.frame_id} dropped")
        now = self.get_clock().now().nanoseconds * 1e-9
        stamp = self._frame_ros_stamp     # the chunk's observation, in ROS time
        self._control.send(control_link.plan_message(actions, stamp, self.action_dt, now))
        self.chunk_pub.publish(conversions.action_chunk_msg(
            chunk.frame_id, stamp, chunk.actions, self.action_dt, self.joint_names))
        if self._active and not self.dry_run:
            clamped = self.gate.clip(actions)
            first = max(0, int((now - stamp) / self.action_dt))
            self.trajectory_pub.publish(conversions.trajectory_msg(
                stamp, clamped, self.action_dt, self.joint_names, first))

    def _on_text(self, chunk) -> None:
        if chunk.kind == "dialogue":  # memory text is published whole, as a MemorySummary
            now = self.get_clock().now().nanoseconds * 1e-9
            self.dialogue.on_text(chunk, self._frame_ros_stamps.get(chunk.frame_id, now))

    def _on_memory(self, summary) -> None:
        # the window's stamps back from the engine's clock to ROS time
        now = self.get_clock().now().nanoseconds * 1e-9
        offset = now - self.engine.clock.now()
        summary = dataclasses.replace(summary, window_start=summary.window_start + offset,
                                      window_end=summary.window_end + offset)
        self.memory_pub.publish(conversions.memory_msg(summary, now))
        self.get_logger().debug(f"memory summary of {summary.frames} frames")

    # -- diagnostics ----------------------------------------------------------------------
    def real_time_report(self) -> dict:
        """The real-time contract in numbers, as /diagnostics and the demo summary give it."""
        return inference_health.real_time_report(self.engine, self.counters, self._frame_starts,
                                                 self._chunk_latencies, self.torch_threads)

    def publish_diagnostics(self) -> None:
        now = time.monotonic()
        since, tokens_before = self._rates
        engine = self.engine
        self._rates = (now, engine.counters["tokens"])
        self._command_times.extend(self._control.poll(self.counters))
        commands = list(self._command_times)
        until = self._control.reported_at     # the second up to the control process's report
        values = {
            "action_rate_hz": float(sum(until - 1.0 < t <= until for t in commands)),
            "command_gap_ms_max": inference_health.longest_gap(commands, until - 1.0) * 1e3,
            "tokens_per_s": (engine.counters["tokens"] - tokens_before) / max(now - since, 1e-6),
        } | inference_health.engine_values(engine) | {
            "dry_run": self.dry_run,
            "lifecycle": "active" if self._active else "inactive",
            "cancelled_requests": engine.counters["cancelled_requests"],
            "ask_clients": self.dialogue.clients(),
            "watchdog": "stale" if self._control.stale else "ok",
        } | self.real_time_report() | self.health.values() \
          | {f"kv_bytes_{owner}": n for owner, n in engine.cache.pool.bytes_by_owner().items()} \
          | dict(self.counters)
        self._report_capacity()
        capacity = engine.timing.capacity()
        level, message = self.health.verdict(
            engine_running=self._thread.is_alive(), control_running=self._control.running(),
            active=self._active, stale=self._control.stale,
            targets_missed=(capacity.describe() if capacity is not None
                            and not capacity.meets_targets else None),
            deadline_misses=engine.counters["deadline_misses"], counters=self.counters)
        self.diagnostics_pub.publish(diagnostics.array(
            self.get_clock().now().to_msg(),
            diagnostics.status("oxygen_ros: inference", self.get_name(),
                               getattr(diagnostics, level), message, values)))

    def destroy_node(self) -> None:
        self._teardown()
        if getattr(self, "_control", None) is not None:
            self._control.close()        # a frame still running sends to a closed link
        if self._ask_server is not None:
            self._ask_server.destroy()
        super().destroy_node()


def main(args=None) -> int:
    return run_node(InferenceNode, args,
                    make_executor=lambda: YieldingMultiThreadedExecutor(num_threads=3))


if __name__ == "__main__":
    sys.exit(main())
