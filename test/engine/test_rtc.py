"""Real-Time Chunking: the published schedules and guidance weight, the plain sampler when
guidance is off, the vector-Jacobian product against finite differences, the frozen steps
of a guided chunk, the plan's re-indexing, what a NaN chunk or stopped actions leave of the
plan, and language unchanged by it."""

import math

import numpy as np
import pytest
import torch
from engine_helpers import Events, config, stream

from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.engine import rtc
from oxygen_ros.engine.action_stream import ActionStream
from oxygen_ros.engine.action_task import ActionTask
from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.engine.frame_loop import FrameLoop
from oxygen_ros.engine.oxygen import OxygenEngine
from oxygen_ros.model.config import preset
from oxygen_ros.model.pi05 import Pi05Model


# -- the published numbers -------------------------------------------------------------------
def test_linear_schedule_freezes_the_delay_then_decays_to_the_horizon():
    weights = rtc.prefix_weights(5, 14, 25, "linear")
    assert weights.shape == (25,)
    assert torch.all(weights[:5] == 1)
    np.testing.assert_allclose(weights[5:14], [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1],
                               atol=1e-6)
    assert torch.all(weights[14:] == 0)


def test_exp_schedule_is_the_linear_one_times_its_expm1_over_e_minus_1():
    weights = rtc.prefix_weights(5, 14, 25, "exp")
    assert torch.all(weights[:5] == 1) and torch.all(weights[14:] == 0)
    for index, w in ((5, 0.9), (9, 0.5), (13, 0.1)):
        assert weights[index].item() == pytest.approx(w * math.expm1(w) / (math.e - 1), abs=1e-6)
    assert weights[5].item() == pytest.approx(0.76451, abs=1e-4)


def test_zeros_and_ones_schedules_and_the_delay_capped_by_the_horizon():
    zeros = rtc.prefix_weights(5, 14, 20, "zeros")
    assert zeros.tolist() == [1.0] * 5 + [0.0] * 15
    ones = rtc.prefix_weights(5, 14, 20, "ones")
    assert ones.tolist() == [1.0] * 14 + [0.0] * 6
    capped = rtc.prefix_weights(20, 10, 25, "linear")      # d > horizon: d = horizon
    assert capped.tolist() == [1.0] * 10 + [0.0] * 15
    assert rtc.prefix_weights(3, 40, 10, "linear").shape == (10,)   # horizon past the chunk


@pytest.mark.parametrize("time, weight", [(1.0, 10.0), (0.9, 9.0 * 0.82 / 0.81),
                                          (0.5, 2.0), (0.2, 0.25 * 0.68 / 0.04),
                                          (0.1, (0.1 / 0.9) * 0.82 / 0.01)])
def test_guidance_weight_is_the_papers_clipped_at_the_maximum(time, weight):
    assert rtc.guidance_weight(time, 10.0).item() == pytest.approx(min(weight, 10.0), rel=1e-5)


def test_settings_reject_unknown_names():
    with pytest.raises(ValueError, match="prefix_attention_schedule"):
        rtc.RTCSettings(prefix_attention_schedule="cosine")
    with pytest.raises(ValueError, match="rtc_guidance"):
        rtc.RTCSettings(guidance="jacobian")
    with pytest.raises(ValueError, match="chunk_switch"):
        EngineConfig(chunk_switch="fade")
    assert rtc.RTCSettings(prefix_attention_schedule="LINEAR").prefix_attention_schedule == "linear"


@pytest.mark.parametrize("guidance, records", [("vjp", True), ("error", False)])
def test_only_the_vjp_guidance_records_a_graph_through_the_denoiser(guidance, records):
    """The error variant has no backward pass: its denoiser runs as the plain sampler's
    does (no autograd graph, the no-grad attention path)."""
    seen = []

    def velocity(x):
        seen.append(torch.is_grad_enabled())
        return 2 * x

    x = torch.randn(1, 4, 2)
    guidance_toward = rtc.Guide(torch.zeros(1, 4, 2), torch.ones(1, 4, 1))
    rtc.guided_velocity(x, guidance_toward, 0.5, velocity, rtc.RTCSettings(guidance=guidance))
    assert seen == [records]


# -- the sampler -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def long_model():
    """The tiny architecture with 32-step chunks (delays of 1, 5 and 20 steps fit) and
    π0.5's 10 denoising steps."""
    return Pi05Model(preset("tiny").with_(action_horizon=32, num_denoise_steps=10),
                     seed=0).eval()


