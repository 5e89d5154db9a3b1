"""Every oxygen-ros verb works from a new shell after `make setup`: no AMENT_PREFIX_PATH,
no sourced setup file, only PATH and HOME."""

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

CLI = Path(sys.prefix) / "bin" / "oxygen-ros"
VERBS = ["demo", "run", "replay", "make-demo-bag", "inspect", "bench", "bench-model",
         "bench-switch", "bench-ingest", "bench-fleet", "train-demo", "evaluate-demo"]


def clean_shell(*args):
    return subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", f"HOME={Path.home()}",
                           str(CLI), *args], capture_output=True, text=True, timeout=120)


def test_help_works_from_a_clean_environment():
    result = clean_shell("--help")
    assert result.returncode == 0, result.stderr
    assert all(verb in result.stdout for verb in VERBS)


@pytest.mark.parametrize("verb", VERBS)
def test_each_verbs_help_works_from_a_clean_environment(verb):
    result = clean_shell(verb, "--help")
    assert result.returncode == 0 and "usage: oxygen-ros" in result.stdout, result.stderr


def test_make_demo_bag_runs_from_a_clean_environment(tmp_path):
    result = clean_shell("make-demo-bag", str(tmp_path / "bag"), "--duration", "1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith(
        "messages: /cameras/base/image_raw/compressed 15, /cameras/left_wrist/image_raw/"
        "compressed 15, /cameras/right_wrist/image_raw/compressed 15, /joint_states 50, "
        "/oxygen/instruction 1"), result.stdout
    assert (tmp_path / "bag" / "metadata.yaml").exists()


def run_cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "oxygen_ros.cli", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=Path(__file__).resolve().parent.parent)


def test_bad_bag_arguments_are_one_line_errors_not_tracebacks(tmp_path):
    (tmp_path / "exists").mkdir()
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("")
    cases = [
        (("make-demo-bag", str(tmp_path / "exists")), "exists; choose a new path"),
        (("make-demo-bag", str(tmp_path / "file" / "bag")), "file is a file, not a folder"),
        (("make-demo-bag", str(tmp_path / "a"), "--size", "1280"), "expected WIDTHxHEIGHT"),
        (("make-demo-bag", str(tmp_path / "a"), "--size", "1x200"),
         "--size 1x200: camera_ingest drops every frame of it by default (degenerate_aspect"),
        (("make-demo-bag", str(tmp_path / "a"), "--size", "5000x4000"), "(too_large"),
        (("make-demo-bag", str(tmp_path / "b"), "--duration", "-3"), "must be above 0, not -3"),
        (("replay", str(tmp_path / "missing")), f"replay: {tmp_path / 'missing'}: no such bag"),
        (("replay", str(tmp_path / "empty")), "oxygen-ros replay:"),
    ]
    for args, message in cases:
        result = run_cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr and "Traceback" not in result.stderr, (args, result.stderr)


def test_a_demo_bag_too_small_for_a_model_is_written_with_a_warning(tmp_path):
    small = run_cli("make-demo-bag", str(tmp_path / "small"), "--duration", "0.2",
                    "--size", "24x18")
    assert small.returncode == 0 and (tmp_path / "small" / "metadata.yaml").exists()
    assert ("warning: --size 24x18: camera_ingest drops these frames as tiny_image for a "
            "112, 224 px model") in small.stderr, small.stderr
    fine = run_cli("make-demo-bag", str(tmp_path / "fine"), "--duration", "0.2",
                   "--size", "64x48")
    assert fine.returncode == 0 and "warning" not in fine.stderr, fine.stderr


