"""Host callbacks on the `kiln` platform: `jax.debug.print`/`jax.debug.callback`,
`jax.pure_callback` and `io_callback` call back into Python from a Kiln program.

JAX lowers them only for its own platforms (`callback.emit_python_callback` refuses others,
and `debug_callback`/`debug_print` have rules for cpu/gpu/tpu only): its callback runs through XLA's host
callback machinery, which a PJRT plugin does not get. Kiln lowers them itself: the callback
is kept in this process's table and the program calls Kiln's custom-call target
`kiln_host_callback` with the callback's index (a typed-FFI attribute), which Kiln's runtime
dispatches to `_run` on the thread running the program. JAX's own lowering rules are kept;
only the function that emits the call is Kiln's where the platform is `kiln` (the narrowest
hook: JAX has no public one for this).

A callback with a maximal sharding (JAX's debug callbacks in a partitioned program) runs on
that one device, as on XLA; others run on every device that runs the program.
"""
from __future__ import annotations

import itertools
import threading

import numpy as np

TARGET = "kiln_host_callback"
PLATFORM = "kiln"
NO_DEVICE = -1

_table: dict[int, tuple] = {}  # index -> (callback, result shapes and dtypes)
_indices = itertools.count(1)
_lock = threading.Lock()


def _keep(callback, result_avals) -> int:
    specs = [(tuple(a.shape), np.dtype(a.dtype)) for a in result_avals]
    with _lock:
        index = next(_indices)
        _table[index] = (callback, specs)
    return index


def _run(results, operands, *, attributes, backend_config):
    """The runtime target: calls callback `index` on the operands and writes its results."""
    from ..distributed.collectives import current
    from ..errors import KilnError
    only = int(attributes.get("device", NO_DEVICE))
    if only != NO_DEVICE and current().id != only:
        return  # XLA runs a maximal-sharded callback on its one device
    index = int(attributes["index"])
    found = _table.get(index)
    if found is None:
        raise KilnError(f"host callback {index} is not in this process (a program compiled "
                        "elsewhere that calls back into Python)",
                        hint="compile the program in the process that runs it")
    callback, specs = found
    try:
        outputs = callback(*[np.asarray(o) for o in operands])
    except Exception as exc:  # the user's callback (or JAX's code around it) failed
        raise KilnError(f"host callback {index} raised {type(exc).__name__}: {exc}",
                        hint="the callback's own error; JAX places a callback's inputs on "
                             "its CPU backend, which KILN_JAX_CPU=0 leaves out") from exc
    outputs = tuple(outputs) if outputs is not None else ()
    if len(outputs) != len(specs):
        raise KilnError(f"host callback returned {len(outputs)} value(s), the program expects "
                        f"{len(specs)}")
    for i, (out, (shape, dtype), into) in enumerate(zip(outputs, specs, results)):
        value = np.asarray(out)
        if value.shape != shape or value.dtype != dtype:
            raise KilnError(f"host callback result {i} is {value.dtype}{list(value.shape)}, "
                            f"the program expects {dtype}{list(shape)}")
        into[...] = value


def _maximal_device(sharding) -> int:
    from jax._src.lib import xla_client as xc
    if isinstance(sharding, xc.OpSharding) and sharding.type == xc.OpSharding.Type.MAXIMAL:
        return int(sharding.tile_assignment_devices[0])
    return NO_DEVICE


def _emit(ctx, callback, token, operands, operand_avals, result_avals, *, has_side_effect,
          returns_token=True, partitioned=False, sharding=None):
    """Kiln's `emit_python_callback`: the same results, through `kiln_host_callback`. A token
    passes through unchanged (a side-effecting call keeps its place in the program)."""
    from jax._src import ffi
    index = _keep(callback, result_avals)
    lowering = ffi.build_ffi_lowering_function(TARGET, has_side_effect=has_side_effect)
    results = lowering(ctx, *operands, index=np.int64(index),
                       device=np.int64(_maximal_device(sharding)))
    return list(results.results), token, None


def install() -> None:
    """Lower host callbacks for the `kiln` platform with `_emit` (JAX's rules otherwise) and
    register the runtime target."""
    import jax._src.callback as callback_module
    from jax._src import debugging
    from jax._src.interpreters import mlir

    from ..runtime.custom_call import register_custom_call
    register_custom_call(TARGET, _run, api_version=4)
    original = callback_module.emit_python_callback
    if getattr(original, "_kiln", False):
        return

    def emit_python_callback(ctx, *args, **kwargs):
        if tuple(ctx.module_context.platforms) == (PLATFORM,):
            return _emit(ctx, *args, **kwargs)
        return original(ctx, *args, **kwargs)
    emit_python_callback._kiln = True
    callback_module.emit_python_callback = emit_python_callback
    cpu = mlir._platform_specific_lowerings["cpu"]
    for primitive in (debugging.debug_callback_p, debugging.debug_print_p):
        # CPU's rules (they emit through emit_python_callback); not cached, like JAX's TPU
        # ones: each lowering keeps its own callback.
        mlir.register_lowering(primitive, cpu[primitive].rule, platform=PLATFORM,
                               inline=cpu[primitive].inline, cacheable=False)
