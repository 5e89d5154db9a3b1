"""Both nodes' parameters, each default and limit said once, and EngineConfig from them (no ROS)."""

import dataclasses
from dataclasses import dataclass

from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.engine.parameters import Rule, Spec, build, check_all, parameter, specs
from oxygen_ros.engine.robot_names import robot_names
from oxygen_ros.model.config import PREFIX_ATTENTION, PRESETS, STATE_PROMPTS
from oxygen_ros.model.precision import DTYPE_NAMES
from oxygen_ros.ros.topic_names import action_name_problem, topic_name_problem

JOINTS = 14
MAX_PIXELS = 4096 * 4096        # default limit: above every real camera, below a bomb
TOPIC = Rule("a ROS topic name", topic_name_problem)
ACTION = Rule("a ROS action name", action_name_problem)
YAML_NULLS = ("null", "Null", "NULL", "~", "None", "none")


def path_problem(value: str) -> str:
    if value in YAML_NULLS:
        return ("rcl has no YAML null: it reads this word as a path no file has; write '' "
                "for none")
    return ""


PATH = Rule("a path, or '' for none", path_problem)


@dataclass(frozen=True)
class InferenceParameters:
    """What only the inference node knows; the engine's parameters are EngineConfig's."""
    # -- topics
    observation_topic: str = parameter("/oxygen/observation", "oxygen_ros/Observation input",
                                       rule=TOPIC)
    dialogue_request_topic: str = parameter("/oxygen/dialogue/request",
                                            "std_msgs/String requests", rule=TOPIC)
    instruction_topic: str = parameter("/oxygen/instruction",
                                       "std_msgs/String task (transient local)", rule=TOPIC)
    command_topic: str = parameter("/oxygen/joint_command",
                                   "per-step std_msgs/Float64MultiArray", rule=TOPIC)
    action_chunk_topic: str = parameter("/oxygen/action_chunk",
                                        "oxygen_ros/ActionChunk per chunk", rule=TOPIC)
    trajectory_topic: str = parameter("/oxygen/joint_trajectory",
                                      "trajectory_msgs/JointTrajectory per chunk played, and "
                                      "one holding the last command at a stop", rule=TOPIC)
    dialogue_topic: str = parameter("/oxygen/dialogue", "oxygen_ros/DialogueChunk stream",
                                    rule=TOPIC)
    memory_topic: str = parameter("/oxygen/memory", "oxygen_ros/MemorySummary", rule=TOPIC)
    ask_action: str = parameter("/oxygen/ask",
                                "oxygen_ros/action/Ask server (dialogue with feedback)",
                                rule=ACTION)
    default_instruction: str = parameter("pick up the red cup and put it in the bin",
                                         "instruction used until one arrives")
    # -- the robot, or the robots this server serves
    robots: tuple[str, ...] = parameter(
        (), "robots served by this one engine, each under /<robot>/ (its topics, Ask action, "
            "control process and diagnostics; a name is letters, digits and single "
            "underscores, starting with a letter, not ending with an underscore); empty: one "
            "robot, names as given")
    joint_names: tuple[str, ...] = parameter(
        tuple(f"joint_{i}" for i in range(JOINTS)),
        "robot joints = the first action dimensions, and the state order (an observation "
        "without one of them is dropped)")
    joint_lower_limits: tuple[float, ...] = parameter(
        (-1.0,) * JOINTS, "per-joint clamp, same order as joint_names")
    joint_upper_limits: tuple[float, ...] = parameter(
        (1.0,) * JOINTS, "per-joint clamp, same order as joint_names")
    # -- the model
    preset: str = parameter("small", "model preset when no checkpoint is given",
                            choices=tuple(PRESETS))
    checkpoint: str = parameter("", "π0.5 checkpoint directory (openpi PyTorch or lerobot "
                                    "pi05 layout)", rule=PATH)
    tokenizer: str = parameter("", "PaliGemma SentencePiece .model file (needed with a "
                                   "checkpoint)", rule=PATH)
    asset_id: str = parameter("", "openpi normalization stats to use (assets/<asset_id>/)")
    normalization: str = parameter("", "'': the checkpoint's statistics (required if it "
                                       "normalizes); identity: none", choices=("", "identity"))
    attention_heads: int = parameter(0, "Gemma heads, for a checkpoint variant the loader "
                                        "does not know (0: from the variant name)",
                                     range=(0, 4096))
    attention_kv_heads: int = parameter(0, "Gemma kv heads (with attention_heads)",
                                        range=(0, 4096))
    attention_head_dim: int = parameter(0, "Gemma head_dim (with attention_heads)",
                                        range=(0, 65_536))
    vision_heads: int = parameter(0, "SigLIP heads (0: from the width, 72 or 64 per head)",
                                  range=(0, 4096))
    device: str = parameter("cpu", "cpu, cuda or cuda:<index>", pattern=r"cpu|cuda(:\d+)?")
    dtype: str = parameter("auto", "weights and activations; auto: bfloat16 where the device "
                                   "has bf16 matrix units (AMX or AVX512-BF16 on CPU, "
                                   "tensor cores on CUDA), else float32",
                           choices=DTYPE_NAMES)
    prefix_attention: str = parameter("", "empty: the model's own",
                                      choices=("",) + PREFIX_ATTENTION)
    state_prompt: str = parameter(
        "", "how the robot state enters the prompt; empty: as the checkpoint's layout was "
            "trained (openpi: the robot's own values; lerobot and presets: padded to "
            "max_state_dim); none: no state (openpi's discrete_state_input=False, as "
            "pi05_libero)", choices=("",) + STATE_PROMPTS)
    torch_threads: int = parameter(0, "torch CPU threads; 0: all cores but one",
                                   range=(0, 1024))
    # -- commands and safety
    control_rate_hz: float = parameter(50.0, "per-step command rate (50-70 Hz typical)",
                                       range=(1.0, 1000.0))
    control_priority: int = parameter(50, "SCHED_FIFO priority of the control loop's thread "
                                          "(0: the normal scheduler; refused by the OS "
                                          "without an rtprio limit: a warning, then normal)",
                                      range=(0, 99))
    dry_run: bool = parameter(True, "compute and report, but publish no commands or "
                                    "trajectories")
    autostart: bool = parameter(True, "configure and activate at start; false: wait for a "
                                      "lifecycle manager")
    watchdog_ticks: int = parameter(25, "control ticks without a fresh observation before "
                                        "stopping", range=(1, 10_000))
    watchdog_action: str = parameter("stop", "stop: publish nothing; hold: repeat the last "
                                             "command until a fresh chunk takes over",
                                     choices=("stop", "hold"))
    diagnostics_period_s: float = parameter(1.0, "diagnostics publishing period",
                                            range=(0.01, 3600.0))

    def __post_init__(self):
        check_all(self)
        if self.robots:
            robot_names(self.robots, unnamed=False)
        if not self.joint_names or len(set(self.joint_names)) != len(self.joint_names):
            raise ValueError(f"joint_names must be distinct names, at least one, not "
                             f"{list(self.joint_names)}")
        if not len(self.joint_lower_limits) == len(self.joint_upper_limits) == len(
                self.joint_names):
            raise ValueError("joint_lower_limits, joint_upper_limits and joint_names must "
                             "have the same length")
        crossed = [name for name, low, high in zip(self.joint_names, self.joint_lower_limits,
                                                   self.joint_upper_limits) if low > high]
        if crossed:
            raise ValueError(f"joint_lower_limits above joint_upper_limits for {crossed}")


