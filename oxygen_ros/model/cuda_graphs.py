"""CUDA graphs for the two hot loops: the batched decode step (one graph per batch-size
bucket) and the denoising loop (one graph, fixed shapes), so a step costs one launch
instead of hundreds of small kernel launches.

Inputs are copied into static buffers padded to the bucket. Padding rows feed token 0 at
position 0, write their K/V to a scratch page of the pool and attend to it alone, so they
never touch a real sequence; block tables are padded with the scratch page up to
`max_pages`. Sequences longer than that, or batches beyond the largest bucket, run eagerly.

Capture needs CUDA. With capture=False a runner executes the same static-buffer path
eagerly — on the CPU that is how the bookkeeping (buckets, padding, scratch writes) is
tested; the captured graphs themselves are checked by tools/gpu_check.py on a GPU.
"""

from typing import Optional

import torch

from oxygen_ros.cache.attention import kernels_fit
from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.model.pi05 import ActionInputs, DecodeInputs, Pi05Model

DEFAULT_BUCKETS = (1, 2, 4, 8, 16, 32)


def bucket_for(batch: int, buckets=DEFAULT_BUCKETS) -> Optional[int]:
    """The smallest bucket that holds `batch` rows (None: larger than every bucket)."""
    return next((b for b in sorted(buckets) if b >= batch), None)


def _capture(fn):
    """Warm up on a side stream, then capture fn() into a CUDA graph; (graph, output)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        output = fn()
    return graph, output


class DecodeRunner:
    """The decode step of one batch-size bucket over static input buffers."""

    def __init__(self, model: Pi05Model, cache: KVCache, bucket: int, max_pages: int,
                 scratch_page: int, capture: bool):
        device = model.device
        self.model, self.cache = model, cache
        self.bucket, self.max_pages, self.scratch_page = bucket, max_pages, scratch_page
        self.static = DecodeInputs(
            tokens=torch.zeros(bucket, dtype=torch.long, device=device),
            positions=torch.zeros(bucket, dtype=torch.long, device=device),
            slots=torch.full((bucket,), scratch_page * cache.page_size, dtype=torch.long,
                             device=device),
            block_tables=torch.full((bucket, max_pages), scratch_page, dtype=torch.int32,
                                    device=device))
        self.graph, self.output = (_capture(lambda: model.decode_step(self.static, cache))
                                   if capture else (None, None))

    def fits(self, inputs: DecodeInputs) -> bool:
        return (inputs.tokens.shape[0] <= self.bucket
                and inputs.block_tables.shape[1] <= self.max_pages)

    def fill(self, inputs: DecodeInputs) -> int:
        """Copy `inputs` into the static buffers, padding rows to the bucket; the real rows."""
        rows, pages = inputs.tokens.shape[0], inputs.block_tables.shape[1]
        static = self.static
        static.tokens[:rows].copy_(inputs.tokens)
        static.tokens[rows:] = 0
        static.positions[:rows].copy_(inputs.positions)
        static.positions[rows:] = 0
        static.slots[:rows].copy_(inputs.slots)
        static.slots[rows:] = self.scratch_page * self.cache.page_size
        static.block_tables.fill_(self.scratch_page)
        static.block_tables[:rows, :pages].copy_(inputs.block_tables)
        return rows

    def run(self, inputs: DecodeInputs) -> torch.Tensor:
        rows = self.fill(inputs)
        if self.graph is None:
            return self.model.decode_step(self.static, self.cache)[:rows]
        self.graph.replay()
        return self.output[:rows].clone()


class ActionRunner:
    """The whole denoising loop for up to `rows` prefixes over static input buffers; padding
    rows read the scratch page (their action K/V go to the action tier's spare rows)."""

    def __init__(self, model: Pi05Model, cache: KVCache, max_pages: int, scratch_page: int,
                 capture: bool, rows: int = 1):
        config, device = model.config, model.device
        self.model, self.cache, self.max_pages = model, cache, max_pages
        self.scratch_page, self.rows = scratch_page, rows
        self.static = ActionInputs(
            prefix_lens=torch.ones(rows, dtype=torch.long, device=device),
            block_tables=torch.full((rows, max_pages), scratch_page, dtype=torch.int32,
                                    device=device))
        self.noise = torch.zeros(rows, config.action_horizon, config.action_dim,
                                 dtype=torch.float32, device=device)
        self.graph, self.output = _capture(self.loop) if capture else (None, None)

    def loop(self) -> torch.Tensor:
        """What the graph holds: the computation over the static buffers."""
        return self.model.integrate(self.static, self.noise, self.cache)

    def fits(self, inputs: ActionInputs) -> bool:
        return (inputs.prefix_lens.shape[0] <= self.rows
                and inputs.block_tables.shape[1] <= self.max_pages)

    def run(self, inputs: ActionInputs, noise: torch.Tensor) -> torch.Tensor:
        rows, pages = inputs.block_tables.shape
        static = self.static
        static.prefix_lens.fill_(1)
        static.prefix_lens[:rows].copy_(inputs.prefix_lens)
        static.block_tables.fill_(self.scratch_page)
        static.block_tables[:rows, :pages].copy_(inputs.block_tables)
        static.dense = None     # the CPU's gathered prefix belongs to the last tables
        self.noise.zero_()
        self.noise[:rows].copy_(noise.to(self.noise.dtype))
        if self.graph is None:
            return self.loop()[:rows]
        self.graph.replay()
        return self.output[:rows].clone()


class CudaGraphs:
    """The runners of one model over one cache: a decode graph per bucket, one action
    graph. Attach as model.graphs; decode() and sample_actions() then use them."""

    def __init__(self, model: Pi05Model, cache: KVCache, max_tokens: int,
                 buckets=DEFAULT_BUCKETS, capture: Optional[bool] = None):
        capture = model.device.type == "cuda" if capture is None else capture
        page_size, head_dim = cache.page_size, cache.pool.k.shape[-1]
        if capture and not kernels_fit(page_size, head_dim):
            # the reference attention reads lengths back to the host: no capture
            raise ValueError(f"cuda_graphs needs the Triton attention: page_size {page_size} "
                             f"and head_dim {head_dim} must be powers of two >= 16 "
                             "(set page_size, or cuda_graphs: false)")
        pages = cache.pool.allocate(1, "graph_scratch")
        if pages is None:
            raise ValueError("no free page for the CUDA graphs' scratch page")
        self.cache, self.scratch_page = cache, pages[0]
        self.max_pages = cache.pages_for(max_tokens)
        with torch.no_grad():
            self.decode = {b: DecodeRunner(model, cache, b, self.max_pages, self.scratch_page,
                                           capture) for b in sorted(buckets)}
            self.actions = ActionRunner(model, cache, self.max_pages, self.scratch_page, capture)

    def decode_runner(self, cache: KVCache, inputs: DecodeInputs) -> Optional[DecodeRunner]:
        bucket = bucket_for(inputs.tokens.shape[0], self.decode)
        runner = self.decode.get(bucket) if cache is self.cache else None
        return runner if runner is not None and runner.fits(inputs) else None

    def action_runner(self, cache: KVCache, inputs: ActionInputs) -> Optional[ActionRunner]:
        if cache is not self.cache or not self.actions.fits(inputs):
            return None
        return self.actions
