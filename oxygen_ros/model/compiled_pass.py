"""CompiledPass: one of the model's passes compiled by inductor (max-autotune, the weights
frozen into the graph) that can be settled once warm: then a call no compiled graph covers
runs eager and is counted, instead of compiling for tens of seconds in the middle of a run."""

import torch
import torch.fx.experimental._config as shape_config


class CompiledPass:
    def __init__(self, method):
        self.method = method
        self.compiled = torch.compile(method, dynamic=True, options={"max_autotune": True})
        self.settled = False
        self.eager_calls = 0    # calls after settling that no compiled graph covered

    def __call__(self, *args):
        # read when a graph compiles (torch.compile's options do not carry them); without
        # duck shaping a size that happens to equal another (a table width and the page
        # size, say) is not tied to it, which would leave the graph for that value alone
        with torch._inductor.config.patch(freezing=True), shape_config.patch(use_duck_shape=False):
            if not self.settled:
                return self.compiled(*args)
            try:
                with torch.compiler.set_stance("fail_on_recompile"):
                    return self.compiled(*args)
            except RuntimeError as error:   # raised before the pass runs: nothing to undo
                if "fail_on_recompile" not in str(error):
                    raise
        self.eager_calls += 1
        return self.method(*args)
