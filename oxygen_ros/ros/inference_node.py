"""inference node: owns the OxyGen engine; observations and dialogue in, actions, text,
memory summaries and diagnostics out.

A managed (lifecycle) node: `configure` loads the weights and calibrates, and from then on
the engine runs (chunks, dialogue, memory and diagnostics are published); `activate` starts
the per-step commands and trajectories, `deactivate` stops them at once; `cleanup` and
`shutdown` stop the engine and release the model. With autostart (the default) the node
configures and activates itself.

Robots: one engine serves the robots in `robots` (empty: one robot), each through its
RobotPort (robot_port.py: its topics under /<robot>/, Ask action, control process and
DiagnosticStatus); their chunks are batched in one frame, their dialogue in one decode.

Threads: the engine runs control frames on its own thread (FrameLoop: a frame for the
robots whose plan in force needs a successor or whose target period has passed, language
in between); each robot's per-step commands come from its control process
(control_link.py, control_process.py), which its port sends each new chunk and each
observation's arrival — the commands never wait for inference, the executor or this
process's interpreter lock.

Clocks: the engine schedules on its own monotonic clock; an observation's ROS stamp becomes
the same age at receipt, so the plan deadline holds on wall or simulated time.
"""

import itertools
import sys
import threading
import time
from collections import Counter, deque
from typing import Optional

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.engine.frame_loop import FrameLoop
from oxygen_ros.engine.memory_release import return_freed_memory
from oxygen_ros.engine.oxygen import OxygenEngine
from oxygen_ros.engine.threads import apply_torch_threads
from oxygen_ros.model.loading import load_model
from oxygen_ros.ros import diagnostics, inference_health, lost_responses, qos, ros_parameters
from oxygen_ros.ros.config_check import check_topics
from oxygen_ros.ros.diagnostics import guarded
from oxygen_ros.ros.engine_session import EngineSession
from oxygen_ros.ros.executor import YieldingMultiThreadedExecutor
from oxygen_ros.ros.node_entities import destroy_entities
from oxygen_ros.ros.node_parameters import InferenceParameters, inference_config, inference_specs
from oxygen_ros.ros.robot_port import RobotPort
from oxygen_ros.ros.run_node import run_node

SET_WHEN = " (set while unconfigured; read at configure)"
CONFIGURED = ("inference is configured and reads its parameters at configure: deactivate "
              "and cleanup, set the parameter, then configure")


