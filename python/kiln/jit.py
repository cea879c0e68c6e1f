"""kiln.jit: trace a JAX function with jax, compile it with Kiln, call it like the function.

    @kiln.jit
    def f(params, x): ...
    f(params, x)          # pytree of numpy arrays, compiled once per argument shapes/dtypes

Tracing goes through `jax.export` (the same artifact `kiln run` loads), so what runs is
exactly what an export would contain; jax.grad / jax.vmap applied before kiln.jit are traced
along. Kiln compiles each distinct signature (pytree structure, shapes, dtypes, weak types)
once; `.compile_count` says how often it did.
"""
from __future__ import annotations

import functools
import threading

import numpy as np

from .errors import KilnError


def jit(fn=None, *, return_jax: bool = False, static_argnums: tuple[int, ...] = (),
        target: str = "cpu"):
    """Decorator: `kiln.jit(fn)` or `kiln.jit(fn, return_jax=True)` (outputs as jax arrays);
    `static_argnums` are passed to the trace as Python values and key the cache by value."""
    if fn is None:
        return functools.partial(jit, return_jax=return_jax, static_argnums=static_argnums,
                                 target=target)
    return Jitted(fn, return_jax=return_jax, static_argnums=tuple(static_argnums), target=target)


def _jax():
    try:
        import jax
    except ImportError:
        raise KilnError("kiln.jit needs jax to trace the function, and jax is not installed",
                        hint="pip install jax, or compile an exported artifact with kiln.compile") from None
    return jax


class Jitted:
    def __init__(self, fn, *, return_jax: bool, static_argnums: tuple[int, ...], target: str):
        self.fn, self.return_jax, self.static_argnums, self.target = fn, return_jax, static_argnums, target
        self._cache: dict = {}
        self._lock = threading.Lock()
        self.compile_count = 0
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        jax = _jax()
        static = {i: args[i] for i in self.static_argnums}
        dynamic = tuple(a for i, a in enumerate(args) if i not in static)
        leaves, in_tree = jax.tree_util.tree_flatten((dynamic, kwargs))
        if any(isinstance(x, jax.core.Tracer) for x in leaves):
            raise KilnError(f"{getattr(self.fn, '__name__', 'the function')} compiled by kiln.jit "
                            "was called inside a JAX transformation",
                            hint="apply jax.grad / jax.vmap / jax.jit to the function before "
                                 "kiln.jit, not to the kiln.jit result")
        key = (in_tree, tuple(sorted(static.items(), key=lambda kv: kv[0])),
               tuple(_leaf_key(jax, x) for x in leaves))
        with self._lock:
            entry = self._cache.get(key)
            if entry is None:
                entry = self._cache[key] = self._compile(jax, static, dynamic, kwargs)
                self.compile_count += 1
        exe, exp = entry
        arrays = [np.asarray(x, dtype=a.dtype) for x, a in zip(leaves, exp.in_avals)]
        outputs = exe.flat(*arrays)
        if self.return_jax:
            outputs = [jax.numpy.asarray(o) for o in outputs]
        return jax.tree_util.tree_unflatten(exp.out_tree, outputs)

    def _compile(self, jax, static, dynamic, kwargs):
        from .context import make_context
        from .driver import Executable
        from .frontend.jax_export import info_from_exported, load_info
        from .targets import get_target

        def traced(*dyn, **kw):
            it = iter(dyn)
            full = [static[i] if i in static else next(it) for i in range(len(static) + len(dyn))]
            return self.fn(*full, **kw)
        name = getattr(self.fn, "__name__", "fn")
        try:
            exp = jax.export.export(jax.jit(traced), platforms=("cpu",))(*dynamic, **kwargs)
        except (TypeError, ValueError) as exc:
            raise KilnError(f"jax could not trace {name}: {exc}",
                            hint="kiln.jit traces with jax.export; pass arrays, or mark Python "
                                 "values with static_argnums") from None
        info = info_from_exported(exp)
        filename = f"<kiln.jit {name}>"
        module, convention = load_info(info, make_context(), filename)
        return Executable(module, get_target(self.target), None, filename,
                          convention=convention), exp


def _leaf_key(jax, x):
    """What a trace depends on for one leaf: shape, dtype as JAX canonicalises it (float64 is
    float32 unless x64 is on) and whether it is weakly typed."""
    if isinstance(x, (bool, int, float, complex)):
        return (type(x).__name__,)
    dtype = getattr(x, "dtype", None)
    shape = getattr(x, "shape", None)
    if dtype is None or shape is None:
        x = np.asarray(x)
        dtype, shape = x.dtype, x.shape
    try:
        dtype = jax.dtypes.canonicalize_dtype(dtype)
    except (TypeError, ValueError):  # not a JAX dtype: let the trace report it
        pass
    return (tuple(shape), str(dtype), bool(getattr(x, "weak_type", False)))