def test_replay_refuses_offsets_past_the_end_and_looping_a_zero_length_bag(tmp_path):
    assert run_cli("make-demo-bag", str(tmp_path / "bag"), "--duration", "1",
                   "--size", "64x48").returncode == 0
    late = run_cli("replay", str(tmp_path / "bag"), "--start-offset", "50")
    assert late.returncode == 2 and "past the end of the bag" in late.stderr
    (tmp_path / "qos.yaml").write_text("/joint_states: [reliability: {")
    for args, message in [(("--namespace", "bad name!"), "--namespace: Invalid namespace: "
                                                          "namespace must not contain characters "
                                                          "other than alphanumerics, '_', or '/' "
                                                          "('/bad name!')"),
                          (("--remap", "/oxygen/instruction:=/a b"),
                           "--remap: Invalid topic name: "),
                          (("--remap", "/a b:=/x"), "--remap: Invalid topic name: "),
                          (("--topics", "/joint_states", "/a b"), "--topics: Invalid topic name"),
                          (("--topics", "/joint_states", "/jiont_states"),
                           f"--topics: {tmp_path / 'bag'} has no /jiont_states (its topics: "),
                          (("--remap", "/nope:=/x"), f"--remap: {tmp_path / 'bag'} has no /nope"),
                          (("--qos-overrides", str(tmp_path / "qos.yaml")),
                           "replay: --qos-overrides: " + str(tmp_path / "qos.yaml") + ": not YAML"),
                          (("--qos-overrides", str(tmp_path / "none.yaml")),
                           "replay: --qos-overrides " + str(tmp_path / "none.yaml")
                           + ": No such file or directory")]:
        refused = run_cli("replay", str(tmp_path / "bag"), *args)
        assert refused.returncode == 2 and message in refused.stderr, (args, refused.stderr)
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    from rosbags.rosbag2 import Writer

    from oxygen_ros.ros.bag import TYPESTORE
    with Writer(tmp_path / "instant", version=8) as writer:
        connection = writer.add_connection("/oxygen/instruction", "std_msgs/msg/String",
                                           typestore=TYPESTORE)
        message = TYPESTORE.types["std_msgs/msg/String"](data="hi")
        writer.write(connection, 10**9, TYPESTORE.serialize_cdr(message, "std_msgs/msg/String"))
    looped = run_cli("replay", str(tmp_path / "instant"), "--loop")
    assert looped.returncode == 2 and "cannot loop" in looped.stderr
    with Writer(tmp_path / "silent", version=8) as writer:     # a topic, no message on it
        writer.add_connection("/oxygen/instruction", "std_msgs/msg/String", typestore=TYPESTORE)
    silent = run_cli("replay", str(tmp_path / "silent"))
    assert silent.returncode == 2 and silent.stderr == (
        f"oxygen-ros replay: {tmp_path / 'silent'} holds no messages\n"), silent.stderr


def test_replay_warns_that_another_rate_on_clock_outpaces_the_engines_schedule(tmp_path):
    assert run_cli("make-demo-bag", str(tmp_path / "bag"), "--duration", "1",
                   "--size", "64x48").returncode == 0
    warning = "warning: --rate 4 with --clock: use_sim_time nodes play each plan on /clock, 4x"
    fast = run_cli("replay", str(tmp_path / "bag"), "--clock", "100", "--rate", "4",
                   "--delay", "0")
    assert fast.returncode == 0 and warning in fast.stderr, fast.stderr
    for args in (("--clock", "100"), ("--rate", "4", "--restamp")):    # rate 1; wall clock
        quiet = run_cli("replay", str(tmp_path / "bag"), *args, "--delay", "0")
        assert quiet.returncode == 0 and "warning" not in quiet.stderr, (args, quiet.stderr)


def test_replay_of_an_old_bag_with_its_stamps_kept_warns_that_they_are_stale(tmp_path):
    """The demo bag is stamped from 2023-11-14: kept as recorded, wall-clock nodes would
    drop every observation; the warning names the two ways out."""
    assert run_cli("make-demo-bag", str(tmp_path / "bag"), "--duration", "1",
                   "--size", "64x48").returncode == 0
    kept = run_cli("replay", str(tmp_path / "bag"), "--delay", "0")
    assert kept.returncode == 0, kept.stderr
    assert re.search(r"warning: \S+bag is stamped \d+\.\d days in the past, and its stamps are "
                     r"kept: nodes on the wall clock drop its observations as stale; add "
                     r"--restamp, or --clock HZ for use_sim_time:=true nodes", kept.stderr), \
        kept.stderr
    days = float(re.search(r"stamped (\S+) days", kept.stderr).group(1))
    assert abs(days - (time.time() - 1_700_000_000) / 86400) < 0.2, days
    from rosbags.rosbag2 import Writer     # a bag of messages without a header: no stamps

    from oxygen_ros.ros.bag import TYPESTORE
    with Writer(tmp_path / "task", version=8) as writer:
        connection = writer.add_connection("/oxygen/instruction", "std_msgs/msg/String",
                                           typestore=TYPESTORE)
        message = TYPESTORE.types["std_msgs/msg/String"](data="pick it up")
        writer.write(connection, 10**9, TYPESTORE.serialize_cdr(message, "std_msgs/msg/String"))
    task = run_cli("replay", str(tmp_path / "task"), "--delay", "0")
    assert task.returncode == 0 and "warning" not in task.stderr, task.stderr


