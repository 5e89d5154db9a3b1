"""inference node: owns the OxyGen engine; observations and dialogue in, actions, text,
memory summaries and diagnostics out.

A managed (lifecycle) node: `configure` loads the weights and calibrates, and from then on
the engine runs (chunks, dialogue, memory and diagnostics are published); `activate` starts
the per-step commands and trajectories, `deactivate` stops them at once; `cleanup` and
`shutdown` stop the engine and release the model. With autostart (the default) the node
configures and activates itself.

Threads: the engine runs control frames on its own thread (FrameLoop: a frame when the
plan in force needs a successor or the target period has passed, language in between);
the control timer (own callback group) publishes per-step commands from the newest chunk,
which the engine thread hands over by swapping one immutable reference (ActionStream) —
the timer never waits for inference.

Clocks: the engine schedules on its own monotonic clock; an observation's ROS stamp is
carried over to it as the same age at receipt, so the plan deadline holds whether the
node runs on wall or simulated time.
"""

import dataclasses
import sys
import threading
import time
from collections import Counter, OrderedDict, deque
from typing import Optional

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory

from oxygen_ros.engine.action_stream import ActionStream
from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.engine.frame_loop import FrameLoop
from oxygen_ros.engine.frame_timing import percentile
from oxygen_ros.engine.oxygen import OxygenEngine
from oxygen_ros.engine.threads import apply_torch_threads
from oxygen_ros.model.loading import load_model
from oxygen_ros.msg import ActionChunk, DialogueChunk, MemorySummary, Observation
from oxygen_ros.ros import conversions, diagnostics, qos
from oxygen_ros.ros.diagnostics import guarded
from oxygen_ros.ros.dialogue_router import DialogueRouter
from oxygen_ros.ros.executor import YieldingMultiThreadedExecutor
from oxygen_ros.ros.run_node import run_node

FRAME_STAMPS_KEPT = 4096   # frames whose observation stamps answers can still cite
BAD_INPUTS = {"future_stamp", "stale_stamp", "malformed_observation", "unknown_camera",
              "duplicate_camera", "bad_image", "wrong_image_size", "no_usable_camera",
              "missing_camera", "joint_names_mismatch", "joint_state_mismatch",
              "non_finite_state", "empty_instruction", "long_instruction", "empty_request",
              "truncated_request", "non_finite_chunk", "non_finite_command", "internal_error"}

