"""The timing rule (gemm_engine/runtime/timing.py): samples of compared calls are taken in turns."""
import pytest

from gemm_engine.runtime.timing import device_time, device_times


class HostRuntime:
    """A runtime with no device events: timing falls back to the host clock."""
    backend = "opencl"

    def synchronize(self):
        pass


def test_samples_of_compared_calls_alternate():
    log = []
    fns = {"engine": lambda: log.append("e"), "base": lambda: log.append("b")}
    times = device_times(HostRuntime(), fns, repeat=3, warmup=1, min_window=0)
    assert set(times) == {"engine", "base"} and all(t >= 0 for t in times.values())
    # warm-up and the batch-size probe are skipped at min_window=0: only the samples remain
    assert "".join(log) == "e" + "b" + "eb" * 3


def test_each_call_gets_its_own_batch():
    counts = {"short": 0, "long": 0}
    import time

    def short():
        counts["short"] += 1

    def long():
        counts["long"] += 1
        time.sleep(0.002)
    device_times(HostRuntime(), {"short": short, "long": long}, repeat=2, warmup=0, min_window=1e-3)
    # the 2 ms call runs alone in each sample; the instant one in batches of up to MAX_BATCH
    assert counts["long"] == 1 + 2
    assert counts["short"] > 1 + 2 * 2


def test_repeat_must_be_positive():
    with pytest.raises(ValueError, match="repeat"):
        device_time(HostRuntime(), lambda: None, repeat=0)