def test_replay_with_start_on_stdin_waits_for_a_line_before_the_first_message(tmp_path):
    assert run_cli("make-demo-bag", str(tmp_path / "bag"), "--duration", "1",
                   "--size", "64x48").returncode == 0
    replay = subprocess.Popen([sys.executable, "-m", "oxygen_ros.cli", "replay",
                               str(tmp_path / "bag"), "--restamp", "--delay", "0",
                               "--start-on-stdin"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parent.parent)
    try:
        lines = []
        while not (lines and lines[-1].startswith("ready:")):
            line = replay.stdout.readline()
            assert line, (lines, replay.stderr.read())
            lines.append(line)
        assert not any(line.startswith("replay clock") for line in lines), lines
        sent = time.time()
        replay.stdin.write("go\n")
        replay.stdin.close()
        rest = replay.stdout.read()
        assert replay.wait(timeout=120) == 0, replay.stderr.read()
        assert rest.startswith("replay clock: bag time 0 s = wall time "), rest
        started = float(rest.splitlines()[0].rsplit(" ", 1)[1])
        assert started >= sent, (started, sent)  # bag time 0 came after the line, not before
        assert "published 96 messages" in rest, rest
    finally:
        replay.kill()
        replay.wait()
        replay.stdout.close()
        replay.stderr.close()


def test_gpu_check_without_torch_says_which_python_to_use():
    script = Path(__file__).resolve().parent.parent / "tools" / "gpu_check.py"
    result = subprocess.run([sys.executable, "-S", str(script), "--device", "cpu"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "has no torch" in result.stderr


def test_evaluate_demo_refuses_bad_input_in_one_line(tmp_path):
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / "model.safetensors").write_bytes(b"not safetensors")
    cases = [(("--checkpoint", str(tmp_path / "missing")), "no such checkpoint"),
             (("--checkpoint", str(tmp_path / "garbage")), "not a readable safetensors file"),
             (("--worlds", "0"), "--worlds: must be at least 1"),
             (("--first-world", "-5"), "--first-world: must be at least 0"),
             (("--threads", "-3"), "--threads: must be at least 0"),
             (("--json", str(tmp_path / "garbage" / "model.safetensors" / "x.json")),
              "model.safetensors is a file, not a folder")]
    for args, message in cases:
        result = run_cli("evaluate-demo", *args)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr and "Traceback" not in result.stderr, (args, result.stderr)


def test_evaluate_demo_writes_the_bfloat16_agreement_to_its_json_file(tmp_path):
    result = run_cli("evaluate-demo", "--worlds", "1", "--threads", "1",
                     "--bfloat16-agreement", "--json", str(tmp_path / "agreement.json"),
                     timeout=300)
    assert result.returncode == 0, result.stderr
    written = json.loads((tmp_path / "agreement.json").read_text())
    assert written["bfloat16_vs_float32"]["worlds"] == 1
    assert 0 <= written["bfloat16_vs_float32"]["action_max_difference"] <= 0.02
    assert "bfloat16_vs_float32" not in result.stdout          # the file instead of stdout


def test_train_demo_refuses_bad_input_before_training(tmp_path):
    (tmp_path / "file").write_text("")
    cases = [(("--steps", "0"), "--steps: must be at least 1, not 0"),
             (("--steps", "-1"), "--steps: must be at least 1"),
             (("--vision-steps", "-1"), "--vision-steps: must be at least 0"),
             (("--eval-worlds", "0"), "--eval-worlds: must be at least 1"),
             (("--threads", "-3"), "--threads: must be at least 0"),
             (("--lr", "0"), "--lr: must be above 0"),
             (("--time-budget", "nan"), "--time-budget: expected a finite number, not nan"),
             (("--out", str(tmp_path / "file")), "File exists")]
    for args, message in cases:
        out = ("--out", str(tmp_path / "checkpoint")) if args[0] != "--out" else ()
        result = run_cli("train-demo", *out, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr and "Traceback" not in result.stderr, (args, result.stderr)
        assert "seeing first" not in result.stderr          # refused before any training
    assert not (tmp_path / "checkpoint").exists()


def kernel_refuses(size: int) -> bool:
    """Linux refuses one allocation of `size` bytes outright: more than RAM + swap, and not
    told to overcommit always (there it would be granted, then touched: the OOM killer)."""
    try:
        mode = Path("/proc/sys/vm/overcommit_memory").read_text().strip()
        info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    except OSError:
        return False
    kib = int(info["MemTotal"].split()[0]) + int(info["SwapTotal"].split()[0])
    return mode != "1" and size > kib * 1024


@pytest.mark.skipif(not kernel_refuses(2**40), reason="this kernel would grant a terabyte "
                                                      "and let the OOM killer end the test")
def test_an_allocation_past_the_machine_is_one_line(tmp_path):
    """A checkpoint whose config.json asks for the longest chunk it may (2^31 - 1 steps, a
    terabyte of activations): the allocator's refusal, not a C++ traceback."""
    import shutil

    checkpoint = tmp_path / "huge"
    shutil.copytree(Path(__file__).resolve().parent.parent / "models" / "demo", checkpoint)
    config = json.loads((checkpoint / "config.json").read_text())
    config["chunk_size"] = config["n_action_steps"] = 2**31 - 1
    (checkpoint / "config.json").write_text(json.dumps(config))
    result = run_cli("bench-model", "--checkpoint", str(checkpoint), "--repeats", "1",
                     "--batches", "1", timeout=300)
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(
        "oxygen-ros bench-model: out of memory: can't allocate memory: you tried to allocate")
    assert "Traceback" not in result.stderr


def test_bench_model_refuses_counts_below_one_in_one_line():
    for args, message in [(("--robots", "1", "0"), "--robots: must be at least 1, not 0"),
                          (("--batches", "0"), "--batches: must be at least 1, not 0")]:
        result = run_cli("bench-model", "--preset", "tiny", *args)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr and "Traceback" not in result.stderr, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_bench_model_measures_a_dtype_named_twice_once(tmp_path):
    # (auto,bfloat16 on a CPU with bf16 units is the same pair; named here so that it is on
    # every machine)
    result = run_cli("bench-model", "--preset", "tiny", "--dtype", "float32,bfloat16,float32",
                     "--repeats", "1", "--batches", "1", "--decode-tokens", "1",
                     "--json", str(tmp_path / "model.json"), timeout=300)
    assert result.returncode == 0, result.stderr
    assert "--dtype float32 is float32 here, as float32 is: measured once" in result.stdout
    assert sorted(json.loads((tmp_path / "model.json").read_text())) == ["bfloat16", "float32"]


def refusal(argv, capsys) -> str:
    """The one line a verb refuses argv with (exit 2), run as the CLI runs it, in this
    process (main() without its signal handlers; torch's thread count put back)."""
    import torch

    from oxygen_ros.cli import build_parser

    threads = torch.get_num_threads()
    try:
        args = build_parser().parse_args(argv)
        code = args.func(args)
    except SystemExit as exit:
        code = exit.code
    finally:
        torch.set_num_threads(threads)
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, (argv, code, lines)
    return lines[0]


BAD_OPTIONS = [
    (["bench", "--frames", "0"], "oxygen-ros bench: argument --frames: must be at least 1, not 0"),
    (["bench", "--frames", "ten"], "argument --frames: expected an integer, not 'ten'"),
    (["bench", "--preset", "nosuch"], "argument --preset: invalid choice: 'nosuch'"),
    (["bench", "--denoise-steps", "0"], "--denoise-steps: must be at least 1, not 0"),
    (["bench", "--camera-every", "0"], "--camera-every: must be at least 1, not 0"),
    (["bench", "--dialogue-per-frame", "-1"], "--dialogue-per-frame: must be at least 0"),
    (["bench", "--decode-tokens", "0"], "--decode-tokens: must be at least 1, not 0"),
    (["bench", "--memory-period-frames", "-1"], "--memory-period-frames: must be at least 0"),
    (["bench", "--device", "tpu"], "--device tpu: expected cpu, cuda or cuda:N"),
    (["bench", "--json", "/"], "argument --json: / is a folder; give a file path"),
    (["bench-model", "--repeats", "0"], "--repeats: must be at least 1, not 0"),
    (["bench-model", "--threads", "-1"], "--threads: must be at least 0, not -1"),
    (["bench-model", "--decode-tokens", "0"], "--decode-tokens: must be at least 1, not 0"),
    (["bench-model", "--dtype", "float16"], "float16: choose from auto, float32, bfloat16"),
    (["bench-model", "--checkpoint", "/nonexistent"], "no such checkpoint file or directory"),
    (["inspect", ""], "the checkpoint path is empty"),
    (["inspect", "/dev/null"], "/dev/null: not a regular file or directory"),
    (["bench-switch", "--chunks", "1"], "--chunks: must be at least 2, not 1"),
    (["bench-switch", "--delays", "0.2", "1.5"], "--delays: must be below 1, not 1.5"),
    (["bench-switch", "--delays", "0.99"], "--delays 0.99: a delay of 50 steps leaves no "
                                           "step of the 50-step chunk to switch in"),
    (["bench-switch", "--checkpoint", "/nonexistent"], "no such checkpoint file or directory"),
    (["bench-switch", "--world", "-1"], "--world: must be at least 0, not -1"),
    (["bench-switch", "--blend-s", "-1"], "--blend-s: must be at least 0, not -1"),
    (["bench-switch", "--execution-horizon", "-5"], "--execution-horizon: must be at least 0"),
    (["bench", "--tokens-per-frame", "0"], "--tokens-per-frame: must be at least 1, not 0"),
    (["bench-ingest", "--size", "0"], "--size: must be at least 1, not 0"),
    (["bench-ingest", "--size", "100000"], "--size: must be at most 4096, not 100000"),
    (["bench-ingest", "--repeats", "0"], "--repeats: must be at least 1, not 0"),
    (["bench-fleet", "--duration", "0"], "--duration: must be above 0, not 0"),
    (["make-demo-bag", "new", "--duration", "1e9"], "--duration: must be at most 3600"),
    (["make-demo-bag", "new", "--camera-hz", "nan"], "--camera-hz: expected a finite number"),
    (["make-demo-bag", "new", "--size", "100000x100000"], "pixels > the limit of 16777216"),
    (["make-demo-bag", "new", "--seed", "-1"], "--seed: must be at least 0, not -1"),
    (["make-demo-bag", "new", "--duration", "0.01"], "--duration, --camera-hz: a bag of 0.01 s at "
                                                     "15 Hz holds no camera frame; it needs at "
                                                     "least 0.067 s"),
    (["make-demo-bag", "new", "--seed", "1" + "0" * 400], "--seed: must be at most 2147483647"),
    (["bench-switch", "--chunks", "9" * 400], "--chunks: must be at most 1000"),
    (["make-demo-bag", "new", "--duration", "0.0333", "--camera-hz", "30"],
     "it needs at least 0.034 s"),
    (["demo", "--duration", "0.05"], "argument --duration: a bag of 0.05 s at 15 Hz holds no"),
    (["bench-fleet", "--duration", "0.05"], "argument --duration: a bag of 0.05 s at 15 Hz"),
    (["bench-switch", "--execution-horizon", "200000"], "must be at most 100000, not 200000"),
    (["bench-switch", "--max-guidance-weight", "1e7"], "must be at most 1000000, not 1e7"),
    (["bench-switch", "--seed", "2147483648"], "--seed: must be at most 2147483647"),
    (["bench", "--dialogue-per-frame", "inf"], "expected a finite number, not inf"),
    (["replay", "bag", "--start-offset", "1e300"], "--start-offset: must be at most 1000000000"),
    (["replay", "bag", "--delay", "inf"], "--delay: expected a finite number, not inf"),
    (["run", "--duration", "nan"], "--duration: expected a finite number, not nan"),
    (["run", "--duration", "-5"], "--duration: must be at least 0, not -5"),
    (["run", "-p", "camera_ingest:camera_names:=[base, left_wirst]"],
     "camera_ingest's camera_names ['base', 'left_wirst'] has ['left_wirst'], which inference's"),
    (["demo", "-p", "inference:camera_names:=[base]"], "has ['left_wrist', 'right_wrist'], "
                                                      "which inference's ['base'] has not"),
    (["run", "-p", "inference:joint_lower_limits:=[-1.0, -1.0]"],
     "inference: joint_lower_limits, joint_upper_limits and joint_names must have the same "
     "length"),
    (["demo", "-p", "camera_ingest:camera_topics:=[/cameras/base/image_raw]"],
     "camera_ingest: camera_topics (1) and camera_names (3) must be non-empty and of equal "
     "length"),
    (["replay", "bag", "--rate", "1e-12"], "--rate: must be at least 0.001, not 1e-12"),
    (["replay", "bag", "--remap", "foo"], "--remap: expected OLD:=NEW, not 'foo'"),
    (["replay", "bag", "--remap", ":=/x"], "--remap: expected OLD:=NEW, not ':=/x'"),
    (["replay", "bag", "--clock", "-5"], "--clock: must be at least 0, not -5"),
    (["replay", "bag", "--restamp", "--clock", "100"],
     "argument --clock: not allowed with argument --restamp"),
    (["replay", "bag", "--start-offset", "-1"], "--start-offset: must be at least 0, not -1"),
    (["inspect", "models/demo", "--kv-pages", "0"], "--kv-pages: must be at least 1, not 0"),
    (["inspect", "models/demo", "--page-size", "5000"], "--page-size: must be at most 4096"),
    (["demo", "--robots", "0"], "--robots: must be at least 1, not 0"),
    (["demo", "--kill-camera", "3"], "--kill-camera needs --robots 2 or more, not 1"),
    (["run", "--checkpoint", "ck"], "oxygen-ros run: unrecognized arguments: --checkpoint ck; "
                                    "a node parameter is -p inference:checkpoint:=VALUE "
                                    "(see oxygen-ros run --help)"),
    (["run", "-p", "inference:robots:=[x_]"], "robot name 'x_': use letters, digits"),
    (["run", "--single-process", "-p", "inference:robots:=[alpha, beta]"],
     "--single-process runs one robot's nodes, and inference serves robots alpha, beta (run "
     "without --single-process: each robot's camera_ingest in its namespace)"),
    (["run", "-p", "inference:dialogue_topic:={node}/x"],
     "(YAML reads a value starting with '{' as a mapping: quote it, as "
     "inference:dialogue_topic:='\"{node}/x\"')"),
    (["inspect", "ck", "--bogus"], "oxygen-ros inspect: unrecognized arguments: --bogus "
                                   "(see oxygen-ros inspect --help)"),
]


@pytest.mark.parametrize("argv, message", BAD_OPTIONS, ids=[" ".join(a) for a, _ in BAD_OPTIONS])
def test_each_bad_option_is_refused_in_one_line_before_any_work(argv, message, capsys,
                                                                 monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    assert message in refusal(argv, capsys)


def test_a_device_this_torch_cannot_use_is_refused(capsys):
    import torch

    line = refusal(["bench", "--device", "cuda:99"], capsys)
    why = "this machine has" if torch.cuda.is_available() else "this torch cannot use CUDA"
    assert f"--device cuda:99: {why}" in line


def test_a_json_path_under_a_file_is_refused_before_the_run_and_missing_folders_are_made(
        tmp_path, capsys):
    (tmp_path / "file").write_text("")
    line = refusal(["bench-ingest", "--repeats", "1", "--json",
                    str(tmp_path / "file" / "x.json")], capsys)
    assert "file is a file, not a folder" in line
    line = refusal(["bench", "--plot", str(tmp_path / "file" / "x.png")], capsys)
    assert "argument --plot:" in line and "file is a file, not a folder" in line
    from oxygen_ros.cli import build_parser

    args = build_parser().parse_args(["bench-ingest", "--repeats", "1", "--json",
                                      str(tmp_path / "new" / "folder" / "x.json")])
    assert args.func(args) == 0
    rows = json.loads((tmp_path / "new" / "folder" / "x.json").read_text())
    assert [row["resolution"] for row in rows] and all(row["raw_ms"] > 0 for row in rows)


@pytest.mark.parametrize("argv", [["--help"], ["replay", "--help"], ["bench", "--help"]])
def test_help_loads_neither_torch_nor_rclpy(argv):
    """The command line imports the model and ROS only inside the handler that needs them:
    `replay` (a child of every demo) and every --help start without torch."""
    probe = ("import sys\nfrom oxygen_ros.cli import main\ntry:\n    main(sys.argv[1:])\n"
             "except SystemExit:\n    pass\n"
             "print(sorted(m for m in ('torch', 'rclpy') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True,
                            text=True, timeout=120, cwd=Path(__file__).resolve().parent.parent)
    assert result.returncode == 0, result.stderr
    assert "usage: oxygen-ros" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_a_config_file_that_does_not_exist_stops_run_and_demo_naming_it(tmp_path):
    missing = tmp_path / "humanoid_typo.yaml"
    for verb in ("run", "demo"):
        result = run_cli(verb, "--config", str(missing), timeout=60)
        assert result.returncode == 2, (verb, result.stderr)
        assert f"config file {missing} does not exist" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


def test_a_config_file_the_nodes_would_not_take_stops_run_and_demo_in_one_line(tmp_path):
    cases = [("typo.yaml", "inference:\n  ros__parameters:\n    frame_perod_s: 0.1\n",
              "did you mean 'frame_period_s'?"),
             ("broken.yaml", "inference: [\n", "is not valid YAML"),
             ("lengths.yaml", "inference:\n  ros__parameters:\n    joint_lower_limits: "
              "[-1.0, -1.0]\n", "inference: joint_lower_limits, joint_upper_limits and "
                                "joint_names must have the same length"),
             ("folder", None, "is a directory")]
    for name, text, message in cases:
        config = tmp_path / name
        config.write_text(text) if text is not None else config.mkdir()
        for verb in ("run", "demo"):
            result = run_cli(verb, "--config", str(config), timeout=60)
            assert result.returncode == 2, (verb, result.stderr)
            assert message in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_a_demo_bag_that_is_no_bag_stops_the_demo_before_anything_starts(tmp_path):
    (tmp_path / "notes.txt").write_text("not a bag")
    for bag, message in [(tmp_path / "notes.txt", "Unrecognized storage format"),
                         (tmp_path, "metadata")]:
        result = run_cli("demo", "--bag", str(bag), timeout=60)
        assert result.returncode == 2 and f"--bag {bag}: " in result.stderr, result.stderr
        assert message in result.stderr and "Traceback" not in result.stderr


def test_a_parameter_override_is_checked_before_anything_starts():
    cases = [("badformat", "expected NODE:NAME:=VALUE"),
             ("inferense:preset:=tiny", "did you mean 'inference'?"),
             ("inference:tokens_per_frmae:=8", "did you mean 'tokens_per_frame'?"),
             ("inference:frame_period_s:=fast", "frame_period_s must be a number, not 'fast'"),
             ("camera_ingest:image_size:=28.5", "image_size must be a whole number"),
             ("inference:control_rate_hz:=2000", "must be in [1.0, 1000.0]")]
    for param, message in cases:
        for verb in ("run", "demo"):
            result = run_cli(verb, "-p", param, timeout=60)
            assert result.returncode == 2, (param, result.stderr)
            assert message in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_an_override_is_typed_as_rcl_types_it_and_written_into_one_yaml(tmp_path):
    from oxygen_ros.cli.options import chosen_config, node_parameter, node_ros_args
    from oxygen_ros.ros import rcl_yaml

    assert node_parameter("inference:control_rate_hz:=60") == ("inference", "control_rate_hz",
                                                               60.0)
    assert node_parameter("camera_ingest:sync_slop_s:=1e-3")[2] == 0.001   # YAML 1.1: text
    assert node_parameter("inference:dry_run:=Y")[2] is True
    assert node_parameter("inference:joint_lower_limits:=[-1, 2]")[2] == [-1.0, 2.0]
    assert node_parameter("inference:checkpoint:=''")[2] == ""
    assert node_parameter("inference:default_instruction:=pick it up")[2] == "pick it up"
    # rcl given a file's 60 and a -p's 70.5 keeps the int: one YAML holds the overrides
    config = tmp_path / "params.yaml"
    config.write_text("inference:\n  ros__parameters:\n    control_rate_hz: 60\n"
                      "    default_instruction: 'Y'\n")
    arguments = {"config_file": str(config), "preset": "tiny"}
    args = node_ros_args(arguments, chosen_config(arguments),
                         [node_parameter("inference:control_rate_hz:=70.5"),
                          node_parameter("inference:preset:=small")])
    assert args[:3] == ["oxygen-ros", "--ros-args", "--params-file"] and len(args) == 4
    written = rcl_yaml.load(Path(args[3]).read_text())["inference"]["ros__parameters"]
    assert written == {"control_rate_hz": 70.5, "default_instruction": "Y",
                       "preset": "small"}        # a -p after the launch argument it repeats


def test_an_override_rcl_would_refuse_is_refused_first():
    for param, message in [("inference:checkpoint:=", "without a value"),
                           ("inference:joint_names:=[a, 1]", "must be a string")]:
        result = run_cli("run", "-p", param, timeout=60)
        assert result.returncode == 2 and message in result.stderr, result.stderr


@pytest.mark.parametrize("verb, preset", [("run", None), ("run", "small"), ("run", "tiny"),
                                          ("run", "pi05"), ("run", "demo"), ("demo", None),
                                          ("demo", "tiny")])
def test_preset_picks_the_yaml_the_launch_plan_picks(verb, preset):
    from oxygen_ros.cli import build_parser
    from oxygen_ros.cli.options import chosen_config, launch_arguments, node_ros_args
    from oxygen_ros.ros import launch_plan

    config = Path(__file__).resolve().parent.parent / "config"
    args = build_parser().parse_args([verb] + (["--preset", preset] if preset else []))
    arguments = launch_arguments(args)
    ros_args = node_ros_args(arguments, chosen_config(arguments), args.param)
    launched = preset or ("demo" if verb == "demo" else "")
    assert ros_args[2:4] == ["--params-file",
                             str(launch_plan.config_file({"preset": launched}, config))]
    assert (f"inference:preset:={launched}" in ros_args) == bool(launched)


@pytest.mark.parametrize("verb", ["run", "demo", "bench-fleet"])
def test_a_config_without_preset_runs_the_yamls_preset_as_the_launch_file_does(verb):
    """`demo --config humanoid.yaml` runs the YAML's `small`, not the demo's default preset."""
    from oxygen_ros.cli import build_parser
    from oxygen_ros.cli.demo import demo_configuration
    from oxygen_ros.cli.options import chosen_config, launch_arguments, node_ros_args

    config = Path(__file__).resolve().parent.parent / "config" / "humanoid.yaml"
    args = build_parser().parse_args([verb, "--config", str(config)])
    arguments = launch_arguments(args)
    assert arguments == {"config_file": str(config)}
    assert node_ros_args(arguments, chosen_config(arguments), args.param) == [
        "oxygen-ros", "--ros-args", "--params-file", str(config)]
    if verb != "run":
        assert demo_configuration(args).node_args == [
            "oxygen-ros", "--ros-args", "--params-file", str(config), "-p",
            "inference:dry_run:=false"]
    given = build_parser().parse_args([verb, "--config", str(config), "--preset", "tiny"])
    assert launch_arguments(given)["preset"] == "tiny"


def test_replay_leaves_out_topics_of_types_not_installed_unless_named(tmp_path):
    from rosbags.rosbag2 import Writer
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)        # a vendor's type, as their bag has it
    store.register(get_types_from_msg("int32 x", "my_msgs/msg/Foo"))
    for name, topics in (("mixed", ("/oxygen/instruction", "/foo")), ("vendor", ("/foo",))):
        with Writer(tmp_path / name, version=8) as writer:
            for topic in topics:
                msgtype = "my_msgs/msg/Foo" if topic == "/foo" else "std_msgs/msg/String"
                message = store.types[msgtype](x=1) if topic == "/foo" else \
                    store.types[msgtype](data="stack the cups")
                writer.write(writer.add_connection(topic, msgtype, typestore=store), 10**9,
                             store.serialize_cdr(message, msgtype))
    mixed = run_cli("replay", str(tmp_path / "mixed"), "--delay", "0")
    assert mixed.returncode == 0, mixed.stderr
    assert ("left out /foo (my_msgs/msg/Foo): no installed package defines their types"
            in mixed.stderr), mixed.stderr
    assert "published 1 messages: {'/oxygen/instruction': 1}" in mixed.stdout, mixed.stdout
    for args, message in [
            (("mixed", "--topics", "/foo"), "replay: --topics: no installed package defines "
                                            "the type of /foo (my_msgs/msg/Foo) (source the "
                                            "workspace that builds it)"),
            (("mixed", "--remap", "/foo:=/bar"), "replay: --remap: no installed package"),
            (("vendor",), "no installed package defines the type of any of its topics: "
                          "/foo (my_msgs/msg/Foo)")]:
        refused = run_cli("replay", str(tmp_path / args[0]), *args[1:], "--delay", "0")
        assert refused.returncode == 2 and message in refused.stderr, (args, refused.stderr)
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr


def test_the_files_values_and_the_overrides_are_checked_together_as_the_node_gets_them(tmp_path):
    from oxygen_ros.cli.options import node_ros_args

    config = tmp_path / "robot.yaml"      # a full-name section, two joints
    config.write_text("/inference:\n  ros__parameters:\n    joint_names: [a, b]\n"
                      "    joint_lower_limits: [-1.0, -1.0]\n    joint_upper_limits: [1.0, 1.0]\n")
    arguments = {"config_file": str(config)}
    assert node_ros_args(arguments, config, [("inference", "joint_names", ["c", "d"])])[:3] == [
        "oxygen-ros", "--ros-args", "--params-file"]
    with pytest.raises(ValueError, match="^inference: joint_lower_limits, joint_upper_limits"):
        node_ros_args(arguments, config, [("inference", "joint_names", ["c"])])


@pytest.mark.parametrize("section", ["inference", "/inference", "/**/inference"])
def test_run_serves_the_robots_of_any_section_that_reaches_the_inference_node(tmp_path,
                                                                              section):
    """`oxygen-ros run` starts a camera_ingest per robot the inference node will serve: its
    robots from whichever YAML section reaches /inference, as rcl gives them, or a -p."""
    from oxygen_ros.cli import build_parser
    from oxygen_ros.cli.options import chosen_config, launch_arguments
    from oxygen_ros.cli.robot import served_robots

    config = tmp_path / "fleet.yaml"
    config.write_text(f"{section}:\n  ros__parameters:\n    preset: tiny\n"
                      "    robots: [alpha, beta]\n")
    args = build_parser().parse_args(["run", "--config", str(config)])
    arguments = launch_arguments(args)
    assert served_robots(arguments, chosen_config(arguments), args.param) == ["alpha", "beta"]
    args = build_parser().parse_args(["run", "--config", str(config),
                                      "-p", "inference:robots:=[gamma]"])
    assert served_robots(arguments, chosen_config(arguments), args.param) == ["gamma"]


def test_demo_robots_serve_the_demos_robots_and_say_the_configs_are_not_used(tmp_path, capsys):
    """A config naming its own robots: `demo --robots 2` serves robot_0 and robot_1 (their
    namespaced camera_ingests feed them: no warning that they feed nobody) and says the
    config's robots are not used."""
    from oxygen_ros.cli import build_parser
    from oxygen_ros.cli.demo import demo_configuration
    from oxygen_ros.ros import rcl_yaml

    config = tmp_path / "fleet.yaml"
    config.write_text("inference:\n  ros__parameters:\n    preset: demo\n"
                      "    robots: [left_arm, right_arm]\n")
    args = build_parser().parse_args(["demo", "--robots", "2", "--config", str(config)])
    node_args = demo_configuration(args, 2).node_args
    served = rcl_yaml.load(Path(node_args[node_args.index("--params-file") + 1]).read_text())
    assert served["inference"]["ros__parameters"]["robots"] == ["robot_0", "robot_1"]
    assert served["inference"]["ros__parameters"]["dry_run"] is False
    assert capsys.readouterr().err == (
        "warning: demo --robots 2 serves robot_0, robot_1, each fed from its own bag: "
        "inference's robots ['left_arm', 'right_arm'] are not used\n")