PARAMETERS = {
    # name: (default, description)
    "observation_topic": ("/oxygen/observation", "oxygen_ros/Observation input"),
    "dialogue_request_topic": ("/oxygen/dialogue/request", "std_msgs/String requests"),
    "instruction_topic": ("/oxygen/instruction", "std_msgs/String task (transient local)"),
    "command_topic": ("/oxygen/joint_command", "per-step std_msgs/Float64MultiArray"),
    "action_chunk_topic": ("/oxygen/action_chunk", "oxygen_ros/ActionChunk per chunk"),
    "trajectory_topic": ("/oxygen/joint_trajectory", "trajectory_msgs/JointTrajectory per chunk"),
    "dialogue_topic": ("/oxygen/dialogue", "oxygen_ros/DialogueChunk stream"),
    "memory_topic": ("/oxygen/memory", "oxygen_ros/MemorySummary"),
    "ask_action": ("/oxygen/ask", "oxygen_ros/action/Ask server (dialogue with feedback)"),
    "default_instruction": ("", "instruction used until one arrives"),
    "camera_names": (["base", "left_wrist", "right_wrist"], "model camera slots, in order"),
    "joint_names": ([f"joint_{i}" for i in range(14)],
                    "robot joints = the first action dimensions, and the state order"),
    "joint_lower_limits": ([-1.0] * 14, "per-joint clamp, same order as joint_names"),
    "joint_upper_limits": ([1.0] * 14, "per-joint clamp, same order as joint_names"),
    "preset": ("small", "model preset when no checkpoint is given: pi05, small, tiny, demo"),
    "checkpoint": ("", "π0.5 checkpoint directory (openpi PyTorch or lerobot pi05 layout)"),
    "tokenizer": ("", "PaliGemma SentencePiece .model file (needed with a checkpoint)"),
    "asset_id": ("", "openpi normalization stats to use (assets/<asset_id>/)"),
    "normalization": ("", "'' : the checkpoint's statistics (required if it normalizes); "
                          "identity: none"),
    "attention_heads": (0, "Gemma heads, for a checkpoint variant the loader does not know "
                           "(0: from the variant name)"),
    "attention_kv_heads": (0, "Gemma kv heads (with attention_heads)"),
    "attention_head_dim": (0, "Gemma head_dim (with attention_heads)"),
    "vision_heads": (0, "SigLIP heads (0: from the width, 72 or 64 per head)"),
    "device": ("cpu", "cpu or cuda"),
    "dtype": ("float32", "float32 or bfloat16"),
    "seed": (0, "weights seed (presets) and noise seed"),
    "cuda_graphs": (True, "on CUDA: decode steps and the denoising loop as CUDA graphs"),
    "torch_compile": (False, "on CUDA: torch.compile the MLP blocks (slower start-up)"),
    "prefix_attention": ("", "bidirectional or causal_prompt; empty: the model's own"),
    "num_pages": (512, "KV pages in the unified pool (all tasks)"),
    "page_size": (16, "tokens per KV page"),
    "torch_threads": (0, "torch CPU threads; 0: all cores but one"),
    "frame_period_s": (0.1, "target time between engine frames (fresh chunks); a frame "
                            "comes earlier when the plan in force needs its successor"),
    "deadline_margin_s": (0.02, "a successor chunk is due this long before the plan in "
                                "force runs out (on top of blend_s)"),
    "language_floor": (0.1, "share of frame_period_s language always gets after a chunk"),
    "request_timeout_s": (60.0, "a dialogue request not finished by then ends with "
                                "finish_reason timeout (0: never)"),
    "max_pending_requests": (64, "dialogue requests beyond this many waiting or running end "
                                 "at once with finish_reason queue_full"),
    "tokens_per_frame": (4, "k: decode steps per frame for all language requests"),
    "max_tokens_per_frame": (8, "cap when language catches up after throttling"),
    "dialogue_max_tokens": (48, "max new tokens per dialogue answer"),
    "memory_max_tokens": (48, "max new tokens per memory summary"),
    "memory_period_s": (10.0, "episodic memory period (0 turns it off)"),
    "temperature": (0.0, "0 is greedy"),
    "top_p": (1.0, "nucleus sampling mass"),
    "control_rate_hz": (50.0, "per-step command rate (50-70 Hz typical)"),
    "action_dt_s": (0.0, "seconds between chunk steps; 0: 1 / control_rate_hz"),
    "chunk_switch": ("rtc", "how a new chunk takes over: rtc (Real-Time Chunking: "
                                  "denoised to continue the plan in force, no fade), "
                                  "crossfade (over blend_s) or none"),
    "blend_s": (0.1, "chunk_switch crossfade: fade from the old to the new chunk this long"),
    "rtc_guidance": ("error", "rtc: error (lerobot 0.6.1's, no backward pass) or vjp (the "
                              "paper's, a backward pass through the action expert)"),
    "rtc_execution_horizon": (0, "rtc: chunk steps guided toward the plan in force, at "
                                 "least the frozen ones (0: all the plan still covers)"),
    "rtc_prefix_attention_schedule": ("exp", "rtc: weights after the frozen steps: "
                                             "zeros, ones, linear, exp"),
    "rtc_max_guidance_weight": (3.0, "rtc: clip of the guidance weight (0: no guidance; "
                                     "higher: smoother switches, more lag)"),
    "dry_run": (True, "compute and report, but publish no commands or trajectories"),
    "autostart": (True, "configure and activate at start; false: wait for a lifecycle manager"),
    "watchdog_ticks": (10, "control ticks without a fresh observation before stopping"),
    "watchdog_action": ("stop", "stop: publish nothing; hold: repeat the last command"),
    "diagnostics_period_s": (1.0, "diagnostics publishing period"),
}
RANGES = {
    "control_rate_hz": FloatingPointRange(from_value=1.0, to_value=1000.0),
    "language_floor": FloatingPointRange(from_value=0.0, to_value=1.0),
    "watchdog_ticks": IntegerRange(from_value=1, to_value=10_000),
    "num_pages": IntegerRange(from_value=1, to_value=10_000_000),
    "max_pending_requests": IntegerRange(from_value=1, to_value=1_000_000),
    "torch_threads": IntegerRange(from_value=0, to_value=1024),
    "rtc_execution_horizon": IntegerRange(from_value=0, to_value=100_000),
    "rtc_max_guidance_weight": FloatingPointRange(from_value=0.0, to_value=1e6),
}