class InferenceNode(LifecycleNode):
    def __init__(self, **kwargs):
        super().__init__("inference", **kwargs)
        # the state destroy_node() tears down, set before a parameter can be refused: the
        # context's shutdown destroys a node whose constructor raised
        self.counters: Counter = Counter()             # the node's own: engine errors
        self.engine: Optional[OxygenEngine] = None
        self._session: Optional[EngineSession] = None     # the engine's way to the ports
        self.configure_error: Optional[Exception] = None
        self._active = False
        self._entities: list = []                      # the diagnostics publisher and timer
        # per robot name, kept over reconfigures (Ask server, control process, request ids)
        self._ports: dict[str, RobotPort] = {}
        self.ports: dict[str, RobotPort] = {}          # the robots served now
        self._engine_ids = itertools.count(1)          # a reconfigure goes on counting
        ros_parameters.declare(self, inference_specs(), SET_WHEN)
        ros_parameters.refuse_bad_values(self, inference_specs(), self._checked,
                                         lambda: None if self.engine is None else CONFIGURED)
        ros_parameters.freeze_clock(self, lambda: None if self.engine is None else CONFIGURED)
        lost_responses.install()
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
        for port in self.ports.values():
            port.set_active(True)
        self.get_logger().info(f"active: commands at {1 / self.period:.0f} Hz"
                               f"{' (dry run: not published)' if self.dry_run else ''}")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        for port in self.ports.values():
            port.set_active(False)
        self.get_logger().info("inactive: no commands (chunks, dialogue and memory go on)")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._teardown()
        return TransitionCallbackReturn.SUCCESS

    on_shutdown = on_cleanup

    def _checked(self, values: dict) -> tuple:
        """inference_config of the values, their topics checked as this node creates them."""
        checked = inference_config(values)
        check_topics("inference", values, self.get_fully_qualified_name())
        return checked

    def _configure(self) -> None:
        params, config = self._checked(ros_parameters.values(self, inference_specs()))
        self.period = 1.0 / params.control_rate_hz
        self.dry_run = params.dry_run
        self.torch_threads = apply_torch_threads(params.torch_threads)
        self._load_model(params, config)
        robots = list(params.robots) or [""]
        self._session = session = EngineSession()
        self.engine = OxygenEngine(
            self.model.model, config, tokenizer=self.model.tokenizer,
            normalization=self.model.normalization, robots=robots,
            on_chunk=session.deliver(self._on_chunk), on_text=session.deliver(self._on_text),
            on_memory=session.deliver(self._on_memory), dialogue_ids=self._engine_ids)
        self._rates = (time.monotonic(), 0)
        for gone in set(self._ports) - set(robots):   # a robot no longer served
            self._ports.pop(gone).destroy()
        control = dict(
            rate_hz=params.control_rate_hz, priority=params.control_priority,
            lower=params.joint_lower_limits, upper=params.joint_upper_limits,
            watchdog_s=params.watchdog_ticks * self.period,
            hold=params.watchdog_action == "hold",
            # RTC chunks continue the plan they replace, so only the cross-fade fades
            blend_s=config.blend_s if config.chunk_switch == "crossfade" else 0.0,
            publish=not self.dry_run, use_sim_time=self.get_parameter("use_sim_time").value)
        self.ports = {name: self._ports.setdefault(name, RobotPort(self, name))
                      for name in robots}
        for port in self.ports.values():
            port.bind(self.engine, params, config, control)
        self._entities = [
            self.create_publisher(DiagnosticArray, "/diagnostics", qos.RELIABLE),
            diagnostics.steady_timer(self, params.diagnostics_period_s,
                                     guarded(self, self.publish_diagnostics),
                                     callback_group=MutuallyExclusiveCallbackGroup())]
        self.diagnostics_pub = self._entities[0]
        self._stop, self._wake = threading.Event(), threading.Event()
        self._frames = FrameTimes()
        self._thread = threading.Thread(target=self._engine_loop, name="oxygen-engine",
                                        args=(self.engine, self._stop, self._wake, self._frames),
                                        daemon=True)
        self._thread.start()
        scheduling = next(iter(self.ports.values())).control.scheduling
        served = f"robots {', '.join(robots)}; " if params.robots else ""
        self.get_logger().info(f"model {self.model.description}; {served}{config.num_pages} KV "
                               f"pages; {self.torch_threads} torch threads; control loop: "
                               f"{scheduling}")
        for port in self.ports.values():
            port.report_capacity()

    def _load_model(self, params: InferenceParameters, config: EngineConfig) -> None:
        """Load the model; refuse more joints than it acts on or other than its statistics
        cover, warn of more cameras than it was made for."""
        self.model = load_model(preset=params.preset, checkpoint=params.checkpoint,
                                tokenizer=params.tokenizer, device=params.device,
                                dtype=params.dtype, seed=config.seed,
                                prefix_attention=params.prefix_attention or None,
                                asset_id=params.asset_id, normalization=params.normalization,
                                heads=(params.attention_heads, params.attention_kv_heads,
                                       params.attention_head_dim),
                                vision_heads=params.vision_heads,
                                state_prompt=params.state_prompt,
                                joints=len(params.joint_names))
        model = self.model.model.config
        self.image_size = model.vision.image_size
        if len(params.joint_names) > model.action_dim:
            raise ValueError(f"{len(params.joint_names)} joints but the model acts on "
                             f"{model.action_dim} dimensions")
        if len(config.camera_names) > model.num_cameras:
            self.get_logger().warning(
                f"{len(config.camera_names)} cameras but the model was made for "
                f"{model.num_cameras}: every camera is read, in a longer prefix than it saw "
                "in training (its actions and answers may suffer)")

    def _teardown(self) -> None:
        """Stop the engine thread, end open goals, release entities and the model."""
        self._active = False
        if getattr(self, "_thread", None) is not None:
            self._stop.set()
            self._wake.set()
            self._thread.join(timeout=10.0)
            if self._thread.is_alive():   # it owns its engine and stops after this frame
                self.get_logger().warning("engine thread still in a frame after 10 s; it "
                                          "stops when the frame ends, its outputs dropped")
            self._thread = None
        if self._session is not None:
            self._session.end()
            self._session = None
        for port in self.ports.values():
            port.unbind()
        self.ports = {}
        destroy_entities(self, self._entities)   # and empties the list
        self.engine = self.model = None
        return_freed_memory()   # else reconfigures grow the process (memory_release.py)

    def wake_engine(self) -> None:
        self._wake.set()

    def wind_down(self) -> int:
        """A stop signal (see run_node and DialogueRouter): commands stop now (the cameras
        stop with us: the watchdog would report the stop as an error), open goals end."""
        if self._active:
            self._active = False
            for port in self.ports.values():
                if port.control is not None:
                    port.set_active(False)
        return sum(port.dialogue.wind_down() for port in self.ports.values() if port.dialogue)

    def winding_down(self) -> bool:
        return any(port.dialogue is not None and port.dialogue.winding_down()
                   for port in self.ports.values())

    # -- the engine thread ----------------------------------------------------------------
    def _engine_loop(self, engine, stop: threading.Event, wake: threading.Event,
                     frames: "FrameTimes") -> None:
        # its own engine and events: a teardown that outwaits a slow frame, or a new
        # configure after it, must not change them under the running frame
        ports = list(self.ports.values())

        def newest():
            return {port.name: port.fresh_observation() for port in ports}
        loop = FrameLoop(engine, observations=newest)
        while not stop.is_set() and self.context.ok():
            began = frames.began = time.monotonic()
            try:
                pause = loop.run_robots(newest())
            except Exception as error:  # a bad frame must not end the node
                frames.began = None
                if stop.is_set() or not self.context.ok():
                    break  # torn down (the next configure's counts are not its) or shutting down
                self.counters["engine_errors"] += 1
                for port in ports:
                    port.health.frame_failed(error)   # its requests ended with engine_error
                self.get_logger().error(f"engine frame failed: {error!r}",
                                        throttle_duration_sec=5.0)
                pause = engine.config.frame_period_s
            frames.began = None
            frames.seconds.append(time.monotonic() - began)
            if pause > 0 and wake.wait(pause):
                wake.clear()

    def _on_chunk(self, chunk) -> None:
        self.ports[chunk.robot].on_chunk(chunk)

    def _on_text(self, chunk) -> None:
        self.ports[chunk.robot].on_text(chunk)

    def _on_memory(self, summary) -> None:
        self.ports[summary.robot].on_memory(summary)
        self.get_logger().debug(f"memory summary of {summary.frames} frames")

    # -- diagnostics ----------------------------------------------------------------------
    def publish_diagnostics(self) -> None:
        """One DiagnosticStatus per robot: its own commands, watchdog, requests and
        counters, with the engine's shared numbers (KV pool, tokens, frames)."""
        now = time.monotonic()
        since, tokens_before = self._rates
        engine = self.engine
        self._rates = (now, engine.counters["tokens"])
        shared = {
            "tokens_per_s": (engine.counters["tokens"] - tokens_before) / max(now - since, 1e-6),
        } | inference_health.engine_values(engine) | {
            "lost_responses": lost_responses.count(),
        } | dict(self.counters)
        began = self._frames.began
        stuck = inference_health.stuck_frame(
            None if began is None else now - began, tuple(self._frames.seconds),
            engine.model.config.action_horizon * engine.config.action_dt_s)
        statuses = [port.status(shared | inference_health.robot_values(engine, name),
                                self._thread.is_alive(), self._active, self.dry_run,
                                self.torch_threads, stuck) for name, port in self.ports.items()]
        self.diagnostics_pub.publish(diagnostics.array(self.get_clock().now().to_msg(), *statuses))

    def destroy_node(self) -> None:
        self._teardown()
        for port in self._ports.values():
            port.destroy()
        super().destroy_node()
        # rclpy's LifecycleNode.destroy_node leaves its state machine, which holds the rcl
        # node: the node would stay in the graph until this object is garbage-collected
        self._state_machine.destroy_when_not_in_use()


class FrameTimes:
    """The engine thread's frames as diagnostics see them: when the one in progress began
    (monotonic; None between frames) and how long the last ones took."""

    def __init__(self):
        self.began: Optional[float] = None
        self.seconds: deque = deque(maxlen=32)


def main(args=None) -> int:
    return run_node(InferenceNode, args,
                    make_executor=lambda: YieldingMultiThreadedExecutor(num_threads=3))


if __name__ == "__main__":
    sys.exit(main())
