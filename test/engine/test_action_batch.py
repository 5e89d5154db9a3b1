"""Several robots' chunks in one batched action-expert pass (run_together): each row reads
its own prefix pages and continues its own plan in force, and comes out as the chunk the
robot's task makes alone."""

import numpy as np
import pytest
import torch

from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.engine.action_task import ActionTask, run_together
from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.engine.rtc_graph import GuidedActionRunner, robot_buckets
from oxygen_ros.model.config import preset
from oxygen_ros.model.cuda_graphs import CudaGraphs
from oxygen_ros.model.pi05 import Pi05Model

DT = 0.02


@pytest.fixture(scope="module")
def model():
    return Pi05Model(preset("tiny").with_(action_horizon=32, num_denoise_steps=10),
                     seed=0).eval()


@pytest.fixture
def two_robots(model, make_prefix):
    cache = KVCache.for_model(model.config, 128, 16, 2, model.dtype, model.device)
    tables = [model.prefill(make_prefix(model.config, seed=seed), cache) for seed in (0, 1)]
    return cache, tables


def task(model, guidance="error", plan_seed=None):
    task = ActionTask(model, EngineConfig(chunk_switch="rtc", action_dt_s=DT,
                                          rtc_guidance=guidance))
    if plan_seed is not None:
        generator = torch.Generator().manual_seed(plan_seed)
        task.plan = (torch.randn(32, model.config.action_dim, generator=generator), 0.0)
    return task


@pytest.mark.parametrize("guidance", ["error", "vjp"])
def test_two_robots_batched_continue_each_their_own_plan(model, two_robots, guidance):
    cache, tables = two_robots
    stamp, delays = 4 * DT, [3 * DT, 6 * DT]       # robot a froze 3 steps, robot b 6
    alone = [task(model, guidance, plan_seed=seed).run([table], cache, frame_id=frame,
                                                     stamp=stamp, delay_s=delay)
             for seed, table, frame, delay in zip((10, 11), tables, (7, 8), delays)]
    a, b = task(model, guidance, plan_seed=10), task(model, guidance, plan_seed=11)
    plans = [a.plan[0].numpy(), b.plan[0].numpy()]
    together = run_together([a, b], tables, cache, [7, 8], [stamp, stamp], delays)
    for mine, solo in zip(together, alone):
        np.testing.assert_allclose(mine, solo, atol=1e-5)
    assert (a.inference_delay, b.inference_delay) == (3, 6) and a.guided and b.guided
    for chunk, plan, other, frozen in ((together[0], plans[0], plans[1], 3),
                                       (together[1], plans[1], plans[0], 6)):
        own_gap = np.abs(chunk[:frozen] - plan[4:4 + frozen]).mean()
        other_gap = np.abs(chunk[:frozen] - other[4:4 + frozen]).mean()
        assert own_gap * 5 < other_gap, (own_gap, other_gap)
    # each is now its robot's plan in force
    np.testing.assert_array_equal(a.plan[0].numpy(), together[0])
    np.testing.assert_array_equal(b.plan[0].numpy(), together[1])


def test_a_robot_without_a_plan_gets_the_plain_samplers_chunk_beside_a_guided_one(
        model, two_robots):
    cache, tables = two_robots
    fresh, continuing = task(model), task(model, plan_seed=12)
    together = run_together([fresh, continuing], tables, cache, [5, 6], [0.1, 0.1],
                            [0.06, 0.06])
    plain = model.sample_actions(tables[:1], fresh.noise(5), cache)[0].numpy()
    np.testing.assert_allclose(together[0], plain, atol=1e-5)
    assert not fresh.guided and fresh.inference_delay == 0 and continuing.guided


def test_more_robots_than_the_action_tier_holds_is_an_error(model, two_robots):
    cache, tables = two_robots
    tasks = [task(model) for _ in range(3)]
    with pytest.raises(ValueError, match="exceed the action tier"):
        run_together(tasks, tables + tables[:1], cache, [0, 1, 2], [0.0] * 3, [0.0] * 3)


def test_the_guided_loops_static_path_makes_each_robots_chunk_with_padding_rows(
        model, two_robots):
    """The CUDA-graph runners of the guided loop, run eagerly over their static buffers
    (capture needs a GPU: tools/gpu_check.py): one robot after the other through the same
    buffers, one robot in a two-row runner beside a padding row, and two robots together;
    each chunk is the eager loop's."""
    cache, tables = two_robots
    graphs = CudaGraphs(model, cache, max_tokens=200, buckets=(1,), capture=False)
    settings = task(model).rtc
    assert robot_buckets(1) == [1] and robot_buckets(2) == [1, 2]
    assert robot_buckets(5) == [1, 2, 4, 5] and robot_buckets(8) == [1, 2, 4, 8]
    assert robot_buckets(40) == [1, 2, 4, 8, 16, 32, 40]
    one, two = (GuidedActionRunner(model, graphs, settings, capture=False, rows=rows)
                for rows in robot_buckets(2))
    stamp = 4 * DT
    for runners, table, seed, frame, delay in (([one], tables[0], 10, 7, 3 * DT),
                                               ([one], tables[1], 11, 8, 6 * DT),
                                               ([two], tables[0], 12, 9, 2 * DT)):
        eager = task(model, plan_seed=seed).run([table], cache, frame_id=frame, stamp=stamp,
                                                delay_s=delay)
        graphed_task = task(model, plan_seed=seed)
        graphed = run_together([graphed_task], [table], cache, [frame], [stamp], [delay],
                               runners)
        np.testing.assert_allclose(graphed[0], eager, atol=1e-6)
        assert graphed_task.guided and graphed_task.inference_delay == round(delay / DT)
        assert (runners[0].guide.weights[0, :graphed_task.inference_delay] == 1).all()
    assert (two.guide.weights[1] == 0).all() and (two.static.block_tables[1] ==
                                                 graphs.scratch_page).all()
    delays = [3 * DT, 6 * DT]
    eager = run_together([task(model, plan_seed=20), task(model, plan_seed=21)], tables, cache,
                         [1, 2], [stamp] * 2, delays)
    assert not one.fits(model.action_inputs(tables, cache))
    graphed = run_together([task(model, plan_seed=20), task(model, plan_seed=21)], tables,
                           cache, [1, 2], [stamp] * 2, delays, [one, two])
    np.testing.assert_allclose(np.stack(graphed), np.stack(eager), atol=1e-6)
    # a graph over another cache's pages is not used for this one's
    other = KVCache.for_model(model.config, 128, 16, 2, model.dtype, model.device)
    elsewhere = GuidedActionRunner(model, CudaGraphs(model, other, max_tokens=200, buckets=(1,),
                                                     capture=False), settings, capture=False)
    graphed = run_together([task(model, plan_seed=20)], tables[:1], cache, [1], [stamp],
                           delays[:1], [elsewhere])
    np.testing.assert_allclose(graphed[0], eager[0], atol=1e-6)
    with pytest.raises(ValueError, match="only 'error'"):
        GuidedActionRunner(model, graphs, task(model, guidance="vjp").rtc, capture=False)