class InferenceNode(LifecycleNode):
    def __init__(self, **kwargs):
        super().__init__("inference", **kwargs)
        for name, (default, description) in PARAMETERS.items():
            descriptor = ParameterDescriptor(description=description)
            if isinstance(RANGES.get(name), FloatingPointRange):
                descriptor.floating_point_range = [RANGES[name]]
            elif isinstance(RANGES.get(name), IntegerRange):
                descriptor.integer_range = [RANGES[name]]
            self.declare_parameter(name, default, descriptor)
        self.counters: Counter = Counter()
        self.problems = diagnostics.BurstLogger(self.get_logger())
        self.engine: Optional[OxygenEngine] = None
        self.configure_error: Optional[Exception] = None
        self._active = False
        self._entities: list = []                     # publishers, subscriptions, timers
        if self._param("autostart"):
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
        self._stale, self._active = True, True
        self.get_logger().info(f"active: commands at {1 / self.period:.0f} Hz"
                               f"{' (dry run: not published)' if self.dry_run else ''}")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        self.stream.clear()
        self.get_logger().info("inactive: no commands (chunks, dialogue and memory go on)")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._teardown()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._teardown()
        return TransitionCallbackReturn.SUCCESS

    def _configure(self) -> None:
        p = self._param
        if p("watchdog_action") not in ("stop", "hold"):
            raise ValueError("watchdog_action must be 'stop' or 'hold'")
        self.joint_names = list(p("joint_names"))
        self.lower = np.array(p("joint_lower_limits"), dtype=np.float64)
        self.upper = np.array(p("joint_upper_limits"), dtype=np.float64)
        if not (len(self.lower) == len(self.upper) == len(self.joint_names)):
            raise ValueError("joint_lower_limits, joint_upper_limits and joint_names must have "
                             "the same length")
        self.camera_names = list(p("camera_names"))
        self.period = 1.0 / p("control_rate_hz")
        self.action_dt = p("action_dt_s") or self.period
        self.dry_run = p("dry_run")
        self.instruction = p("default_instruction")
        # read once: the control tick and the observation callback run at tens of Hz
        self.watchdog_s = p("watchdog_ticks") * self.period
        self.watchdog_hold = p("watchdog_action") == "hold"
        self.torch_threads = apply_torch_threads(p("torch_threads"))

        self.model = load_model(preset=p("preset"), checkpoint=p("checkpoint"),
                                tokenizer=p("tokenizer"), device=p("device"), dtype=p("dtype"),
                                seed=p("seed"), prefix_attention=p("prefix_attention") or None,
                                asset_id=p("asset_id"), normalization=p("normalization"),
                                heads=(p("attention_heads"), p("attention_kv_heads"),
                                       p("attention_head_dim")),
                                vision_heads=p("vision_heads"))
        self.image_size = self.model.model.config.vision.image_size
        if len(self.joint_names) > self.model.model.config.action_dim:
            raise ValueError(f"{len(self.joint_names)} joints but the model acts on "
                             f"{self.model.model.config.action_dim} dimensions")
        self.engine = OxygenEngine(
            self.model.model, self._engine_config(), tokenizer=self.model.tokenizer,
            normalization=self.model.normalization, on_chunk=self._on_chunk,
            on_text=self._on_text, on_memory=self._on_memory)
        # RTC chunks continue the plan they replace, so only the cross-fade fades
        self.stream = ActionStream(p("blend_s") if p("chunk_switch") == "crossfade" else 0.0)
        # (Observation stamped on the engine clock, receipt monotonic time, ROS stamp)
        self._latest: Optional[tuple] = None
        self._frame_ros_stamp = 0.0                    # ROS stamp of the frame's observation
        self._frame_ros_stamps: OrderedDict = OrderedDict()   # frame id -> that stamp (recent)
        self._stale = True
        self._last_command: Optional[np.ndarray] = None
        self._chunk_latencies: deque = deque(maxlen=50)
        self._command_times: deque = deque(maxlen=500)
        self._frame_starts: deque = deque(maxlen=32)
        self._rates = (time.monotonic(), 0)
        self._reported_problems = 0

        control, inputs, reports = (MutuallyExclusiveCallbackGroup() for _ in range(3))
        publisher, subscription = self.create_publisher, self.create_subscription
        self.command_pub = publisher(Float64MultiArray, p("command_topic"), qos.COMMAND)
        self.chunk_pub = publisher(ActionChunk, p("action_chunk_topic"), qos.RELIABLE)
        self.trajectory_pub = publisher(JointTrajectory, p("trajectory_topic"), qos.RELIABLE)
        self.dialogue_pub = publisher(DialogueChunk, p("dialogue_topic"), qos.RELIABLE_DEEP)
        self.memory_pub = publisher(MemorySummary, p("memory_topic"), qos.RELIABLE)
        self.diagnostics_pub = publisher(DiagnosticArray, "/diagnostics", qos.RELIABLE)
        self.dialogue = DialogueRouter(self, self.engine, p("ask_action"), self.dialogue_pub,
                                       self.counters, self._bad_input)
        self._entities = [
            self.command_pub, self.chunk_pub, self.trajectory_pub, self.dialogue_pub,
            self.memory_pub, self.diagnostics_pub,
            subscription(Observation, p("observation_topic"),
                         guarded(self, self.on_observation), qos.RELIABLE, callback_group=inputs),
            subscription(String, p("dialogue_request_topic"),
                         guarded(self, self.dialogue.on_request), qos.RELIABLE_DEEP,
                         callback_group=inputs),
            subscription(String, p("instruction_topic"), guarded(self, self.on_instruction),
                         qos.LATCHED, callback_group=inputs),
            self.create_timer(self.period, guarded(self, self.control_tick),
                              callback_group=control),
            self.create_timer(p("diagnostics_period_s"), guarded(self, self.publish_diagnostics),
                              callback_group=reports)]

        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._engine_loop, name="oxygen-engine",
                                        args=(self.engine, self._stop), daemon=True)
        self._thread.start()
        self.get_logger().info(
            f"model {self.model.description}; {p('num_pages')} KV pages; "
            f"{self.torch_threads} torch threads")
        self._meets_targets = None
        self._report_capacity()

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
        if getattr(self, "dialogue", None) is not None:
            self.dialogue.abandon_all()
            self.dialogue.destroy()
            self.dialogue = None
        for entity in self._entities:
            kind = type(entity).__name__
            destroy = {"Publisher": self.destroy_publisher,
                       "Subscription": self.destroy_subscription,
                       "Timer": self.destroy_timer}.get(kind)
            if destroy is not None:
                destroy(entity)
        self._entities = []
        self.engine = self.model = None

    def wake_engine(self) -> None:
        self._wake.set()

    def _report_capacity(self) -> None:
        """Say once what this machine can deliver (and again only when that changes)."""
        capacity = self.engine.timing.capacity()
        if capacity is None or capacity.meets_targets == self._meets_targets:
            return
        self._meets_targets = capacity.meets_targets
        if capacity.meets_targets:
            self.get_logger().info(f"real-time: {capacity.describe()}")
        else:
            self.get_logger().warning(f"real-time targets cannot be met: {capacity.describe()}")

    def _param(self, name):
        return self.get_parameter(name).value

    def _engine_config(self) -> EngineConfig:
        p = self._param
        return EngineConfig(
            camera_names=tuple(p("camera_names")), page_size=p("page_size"),
            num_pages=p("num_pages"), tokens_per_frame=p("tokens_per_frame"),
            max_tokens_per_frame=p("max_tokens_per_frame"),
            dialogue_max_tokens=p("dialogue_max_tokens"),
            memory_max_tokens=p("memory_max_tokens"), memory_period_s=p("memory_period_s"),
            frame_period_s=p("frame_period_s"), action_dt_s=self.action_dt,
            chunk_switch=p("chunk_switch"), blend_s=p("blend_s"),
            rtc_guidance=p("rtc_guidance"), rtc_execution_horizon=p("rtc_execution_horizon"),
            rtc_prefix_attention_schedule=p("rtc_prefix_attention_schedule"),
            rtc_max_guidance_weight=p("rtc_max_guidance_weight"),
            deadline_margin_s=p("deadline_margin_s"),
            language_floor=p("language_floor"), request_timeout_s=p("request_timeout_s"),
            max_pending_requests=p("max_pending_requests"), cuda_graphs=p("cuda_graphs"),
            torch_compile=p("torch_compile"), temperature=p("temperature"),
            top_p=p("top_p"), seed=p("seed"))

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
        self._latest = (observation, time.monotonic(), stamp)
        self.counters["observations"] += 1
        self._wake.set()

    def on_instruction(self, msg: String) -> None:
        self.instruction = conversions.take_instruction(msg.data, self.instruction,
                                                        self._bad_input, self.get_logger())

    # -- the engine thread ----------------------------------------------------------------
    def _fresh(self) -> bool:
        latest = self._latest
        return latest is not None and time.monotonic() - latest[1] <= self.watchdog_s

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
        self.stream.push(actions, stamp, self.action_dt, now)
        self.chunk_pub.publish(conversions.action_chunk_msg(
            chunk.frame_id, stamp, chunk.actions, self.action_dt, self.joint_names))
        if self._active and not self.dry_run:
            clamped = np.clip(actions, self.lower, self.upper)
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

    # -- the control timer -----------------------------------------------------------------
    def control_tick(self) -> None:
        if not self._active:
            return
        if not self._fresh():
            if not self._stale:
                self._stale = True
                self.counters["watchdog_trips"] += 1
                self.stream.clear()
                age = time.monotonic() - self._latest[1] if self._latest else float("inf")
                self.get_logger().error(f"no fresh observation for {age:.3f} s: watchdog stops "
                                        "new actions")
            if self.watchdog_hold and self._last_command is not None:
                self._publish_command(self._last_command)
            return
        if self._stale:
            self._stale = False
            self.get_logger().info("observations are back: actions resume")
        result = self.stream.action_at(self.get_clock().now().nanoseconds * 1e-9)
        if result is None:
            return
        command, exhausted = result
        self.counters["held_commands"] += exhausted
        if not np.isfinite(command).all():
            return self._bad_input("non_finite_command", "command skipped")
        clamped = np.clip(command, self.lower, self.upper)
        self.counters["clamped_values"] += int((clamped != command).sum())
        self._last_command = clamped
        self._publish_command(clamped)

    def _publish_command(self, command: np.ndarray) -> None:
        self._command_times.append(time.monotonic())
        self.counters["commands"] += 1
        if self._active and not self.dry_run:
            self.command_pub.publish(Float64MultiArray(data=command.tolist()))

    # -- diagnostics ----------------------------------------------------------------------
    def real_time_report(self) -> dict:
        """The real-time contract in numbers, as /diagnostics and the demo summary give it."""
        engine, capacity = self.engine, self.engine.timing.capacity()
        commands, held = self.counters["commands"], self.counters["held_commands"]
        starts = list(self._frame_starts)
        gaps = [b - a for a, b in zip(starts, starts[1:])]
        latencies = list(self._chunk_latencies)
        report = {
            "frame_period_s": engine.config.frame_period_s,
            "frame_period_s_measured": percentile(gaps, 50) if gaps else 0.0,
            "deadline_misses": engine.counters["deadline_misses"],
            "commands": commands,
            "held_commands": held,
            "held_command_fraction": held / commands if commands else 0.0,
            "chunk_latency_ms_p50": percentile(latencies, 50) * 1e3 if latencies else 0.0,
            "chunk_latency_ms_max": max(latencies) * 1e3 if latencies else 0.0,
            "action_path_ms_p95": engine.timing.action_path_p95() * 1e3,
            "language_floor": engine.config.language_floor,
            "torch_threads": self.torch_threads,
            "chunk_switch": engine.config.chunk_switch,
            "rtc_chunks": engine.counters["rtc_chunks"],
            "rtc_late_switches": engine.counters["rtc_late_switches"],
        }
        if capacity is not None:
            report |= {
                "predicted_frame_period_s": capacity.frame_period_s,
                "predicted_held_fraction": capacity.predicted_held_fraction,
                "language_share": capacity.language_share,
                "chunk_age_ms": capacity.chunk_age_s * 1e3,
                "meets_targets": capacity.meets_targets,
            }
        return report

    def publish_diagnostics(self) -> None:
        now = time.monotonic()
        since, tokens_before = self._rates
        tokens = self.engine.counters["tokens"]
        self._rates = (now, tokens)
        recent = [t for t in self._command_times if t > now - 1.0]
        pool, engine = self.engine.cache.pool, self.engine
        values = {
            "action_rate_hz": float(len(recent)),
            "tokens_per_s": (tokens - tokens_before) / max(now - since, 1e-6),
            "kv_pages_in_use": pool.used_pages,
            "kv_pages_total": pool.num_pages,
            "kv_bytes_in_use": pool.bytes_in_use,
            "kv_bytes_peak": pool.peak_bytes,
            "pending_requests": engine.pending_requests,
            "running_requests": len(engine.scheduler.running),
            "waiting_for_observation": engine.waiting_for_observation,
            "timed_out_requests": engine.counters["timed_out_requests"],
            "rejected_requests": engine.counters["rejected_requests"],
            "frames": engine.counters["frames"],
            "language_tokens": engine.counters["tokens"],
            "preemptions": engine.counters["preemptions"],
            "throttled_frames": engine.counters["throttled_frames"],
            "dry_run": self.dry_run,
            "lifecycle": "active" if self._active else "inactive",
            "cancelled_requests": engine.counters["cancelled_requests"],
            "watchdog": "stale" if self._stale else "ok",
        } | self.real_time_report() \
          | {f"kv_bytes_{owner}": n for owner, n in pool.bytes_by_owner().items()} \
          | dict(self.counters)
        self._report_capacity()
        problems = (engine.counters["deadline_misses"] + self.counters["engine_errors"]
                    + sum(n for k, n in self.counters.items() if k in BAD_INPUTS))
        new_problems, self._reported_problems = problems - self._reported_problems, problems
        capacity = engine.timing.capacity()
        if not self._thread.is_alive():
            level, message = diagnostics.ERROR, "engine thread stopped"
        elif not self._active:
            level, message = diagnostics.OK, "inactive: no commands"
        elif self._stale:
            level, message = diagnostics.ERROR, "no fresh observations: actions stopped"
        elif capacity is not None and not capacity.meets_targets:
            level = diagnostics.WARN
            message = f"real-time targets cannot be met: {capacity.describe()}"
        elif new_problems:
            level, message = diagnostics.WARN, f"{new_problems} deadline misses or bad inputs"
        else:
            level, message = diagnostics.OK, "ok"
        self.diagnostics_pub.publish(diagnostics.array(
            self.get_clock().now().to_msg(),
            diagnostics.status("oxygen_ros: inference", self.get_name(), level, message, values)))

    def destroy_node(self) -> None:
        self._teardown()
        super().destroy_node()


def main(args=None) -> int:
    return run_node(InferenceNode, args,
                    make_executor=lambda: YieldingMultiThreadedExecutor(num_threads=3))


if __name__ == "__main__":
    sys.exit(main())
