"""The model benchmark's numbers are measured and consistent with each other (not timed)."""

from oxygen_ros.bench import model as benchmark


def test_model_benchmark_reports_consistent_numbers_on_tiny():
    result = benchmark.run("tiny", batches=(1, 4), decode_steps=2, repeats=1)
    assert result.prefix_tokens > 0
    assert result.chunk_ms == result.prefill_ms + result.denoise_ms
    assert set(result.decode_tokens_per_s) == {1, 4}
    for batch, rate in result.decode_tokens_per_s.items():
        assert abs(rate - batch * 1e3 / result.decode_step_ms[batch]) < 1e-6 * rate
    lm_params = sum(p.numel() for p in
                    benchmark.Pi05Model(benchmark.preset("tiny")).language_model.parameters())
    assert result.weight_bytes == 4 * lm_params
    assert result.bandwidth_gb_s > 0 and result.bound_ratio > 0
    text = benchmark.report(result)
    assert "decode batch   4" in text and "bandwidth bound" in text