def _prefilled(model, make_prefix, seed=0):
    cache = KVCache.for_model(model.config, 64, 16, 1, model.dtype, model.device)
    return cache, model.prefill(make_prefix(model.config, seed=seed), cache)


def _task(model, **overrides):
    return ActionTask(model, EngineConfig(**({"chunk_switch": "rtc", "action_dt_s": 0.02}
                                             | overrides)))


@pytest.mark.parametrize("guidance", ["vjp", "error"])
@pytest.mark.parametrize("off", [dict(rtc_max_guidance_weight=0.0),
                                 dict(rtc_prefix_attention_schedule="zeros")])
def test_without_guidance_the_chunk_is_exactly_the_plain_samplers(long_model, make_prefix,
                                                                  guidance, off):
    cache, table = _prefilled(long_model, make_prefix)
    task = _task(long_model, rtc_guidance=guidance, **off)
    task.plan = (torch.randn(32, long_model.config.action_dim), 0.0)
    guided = task.run([table], cache, frame_id=3, stamp=0.0, delay_s=0.0)
    assert task.guided
    plain = long_model.sample_actions([table], task.noise(3), cache)[0].numpy()
    np.testing.assert_array_equal(guided, plain)


def test_vjp_and_error_differ_when_guided(long_model, make_prefix):
    cache, table = _prefilled(long_model, make_prefix)
    plan = (torch.randn(32, long_model.config.action_dim), 0.0)
    chunks = []
    for guidance in ("vjp", "error"):
        task = _task(long_model, rtc_guidance=guidance)
        task.plan = plan
        chunks.append(task.run([table], cache, frame_id=3, stamp=0.04, delay_s=0.1))
    assert np.abs(chunks[0] - chunks[1]).max() > 1e-4


def test_vjp_correction_is_the_error_pulled_back_through_the_denoiser(make_prefix):
    """v_vjp - v_error = g·t·Jᵀe, so <v_vjp - v_error, u> = g·t·<e, J u> for any u, with
    J u from central differences of the velocity."""
    model = Pi05Model(preset("tiny"), seed=1).double().eval()
    cache, table = _prefilled(model, make_prefix)
    inputs = model.action_inputs([table], cache)
    generator = torch.Generator().manual_seed(0)
    shape = (1, model.config.action_horizon, model.config.action_dim)
    x = torch.randn(shape, generator=generator, dtype=torch.float64)
    previous = torch.randn(shape[1:], generator=generator, dtype=torch.float64)
    u = torch.randn(shape, generator=generator, dtype=torch.float64)
    time, delay = 0.7, 1
    t = torch.full((1,), time, dtype=torch.float64)

    def velocity(x_in):
        return model.velocity(inputs, x_in, t, cache).double()

    out = {}
    for guidance in ("vjp", "error"):
        settings = rtc.RTCSettings(execution_horizon=3, guidance=guidance)
        with torch.no_grad():
            out[guidance] = rtc.guided_velocity(x, rtc.guide([(previous, delay)], x, settings),
                                                time, velocity, settings)
    with torch.no_grad():
        v = velocity(x)
        weights = rtc.prefix_weights(delay, 3, shape[1], "linear")[None, :, None].double()
        error = (previous[None] - (x - time * v)) * weights
        eps = 1e-2  # float32 inside the model: smaller steps round
        jvp = (velocity(x + eps * u) - velocity(x - eps * u)) / (2 * eps)
    g = rtc.guidance_weight(time, 10.0).double()
    lhs = ((out["vjp"] - out["error"]) * u).sum()
    rhs = g * time * (error * jvp).sum()
    assert abs(rhs.item()) > 1e-3                      # the Jacobian term is not negligible
    assert lhs.item() == pytest.approx(rhs.item(), rel=1e-4)


@pytest.mark.parametrize("guidance", ["error", "vjp"])    # error is the default
@pytest.mark.parametrize("delay", [1, 5, 20])
def test_frozen_steps_follow_the_plan_in_force_ten_times_closer(long_model, make_prefix, delay,
                                                                guidance):
    """Default settings: the steps that run while the chunk is computed are the plan's."""
    cache, table = _prefilled(long_model, make_prefix, seed=1)
    task = _task(long_model, rtc_guidance=guidance)   # linear, whole chunk, weight 10
    dt = task.dt
    first = task.run([table], cache, frame_id=0, stamp=0.0)
    offset = 4
    guided = task.run([table], cache, frame_id=1, stamp=offset * dt, delay_s=delay * dt)
    assert task.guided and task.inference_delay == delay
    plain = long_model.sample_actions([table], task.noise(1), cache)[0].numpy()
    in_force = first[offset:offset + delay]
    rtc_gap = np.abs(guided[:delay] - in_force).mean()
    plain_gap = np.abs(plain[:delay] - in_force).mean()
    assert rtc_gap * 10 <= plain_gap, (rtc_gap, plain_gap)


