"""The model benchmark's numbers are measured and consistent with each other (not timed)."""

import gc
import mmap
import os
from dataclasses import replace

import pytest
import torch

from oxygen_ros.bench import model as benchmark
from oxygen_ros.model.config import preset
from oxygen_ros.model.pi05 import Pi05Model
from oxygen_ros.model.precision import resolve_dtype
from oxygen_ros.process_memory import peak_rss_bytes, restart_peak_rss, rss_bytes


def test_model_benchmark_reports_consistent_numbers_on_tiny():
    result = benchmark.run("tiny", batches=(1, 4), decode_steps=2, repeats=1, peak_size=256)
    assert result.prefix_tokens > 0
    assert result.chunk_ms == result.prefill_ms + result.denoise_ms
    assert set(result.decode_tokens_per_s) == {1, 4}
    for batch, rate in result.decode_tokens_per_s.items():
        assert abs(rate - batch * 1e3 / result.decode_step_ms[batch]) < 1e-6 * rate
    lm_params = sum(p.numel() for p in
                    benchmark.Pi05Model(benchmark.preset("tiny")).language_model.parameters())
    assert result.weight_bytes == 4 * lm_params
    assert result.bandwidth_gb_s > 0 and result.bound_ratio > 0
    assert result.dtype == "float32" and result.dtype_reason == "as set"
    assert result.model_bytes == 4 * sum(p.numel() for p in benchmark.Pi05Model(
        benchmark.preset("tiny")).parameters())
    assert result.load_s > 0 and result.peak_rss_bytes > result.model_bytes
    assert result.prefill_gflop > 0 and result.matmul_peak_gflops > 0
    assert result.prefill_peak_fraction == pytest.approx(
        result.prefill_gflop / (result.prefill_ms / 1e3) / result.matmul_peak_gflops)
    text = benchmark.report(result)
    assert "decode batch   4" in text and "bandwidth bound" in text
    assert "a frame" not in text                            # not asked for
    # no energy counter on a CPU: the fields stay empty and the report shows none
    assert result.energy_source == "no energy counter on cpu"
    assert result.chunk_joules == 0 and result.decode_joules_per_token == {}
    assert "J/token" not in text and "energy" not in text


def test_the_robots_in_a_frame_are_timed_each_and_divided_by_the_fewest():
    result = benchmark.run("tiny", batches=(1,), decode_steps=1, repeats=1, peak_size=256,
                           robots=(1, 3))
    assert set(result.robots_chunk_ms) == {1, 3} and min(result.robots_chunk_ms.values()) > 0
    lines = benchmark.report(result).splitlines()
    row = next(line for line in lines if "3 robots a frame" in line)
    assert f"{result.robots_chunk_ms[3]:.1f} ms" in row
    ratio = lines[lines.index(row) + 1]
    assert "÷ 1 robot a frame" in ratio
    assert f"{result.robots_chunk_ms[3] / result.robots_chunk_ms[1]:.2f} x" in ratio


def test_two_dtypes_side_by_side_with_their_ratios():
    # small peak matmuls: bfloat16 without bf16 units (AVX2) runs at ~1 GFLOP/s
    runs = [benchmark.run("tiny", dtype=dtype, batches=(1,), decode_steps=1, repeats=1,
                          peak_size=256)
            for dtype in ("float32", "bfloat16")]
    # built in bf16 but for the heads and norms the references keep in float32
    built = Pi05Model(preset("tiny"), dtype=torch.bfloat16)
    kept = sum(p.numel() for p in built.parameters() if p.dtype == torch.float32)
    assert 0 < kept * 4 < runs[0].model_bytes / 4
    assert runs[1].model_bytes * 2 == runs[0].model_bytes + kept * 4
    text = benchmark.report(runs)
    header = next(line for line in text.splitlines() if "bf16/fp32" in line)
    assert "float32" in header and "bfloat16" in header
    chunk = next(line for line in text.splitlines() if "chunk, new observation" in line)
    assert chunk.split()[-1] == f"{runs[1].chunk_ms / runs[0].chunk_ms:.2f}"
    # a compiled run is one more column, and every later run is compared with the first
    faster = replace(runs[1], compiled=True, chunk_ms=runs[0].chunk_ms / 4)
    text = benchmark.report(runs + [faster])
    header = next(line for line in text.splitlines() if "bf16c/fp32" in line)
    assert header.split()[-3:] == ["compiled", "bf16/fp32", "bf16c/fp32"]
    chunk = next(line for line in text.splitlines() if "chunk, new observation" in line)
    assert chunk.split()[-2:] == [f"{runs[1].chunk_ms / runs[0].chunk_ms:.2f}", "0.25"]


def test_a_runs_peak_rss_is_its_own_not_the_peak_of_what_ran_before_it():
    if not restart_peak_rss():
        pytest.skip("this kernel cannot restart the peak RSS count (/proc/self/clear_refs)")
    earlier = mmap.mmap(-1, 2**30)           # a larger run before this one, then let go
    for _ in range(1024):                     # (its own mapping: freed whatever the allocator)
        earlier.write(b"\1" * 2**20)
    earlier.close()
    gc.collect()                  # what earlier tests left is freed before the run, not in it
    before_peak, before = peak_rss_bytes(os.getpid()), rss_bytes(os.getpid())
    result = benchmark.run("tiny", batches=(1,), decode_steps=1, repeats=1, peak_size=256)
    assert not result.rss_since_start
    # its own peak: what the process held, plus the bandwidth copy's two 256 MiB buffers
    # (less a little the run frees), but not the 1 GiB before it
    assert before + 480 * 2**20 <= result.peak_rss_bytes < before_peak - 2**28, (
        before, result.peak_rss_bytes, before_peak)
    assert "peak RSS of this run" in benchmark.report([result])


def test_a_pi05_prompt_is_padded_to_200_tokens_and_a_checkpoint_is_loaded(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    tool = Path(__file__).resolve().parents[2] / "tools" / "write_random_checkpoint.py"
    subprocess.run([sys.executable, str(tool), str(tmp_path), "--layers", "1", "--vocab",
                    "512"], check=True, capture_output=True)
    # auto: bfloat16 only where the CPU has bf16 units (emulated, a real-width prefill
    # takes minutes)
    result = benchmark.run(dtype="auto", checkpoint=str(tmp_path), batches=(1,),
                           decode_steps=1, repeats=1, peak_size=256)
    assert result.prefix_tokens == 3 * 256 + 200
    assert result.dtype == resolve_dtype("auto", "cpu")[0]
    assert result.preset.startswith("checkpoint:")
