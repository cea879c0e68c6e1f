"""The workload type shared by the benchmark suites (workloads.py, everyday.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np


@dataclass
class Workload:
    name: str
    make: Callable[[], tuple[Callable, tuple[np.ndarray, ...]]]   # -> (jax fn, inputs)
    flops: float = 0.0          # per call; 0 -> report GB/s from `bytes`
    bytes: float = 0.0
    tol: tuple[float, float] = (2e-3, 2e-3)
    note: str = ""
    skip: dict = field(default_factory=dict)   # peer -> why it is not run on this workload
    numpy_fn: Callable | None = None            # the same computation in numpy, if it has one
    x64: bool = False                           # 64-bit types: jax traces it with x64 enabled
    _cache: dict = field(default_factory=dict, repr=False)

    def build(self):
        """(jax function, inputs, StableHLO text), generated once."""
        if "built" not in self._cache:
            import jax
            with self.jax_mode():
                fn, args = self.make()
                text = jax.jit(fn).lower(*args).compiler_ir("stablehlo")
            self._cache["built"] = (fn, args, str(text))
        return self._cache["built"]

    def jax_mode(self):
        """The jax configuration this workload is traced and compiled under."""
        import jax
        return jax.enable_x64(self.x64)

    @property
    def unit(self) -> str:
        return "GFLOP/s" if self.flops else "GB/s"

    def rate(self, seconds: float) -> float:
        return (self.flops or self.bytes) / seconds / 1e9


def _rng(seed=0):
    return np.random.default_rng(seed)


def _f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)