def test_steps_frozen_past_the_plans_end_follow_its_last_step_which_the_robot_holds():
    previous = torch.arange(12, dtype=torch.float32).reshape(3, 4)   # 3 steps left
    like = torch.zeros(1, 10, 4)
    for schedule in ("linear", "exp", "ones", "zeros"):
        settings = rtc.RTCSettings(execution_horizon=8, prefix_attention_schedule=schedule)
        guidance = rtc.guide([(previous, 6)], like, settings)      # 6 steps run meanwhile
        assert guidance.weights[0, :6, 0].tolist() == [1.0] * 6, schedule
        assert guidance.weights[0, 6:, 0].tolist() == [0.0] * 4, schedule
        torch.testing.assert_close(guidance.goal[0, :3], previous)
        torch.testing.assert_close(guidance.goal[0, 3:6], previous[-1:].expand(3, 4))
    # within the leftover nothing changes: frozen, then the decay up to the horizon
    guidance = rtc.guide([(previous, 2)], like, rtc.RTCSettings(execution_horizon=8))
    assert guidance.weights[0, :2, 0].tolist() == [1.0, 1.0]
    assert guidance.weights[0, 3:, 0].tolist() == [0.0] * 7


def test_a_plan_that_ends_soon_after_the_frozen_steps_is_continued_by_its_held_last_step():
    """least_overlap: the chunk departs from the pose the robot holds over a ramp of that
    many steps, whether the plan ran out before the takeover or one step after it; a plan
    that covers the ramp is guided exactly as lerobot does (the overlap changes nothing)."""
    previous = torch.arange(12, dtype=torch.float32).reshape(3, 4)   # 3 steps left
    like = torch.zeros(1, 10, 4)
    plain = rtc.RTCSettings(execution_horizon=10, prefix_attention_schedule="linear")
    overlapping = rtc.RTCSettings(execution_horizon=10, prefix_attention_schedule="linear",
                                  least_overlap=4)
    for delay in (2, 3, 6):            # the plan ends one step after, at, or before the takeover
        before = rtc.guide([(previous, delay)], like, plain)
        assert before.weights[0, max(delay, 3):, 0].sum() == 0          # no ramp at all
        after = rtc.guide([(previous, delay)], like, overlapping)
        weights = after.weights[0, :, 0]
        assert weights[:delay].tolist() == [1.0] * delay
        ramp = weights[delay:delay + 4]
        assert ramp.tolist() == sorted(ramp.tolist(), reverse=True) and 0 < ramp.min() < 1
        assert weights[delay + 4:].sum() == 0
        torch.testing.assert_close(after.goal[0, :3], previous)
        torch.testing.assert_close(after.goal[0, 3:delay + 4],
                                   previous[-1:].expand(delay + 1, 4))   # the held pose
    long = torch.randn(9, 4)                                          # covers the ramp
    for delay in (0, 2, 5):
        torch.testing.assert_close(rtc.guide([(long, delay)], like, overlapping).weights,
                                   rtc.guide([(long, delay)], like, plain).weights)
    # an execution horizon shorter than the frozen steps and the overlap does not cut it
    short = rtc.RTCSettings(execution_horizon=4, prefix_attention_schedule="linear",
                            least_overlap=4)
    weights = rtc.guide([(long, 3)], like, short).weights[0, :, 0]
    assert weights[:3].tolist() == [1.0] * 3 and (weights[3:7] > 0).all()
    assert weights[7:].sum() == 0
    with pytest.raises(ValueError, match="least_overlap"):
        rtc.RTCSettings(least_overlap=-1)


