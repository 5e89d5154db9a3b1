"""Energy a GPU spends on a piece of work, read from NVML's total-energy counter (millijoules
since the driver loaded; Volta and newer, through nvidia-ml-py): joules per call of a
function run back to back, and the mean power meanwhile."""

import time
from typing import Callable, Optional

import torch


class EnergyMeter:
    def __init__(self, read_millijoules: Callable[[], int]):
        self._read = read_millijoules

    @classmethod
    def open(cls, device: torch.device) -> tuple[Optional["EnergyMeter"], str]:
        """(a meter, what it reads) for a CUDA device where NVML answers; (None, why not)
        elsewhere."""
        if device.type != "cuda":
            return None, f"no energy counter on {device.type}"
        try:
            import pynvml
        except ImportError:
            return None, "no energy numbers: nvidia-ml-py (pynvml) is not installed"
        try:
            pynvml.nvmlInit()
            index = device.index if device.index is not None else torch.cuda.current_device()
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        except pynvml.NVMLError as error:
            return None, f"no energy numbers: NVML says {error}"
        return (cls(lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)),
                f"NVML total energy, GPU {index}")

    def joules_per_call(self, work: Callable[[], object], seconds: float = 1.0,
                        max_calls: int = 0) -> tuple[float, float]:
        """(joules per call, mean watts) of work() run back to back until `seconds` pass
        (the counter moves in steps of a few ms) or max_calls (>0) calls are made."""
        work()
        torch.cuda.synchronize()
        calls = 0
        started, start_mj = time.perf_counter(), self._read()
        while True:
            work()
            torch.cuda.synchronize()
            calls += 1
            elapsed = time.perf_counter() - started
            if elapsed >= seconds or calls == max_calls:
                break
        joules = (self._read() - start_mj) / 1e3
        return joules / calls, joules / elapsed
