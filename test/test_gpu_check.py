"""tools/gpu_check.py — the prepared GPU check — documents its stages and runs to the end
on a CPU (dry run), writing a JSON with every stage's result."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "tools" / "gpu_check.py"


def test_help_documents_every_stage():
    result = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0
    for stage in ("kernels", "parity", "bench_model", "bench_engine", "profile", "--device",
                  "--out"):
        assert stage in result.stdout


def test_a_cpu_dry_run_completes_every_stage_and_writes_the_json(tmp_path):
    result = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--preset", "tiny",
                             "--frames", "3", "--out", str(tmp_path)], capture_output=True,
                            text=True, timeout=600, cwd=REPO)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    stages = report["stages"]
    assert {name: stage["status"] for name, stage in stages.items()} == dict.fromkeys(
        ("kernels", "parity", "bench_model", "bench_engine", "profile"), "ok"), \
        result.stdout[-3000:]
    assert stages["kernels"]["result"]["ok"] and stages["parity"]["result"]["ok"]
    assert stages["parity"]["result"]["tokens_agreeing"] == 24
    assert stages["parity"]["result"]["guided_graph_difference"] < 1e-5
    assert stages["bench_model"]["result"]["eager"]["chunk_ms"] > 0
    assert set(stages["bench_engine"]["result"]["modes"]) == {"isolated", "shared_kv", "oxygen"}
    profiled = stages["profile"]["result"]
    assert set(profiled) == {"prefill", "denoise", "decode_8_steps"}
    assert all(p["device_ms"] > 0 and p["top"] for p in profiled.values())
    assert (tmp_path / "gpu_check.log").read_text().count("] ok in") == 5
