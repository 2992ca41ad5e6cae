"""The tuner: time each candidate kernel for a problem and keep the fastest that is also right.

Operands are fresh random device arrays with the problem's layouts, leading dimensions padded so
each operand has (at least) the problem's vector alignment, which is what the configs assume.
Every candidate is compiled (CuPy's / PyOpenCL's binary caches make repeats cheap), timed once to
screen out the hopeless (more than twice the best so far), and the rest timed with
`timing.device_time`. The winner's output is checked against the heuristic's before it is kept:
a tiling that computes the wrong thing must never reach the cache.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, replace

import numpy as np

from ..dtypes import BFLOAT16, device_dtype, numpy_dtype
from ..errors import SetupError
from ..views import OperandView
from ..epilogue.spec import IDENTITY
from ..call.arguments import plain_arguments
from ..call.prepare import DeviceOperand
from ..problem import Layout, MatmulProblem
from ..compose.selection import Selection
from ..runtime.timing import device_time
from .cache import Entry
from .key import problem_key
from .space import candidates

#: A candidate whose screening time exceeds this multiple of the best full time is not timed again.
SCREEN_FACTOR = 2.0


def describe(selection) -> str:
    """The fields of a selection that differ from its knobs' defaults: ``stage_m=128 tile_n=8``."""
    return selection.describe() if isinstance(selection, Selection) else repr(selection)


@dataclass(frozen=True)
class Trial:
    algorithm: str
    selection: object
    seconds: float | None = None   # median device time; None when it could not run
    note: str = ""                 # "screened out", or why it could not run

    def __str__(self):
        t = "-" if self.seconds is None else f"{self.seconds * 1e3:.4f} ms"
        return f"{self.algorithm:22s} {t:>12s}  {describe(self.selection)}{'  (' + self.note + ')' if self.note else ''}"


@dataclass(frozen=True)
class TuneResult:
    key: str
    problem: MatmulProblem
    best: Trial
    trials: tuple[Trial, ...] = ()
    refused: tuple[tuple[str, str], ...] = ()   # (algorithm, setup error) of non-candidates
    from_cache: bool = False

    @classmethod
    def cached(cls, key, problem, entry: Entry) -> "TuneResult":
        return cls(key, problem, Trial(entry.algorithm, entry.selection, entry.seconds), from_cache=True)

    def entry(self) -> Entry:
        return Entry(self.best.algorithm, self.best.selection, self.best.seconds, len(self.trials))

    def __str__(self):
        head = f"tuned {self.key}" + (" (from the cache)" if self.from_cache else "")
        lines = [head, f"best: {self.best}"]
        lines += [f"  {t}" for t in sorted(self.trials, key=lambda t: (t.seconds is None, t.seconds or 0))]
        lines += [f"  {name:24s} refused: {why}" for name, why in self.refused]
        return "\n".join(lines)


class ProgressBar:
    """The tuner's ``progress(done, total, label)`` callback drawn by tqdm on stderr: candidates
    done, rate and time left, the candidate being timed; a fresh bar for each problem."""

    def __init__(self, **tqdm_options):
        self.options, self.bar = tqdm_options, None

    def __call__(self, done: int, total: int, label: str) -> None:
        from tqdm import tqdm    # imported on first use: tuning is the only thing that draws a bar
        if self.bar is None or done == 0:
            self.close()
            self.bar = tqdm(total=total, desc="tuning", unit="candidate", **self.options)
        self.bar.set_postfix_str(label[:48], refresh=False)
        self.bar.update(done - self.bar.n)
        if done >= total:
            self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _progress(progress):
    if callable(progress):
        return progress
    if progress or (progress is None and sys.stderr.isatty()):
        return ProgressBar()
    return lambda done, total, label: None