def test_the_plan_is_reindexed_to_the_new_chunk_as_the_action_stream_plays_it(long_model):
    task = _task(long_model)
    actions = torch.randn(32, long_model.config.action_dim)
    task.plan = (actions, 1.0)
    stream = ActionStream(0.0)
    stream.push(actions.numpy(), 1.0, task.dt, 1.0)
    stamp = 1.0 + 2.5 * task.dt                 # between two steps of the plan
    leftover = task.leftover(stamp)
    assert leftover.shape[0] == 29              # positions 2.5 .. 30.5 of steps 0 .. 31
    for i in (0, 7, 28):
        expected, _ = stream.action_at(stamp + i * task.dt)
        np.testing.assert_allclose(leftover[i].numpy(), expected, atol=1e-5)
    ran_out = task.leftover(1.0 + 32 * task.dt)               # the plan has run out:
    torch.testing.assert_close(ran_out, actions[-1:])          # its last step, held
    assert task.leftover(0.5) is None                         # older than the plan


def test_cross_frame_batching_with_rtc_gives_the_same_language_as_crossfade(tiny_model):
    frames = stream(10, camera_every=2)
    arrivals = {0: ["what is on the table?"], 1: ["hello", "where is the cup?"], 4: ["done?"]}
    results = {}
    for switch in ("rtc", "crossfade"):
        engine = OxygenEngine(tiny_model, config(chunk_switch=switch))
        events = Events(engine)
        reports = []
        for index, observation in enumerate(frames):
            for text in arrivals.get(index, []):
                engine.submit_dialogue(text)
            reports.append(engine.step(observation))
        while engine.pending_requests:
            reports.append(engine.step(frames[-1]))
        results[switch] = (events, [r.tokens for r in reports], engine)
    rtc_events, rtc_tokens, rtc_engine = results["rtc"]
    fade_events, fade_tokens, _ = results["crossfade"]
    assert rtc_events.text_by_request() == fade_events.text_by_request()
    assert rtc_events.summaries
    assert len(rtc_events.text_by_request()) == 4 + len(rtc_events.summaries)
    assert rtc_tokens == fade_tokens                      # the same tokens in the same frames
    assert [s.text for s in rtc_events.summaries] == [s.text for s in fade_events.summaries]
    assert not rtc_events.chunks[0].rtc                   # nothing in force yet
    assert all(c.rtc for c in rtc_events.chunks[1:]) and not any(c.rtc for c in fade_events.chunks)
    assert rtc_engine.counters["rtc_chunks"] == len(rtc_events.chunks) - 1
    different = [np.abs(a.actions - b.actions).max() > 1e-4
                 for a, b in zip(rtc_events.chunks[1:], fade_events.chunks[1:])]
    assert all(different)


class NaNVelocity:
    """The real model; while `poisoned`, the denoiser's velocity holds a NaN, as a broken
    model's would."""

    def __init__(self, model):
        self._model, self.poisoned = model, False

    def __getattr__(self, name):
        return getattr(self._model, name)

    def velocity(self, *args, **kwargs):
        velocity = self._model.velocity(*args, **kwargs)
        if self.poisoned:
            velocity = velocity.clone()
            velocity[0, 0, 0] = float("nan")
        return velocity


def test_a_nan_chunk_is_not_the_plan_and_the_next_chunk_continues_the_one_in_force(tiny_model):
    model = NaNVelocity(tiny_model)
    engine = OxygenEngine(model, config(memory_period_s=0))
    events = Events(engine)
    frames = stream(6)
    for observation in frames[:2]:
        engine.step(observation)
    in_force = engine.robot.actions.plan
    model.poisoned = True
    engine.step(frames[2])
    model.poisoned = False
    assert not np.isfinite(events.chunks[2].actions).all() and not events.chunks[2].late
    assert engine.robot.actions.plan is in_force                    # the node drops it too
    assert engine.robot.timing.plan_stamp == frames[1].stamp
    for observation in frames[3:]:
        engine.step(observation)
    assert all(c.rtc and np.isfinite(c.actions).all() for c in events.chunks[3:])


def test_once_actions_stop_the_next_chunk_starts_a_new_plan(tiny_model):
    engine = OxygenEngine(tiny_model, config(memory_period_s=0))
    events = Events(engine)
    loop = FrameLoop(engine)
    frames = stream(3)
    robot = engine.robot.name
    loop.run_robots({robot: frames[0]})
    loop.run_robots({robot: None})      # no fresh observation: the node's watchdog stopped it
    assert engine.robot.actions.plan is None and engine.robot.timing.plan_stamp is None
    loop.run_robots({robot: frames[1]})  # within the abandoned plan's horizon
    assert [c.rtc for c in events.chunks] == [False, False]
