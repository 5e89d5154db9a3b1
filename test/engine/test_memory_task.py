"""Memory windows tile the stream: a window that elapses while a summary is in flight is
summarized once that one ends, also when the stream has ended (a bag's last seconds)."""

from engine_helpers import TimedModel, config, simulate

from oxygen_ros.engine.clock import ManualClock
from oxygen_ros.engine.oxygen import OxygenEngine


def test_the_window_that_elapsed_during_a_summary_is_summarized_after_the_stream_ends(
        tiny_model):
    clock = ManualClock()
    engine = OxygenEngine(TimedModel(tiny_model, clock, decode=0.01),
                          config(frame_period_s=0.1, memory_period_s=1.0, memory_max_tokens=60,
                                 tokens_per_frame=3, max_tokens_per_frame=3), clock=clock)
    summaries = []
    engine.on_memory = summaries.append
    run = simulate(engine, clock, duration=6.0, camera_hz=10.0, observations_until=2.5)
    last_stamp = max(c.stamp for c in run.chunks)
    # 60 tokens at 3 a frame outlast the 1 s period: the second window elapsed
    # while the first summary was still decoding, and no observation came after 2.5 s
    assert len(summaries) == 2, [(s.window_start, s.window_end) for s in summaries]
    first, second = summaries
    assert second.window_start == first.window_end and second.window_end == last_stamp
    assert second.window_end - second.window_start >= engine.config.memory_period_s
    assert all(len(s.text) > 0 for s in summaries)
    assert engine.pending_requests == 0
