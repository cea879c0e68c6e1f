"""Abstract values: the shape and dtype of each flat argument and result an Executable takes
and returns, in the form `jax.export.Exported.in_avals` has (objects with `.shape` and
`.dtype`)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..frontend.convention import Aval
from ..runtime.dtypes import numpy_dtype
from ..runtime.memref import TensorSpec


@dataclass(frozen=True)
class ShapedArray:
    """`shape` holds an int per static dimension; a dynamic one is JAX's symbolic expression
    ("b", "2*b") where the producer named it, else None."""
    shape: tuple[int | str | None, ...]
    dtype: np.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.dtype.name}[{dims}]"


def from_spec(spec: TensorSpec) -> ShapedArray:
    return ShapedArray(tuple(spec.shape), spec.dtype)


def from_symbolic(aval: Aval) -> ShapedArray:
    shape = tuple(int(d) if d.isdigit() else None if d == "?" else d for d in aval.shape)
    return ShapedArray(shape, numpy_dtype(aval.element))