# The one place where the node's parameter differs from EngineConfig's field. A ROS
# parameter cannot be None, and the node always runs on a clock (None, EngineConfig's
# default, means no clock: benchmarks step frames themselves); the node's step is one
# control tick unless set.
ENGINE_DIFFERENCES = {
    "frame_period_s": dataclasses.replace(
        specs(EngineConfig)["frame_period_s"], default=0.5,
        description="target time between engine frames (fresh chunks); a frame comes earlier "
                    "when the plan in force needs its successor"),
    "action_dt_s": dataclasses.replace(
        specs(EngineConfig)["action_dt_s"], default=0.0, range=(0.0, 10.0),
        description="seconds between chunk steps (0.0001 to 10); 0: 1 / control_rate_hz"),
}


def engine_config(values: dict, control_period_s: float) -> EngineConfig:
    """The engine's config from the node's parameter values (action_dt_s 0: one tick)."""
    engine = {name: values[name] for name in specs(EngineConfig)}
    engine["action_dt_s"] = engine["action_dt_s"] or control_period_s
    return build(EngineConfig, engine)


def inference_config(values: dict) -> tuple[InferenceParameters, EngineConfig]:
    """The node's and the engine's parameters from the values, or ValueError saying which is
    wrong: the one check of a value, at set time and at configure."""
    params = build(InferenceParameters, values)
    return params, engine_config(values, 1.0 / params.control_rate_hz)