def _operand(runtime, problem: MatmulProblem, lhs: bool, rng) -> DeviceOperand:
    """A random device operand with the problem's layout and (at least) its alignment."""
    et = problem.lhs if lhs else problem.rhs
    rows, cols = (problem.m, problem.k) if lhs else (problem.k, problem.n)
    layout = problem.lhs_layout if lhs else problem.rhs_layout
    align = problem.lhs_align if lhs else problem.rhs_align
    inner, outer = (cols, rows) if layout is Layout.ROW else (rows, cols)
    ld = -(-inner // align) * align
    dtype = numpy_dtype(et)
    if dtype.kind in "iu":
        host = rng.integers(-8, 8, (problem.batch, outer, ld)).astype(dtype)
    else:
        host = rng.standard_normal((problem.batch, outer, ld)).astype(dtype)
    dev = runtime.to_device(host.view(device_dtype(et)))
    view = OperandView(layout, ld, outer * ld)
    return DeviceOperand(dev, view, align)


def _out_storage(problem: MatmulProblem):
    return device_dtype(problem.out)


class Tuner:
    """Times candidates with a `Planner` and a `Launcher` (an engine's, or any runtime's); ``choose``
    is the choice policy whose default pick is the reference every new best must match."""

    def __init__(self, planner, launcher, choose, repeat: int = 10, warmup: int = 2, progress=None,
                 exhaustive: bool = False, seed: int = 0):
        self.planner, self.launcher, self.choose = planner, launcher, choose
        self.runtime = planner.runtime
        self.repeat, self.warmup = repeat, warmup
        self.progress, self.exhaustive, self.seed = _progress(progress), exhaustive, seed

    def run(self, problem: MatmulProblem) -> TuneResult:
        rt = self.runtime
        problem = replace(problem, epilogue=IDENTITY)    # see key.py: the plain product's winner
        key = problem_key(problem, rt.device)
        algs, refused = candidates(problem, rt.dialect, self.exhaustive)
        if not algs:
            raise SetupError("tuner", "no candidate sets up for this problem: "
                             + "; ".join(f"{n}: {r}" for n, r in refused.items()))
        rng = np.random.default_rng(self.seed)
        lhs, rhs = _operand(rt, problem, True, rng), _operand(rt, problem, False, rng)
        storage = _out_storage(problem)
        target = rt.empty((problem.batch, problem.m, problem.n), storage)
        values = plain_arguments(lhs, rhs, target, problem).values(rt.ptr_arg)

        def runner(alg, cfg=None):
            plan = self.planner.plan(alg, problem, cfg)
            args = plan.signature.pack(self.launcher.with_workspace(plan, values))
            return lambda: self.launcher.run_packed(plan, args)

        # The reference every new best must match: the heuristic's kernel, which tests check
        # against numpy on every backend.
        choice = self.choose(problem, "auto")
        runner(choice.algorithm, choice.config)()
        reference = self._host(problem, target)
        trials: list[Trial] = []
        best = None
        for i, alg in enumerate(algs):
            self.progress(i, len(algs), f"{alg.name} {describe(alg.selection)}")
            try:
                run = runner(alg)
                rough = device_time(rt, run, repeat=1, warmup=1)
                if best is not None and rough > SCREEN_FACTOR * best.seconds:
                    trials.append(Trial(alg.name, alg.selection, rough, "screened out"))
                    continue
                seconds = device_time(rt, run, repeat=self.repeat, warmup=self.warmup)
            except SetupError as exc:
                trials.append(Trial(alg.name, alg.selection, None, f"refused: {exc}"))
                continue
            except Exception as exc:  # noqa: BLE001 -- a candidate that fails must not stop tuning
                trials.append(Trial(alg.name, alg.selection, None, f"failed: {type(exc).__name__}: {exc}"))
                continue
            trial = Trial(alg.name, alg.selection, seconds)
            if best is None or seconds < best.seconds:
                err = self._error(problem, target, reference)
                if err is not None:
                    trial = replace(trial, note=f"wrong result (relative error {err:.2e}): not kept")
                else:
                    best = trial
            trials.append(trial)
        self.progress(len(algs), len(algs), "done")
        if best is None:
            raise SetupError("tuner", "no candidate ran: " + "; ".join(t.note for t in trials))
        return TuneResult(key, problem, best, tuple(trials), tuple(refused.items()))

    def _error(self, problem, target, reference) -> float | None:
        """None when ``target`` matches the reference within the dtype's tolerance, else the error."""
        got = self._host(problem, target)
        if problem.out.name == "int32":
            return None if np.array_equal(got, reference) else 1.0
        tol = 2e-2 if problem.precision == "tf32" else {"f64": 1e-10, "f32": 1e-4}.get(problem.lhs.compute, 2e-2)
        err = float(np.linalg.norm(got - reference)) / max(float(np.linalg.norm(reference)), 1e-30)
        return None if err <= tol else err

    def _host(self, problem, array) -> np.ndarray:
        host = self.runtime.to_host(array)
        if problem.out is BFLOAT16:
            host = host.view(numpy_dtype(BFLOAT16))
        return host.astype(np.float64)
