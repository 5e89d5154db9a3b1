"""Engine test helpers: observation streams, engine configs, and event collection."""

import numpy as np

from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.engine.observation import Observation

CAMERAS = ("base", "left_wrist")


def stream(count, seed=0, period=0.1, size=28, camera_every=1):
    rng = np.random.default_rng(seed)
    out, images = [], None
    for i in range(count):
        if i % camera_every == 0:
            images = {c: rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for c in CAMERAS}
        out.append(Observation(images, rng.uniform(-1, 1, 6), "stack the blocks", i * period))
    return out


def config(**overrides):
    defaults = dict(camera_names=CAMERAS, num_pages=256, page_size=16, tokens_per_frame=3,
                    max_tokens_per_frame=6, dialogue_max_tokens=12, memory_max_tokens=8,
                    memory_period_s=0.5, stop_at_eos=False,
                    action_dt_s=0.1, blend_s=0.05)   # tiny: H = 4 steps cover 0.4 s
    return EngineConfig(**(defaults | overrides))


class Events:
    def __init__(self, engine):
        self.chunks, self.texts, self.summaries = [], [], []
        engine.on_chunk, engine.on_text, engine.on_memory = (
            self.chunks.append, self.texts.append, self.summaries.append)

    def text_by_request(self):
        out = {}
        for chunk in self.texts:
            out.setdefault((chunk.kind, chunk.request_id), []).append(chunk)
        return {key: "".join(c.text for c in chunks) for key, chunks in out.items()}


class TimedModel:
    """The real model, with each operation charging a cost to a manual clock: fixed
    seconds, a list whose items are used in turn (the last one repeats), or a function of
    the batch (how many chunks or sequences the call computes)."""

    def __init__(self, model, clock, prefill=0.02, actions=0.03, extend=0.004, decode=0.01):
        self._model, self._clock = model, clock
        self.costs = dict(prefill=prefill, actions=actions, extend=extend, decode=decode)
        self.calls = dict.fromkeys(self.costs, 0)

    def __getattr__(self, name):
        return getattr(self._model, name)

    def _charge(self, name, batch=1):
        cost = self.costs[name]
        if isinstance(cost, (list, tuple)):
            cost = cost[min(self.calls[name], len(cost) - 1)]
        elif callable(cost):
            cost = cost(batch)
        self.calls[name] += 1
        self._clock.advance(cost)

    def prefill(self, *args, **kwargs):
        """Charged only when it computes: a hit, or a refusal for lack of pages, is cheap."""
        computed = self._model.counters["prefix_tokens_computed"]
        table = self._model.prefill(*args, **kwargs)
        if self._model.counters["prefix_tokens_computed"] > computed:
            self._charge("prefill")
        return table

    def prefill_many(self, prefixes, *args, **kwargs):
        """One batched pass: charged once, as a function of how many prefixes it is given."""
        computed = self._model.counters["prefix_tokens_computed"]
        tables = self._model.prefill_many(prefixes, *args, **kwargs)
        if self._model.counters["prefix_tokens_computed"] > computed:
            self._charge("prefill", len(prefixes))
        return tables

    def sample_actions(self, *args, **kwargs):
        """The plain sampler's chunk."""
        result = self._model.sample_actions(*args, **kwargs)
        self._charge("actions", len(args[0]))
        return result

    def action_inputs(self, *args, **kwargs):
        """Called from outside only by the RTC sampler, once per chunk."""
        result = self._model.action_inputs(*args, **kwargs)
        self._charge("actions", len(args[0]))
        return result

    def extend(self, *args, **kwargs):
        result = self._model.extend(*args, **kwargs)
        self._charge("extend")
        return result

    def decode(self, *args, **kwargs):
        result = self._model.decode(*args, **kwargs)
        self._charge("decode", len(args[0]))
        return result


class Run:
    """What a simulated robot saw: chunks with their arrival times, frame reports, text,
    and the per-step commands a control timer would have published."""

    def __init__(self):
        self.chunks, self.arrivals, self.reports, self.texts = [], [], [], []
        self.held = self.commands = 0

    def finals(self):
        return {t.request_id: t for t in self.texts if t.final and t.kind == "dialogue"}

    @property
    def held_fraction(self):
        return self.held / max(1, self.commands)


def simulate(engine, clock, duration, camera_hz=30.0, delivery_s=0.0, arrivals=None,
             control_hz=50.0, seed=0, cameras=CAMERAS, size=28, observations_until=None):
    """Drive the engine with the node's FrameLoop on a manual clock: a camera captures at
    camera_hz, each frame reaches the engine delivery_s later; dialogue arrives at the
    given times (seconds from the start). Afterwards a control timer at control_hz replays
    the chunks as the robot would have executed them (ActionStream) and counts held
    commands."""
    from oxygen_ros.engine.action_stream import ActionStream
    from oxygen_ros.engine.frame_loop import FrameLoop

    run = Run()
    engine.on_chunk = lambda chunk: (run.chunks.append(chunk), run.arrivals.append(clock.now()))
    engine.on_text = run.texts.append
    serve = engine.serve

    def recorded(*args, **kwargs):
        reports = serve(*args, **kwargs)
        run.reports.extend(reports)
        return reports
    engine.serve = recorded
    rng = np.random.default_rng(seed)
    loop = FrameLoop(engine)
    start = clock.now()
    pending = sorted((start + t, text) for t, texts in (arrivals or {}).items() for text in texts)
    observations = {}
    stop_observations = start + (duration if observations_until is None else observations_until)
    while clock.now() < start + duration:
        now = clock.now()
        while pending and pending[0][0] <= now:
            engine.submit_dialogue(pending.pop(0)[1])
        index = int((min(now, stop_observations) - delivery_s - start) * camera_hz)
        observation = None
        if index >= 0 and now <= stop_observations + 0.5:
            if index not in observations:
                images = {c: rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for c in cameras}
                observations[index] = Observation(images, rng.uniform(-1, 1, 6),
                                                  "stack the blocks", start + index / camera_hz)
            observation = observations[index]
        clock.advance(loop.run_robots({engine.robot.name: observation}))
    engine.serve = serve

    fades = engine.config.chunk_switch == "crossfade"
    stream = ActionStream(engine.config.blend_s if fades else 0.0)
    events = list(zip(run.arrivals, run.chunks))
    if events:
        tick = events[0][0]
        while tick < min(start + duration, stop_observations):
            while events and events[0][0] <= tick:
                _, chunk = events.pop(0)
                stream.push(chunk.actions, chunk.stamp, engine.config.action_dt_s, tick)
            run.commands += 1
            run.held += stream.action_at(tick)[1]
            tick += 1 / control_hz
    return run