def inference_specs() -> dict[str, Spec]:
    """Every parameter the inference node declares: its own, then the engine's."""
    return specs(InferenceParameters) | specs(EngineConfig) | ENGINE_DIFFERENCES


@dataclass(frozen=True)
class IngestParameters:
    """camera_ingest's parameters."""
    camera_topics: tuple[str, ...] = parameter(
        ("/cameras/base/image_raw/compressed", "/cameras/left_wrist/image_raw/compressed",
         "/cameras/right_wrist/image_raw/compressed"),
        "one per camera; a topic ending in /compressed is read as CompressedImage. The first "
        "camera drives the observation rate: without its frames no observation is published "
        "(the watchdog stops the robot), while a later camera is left out once late",
        rule=TOPIC)
    camera_names: tuple[str, ...] = parameter(
        ("base", "left_wrist", "right_wrist"),
        "the cameras' model slots, as inference.camera_names")
    joint_state_topic: str = parameter("/joint_states", "sensor_msgs/JointState input",
                                       rule=TOPIC)
    instruction_topic: str = parameter("/oxygen/instruction",
                                       "std_msgs/String task (transient local)", rule=TOPIC)
    observation_topic: str = parameter("/oxygen/observation", "oxygen_ros/Observation output",
                                       rule=TOPIC)
    image_size: int = parameter(112, "model resolution in pixels (small: 112, pi05: 224)",
                                range=(8, 8192))
    resize_mode: str = parameter("pad", "pad: keep the aspect ratio on black bars (as π0.5 "
                                        "was trained); stretch", choices=("pad", "stretch"))
    sync_slop_s: float = parameter(0.025, "cameras and joint state pair when stamps differ "
                                          "by at most this", range=(0.0, 10.0))
    max_delay_s: float = parameter(0.1, "wait at most this long (in the first camera's "
                                        "stamps) for a late camera, then leave it out",
                                   range=(0.0, 10.0))
    max_age_s: float = parameter(1.0, "drop sensor messages stamped more than this in the "
                                      "past or future (frames also after their decode); "
                                      "joint states are kept this long plus max_delay_s "
                                      "and sync_slop_s for pairing, and a joint's position "
                                      "from one of several publishers counts this long",
                                 range=(1e-3, 1e12))
    max_image_pixels: int = parameter(MAX_PIXELS, "larger images are refused before decoding "
                                                  "(decompression bombs)",
                                      range=(1, 2**31 - 1))
    tiny_images: str = parameter("drop", "images under a quarter of image_size: drop "
                                         "(counted) or use", choices=("drop", "use"))
    diagnostics_period_s: float = parameter(1.0, "diagnostics publishing period",
                                            range=(0.01, 3600.0))

    def __post_init__(self):
        if len(self.camera_topics) != len(self.camera_names) or not self.camera_topics:
            raise ValueError(f"camera_topics ({len(self.camera_topics)}) and camera_names "
                             f"({len(self.camera_names)}) must be non-empty and of equal "
                             "length")
        check_all(self)


def ingest_specs() -> dict[str, Spec]:
    return specs(IngestParameters)


def ingest_parameters(values: dict) -> IngestParameters:
    """camera_ingest's parameters from the values, or ValueError saying which is wrong."""
    return build(IngestParameters, values)


# each node's parameters by node name, and the check its start runs on their values
NODE_SPECS = {"camera_ingest": ingest_specs, "inference": inference_specs}
NODE_CHECKS = {"camera_ingest": ingest_parameters, "inference": inference_config}
