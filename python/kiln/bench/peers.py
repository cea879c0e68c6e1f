"""The systems Kiln is measured against, each compiling the same StableHLO text.

A peer that is not installed reports why (`Peer.missing`), and is shown as missing in the
table: nothing is ever substituted for it.
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np

Runner = Callable[[], tuple]   # runs once on the fixed inputs, returns outputs as numpy arrays


class Peer:
    name = "peer"
    missing: str | None = None   # why the peer cannot run here

    def compile(self, workload) -> Runner:
        raise NotImplementedError


class KilnPeer(Peer):
    name = "kiln"

    def __init__(self, **options):
        self.options = options   # kiln.compile options (e.g. opt_level=2)

    def compile(self, workload) -> Runner:
        import kiln
        _, args, text = workload.build()
        exe = kiln.compile(text, filename=f"<bench:{workload.name}>", **self.options)
        return lambda: exe(*args)


def pool_peak(run) -> float | None:
    """MB of temporaries Kiln's buffer pool had live at once during `run()` (None if the
    runtime library has no pool)."""
    import ctypes
    from .. import native
    try:
        lib = ctypes.CDLL(str(native.runtime_library()))
        stats = (ctypes.c_int64 * 3)()
        lib.KilnPoolResetPeak()
        lib.KilnPoolStats(stats)
        before = stats[0]
        run()
        lib.KilnPoolStats(stats)
        return (stats[1] - before) / 2 ** 20
    except (OSError, AttributeError):
        return None


class XlaPeer(Peer):
    """XLA:CPU through jax.jit on the jax function the StableHLO came from."""
    name = "xla"

    def __init__(self):
        try:
            import jax  # noqa: F401
        except ImportError as exc:
            self.missing = f"jax not installed ({exc})"

    def compile(self, workload) -> Runner:
        import jax
        fn, args, _ = workload.build()
        with workload.jax_mode():
            dev = [jax.device_put(a) for a in args]
            compiled = jax.jit(fn).lower(*dev).compile()

        def run():
            out = compiled(*dev)
            leaves = jax.tree_util.tree_leaves(out)
            jax.block_until_ready(leaves)
            return tuple(np.asarray(x) for x in leaves)
        return run


class PjrtPeer(XlaPeer):
    """Kiln through JAX's PJRT plugin: the jax function jitted on the "kiln" device, as a
    JAX user runs it (JAX_PLATFORMS=kiln); the same dispatch as the xla peer, so the two
    differ only in the backend."""
    name = "pjrt"

    def __init__(self):
        super().__init__()
        if self.missing is None:
            try:
                import jax
                self.device = jax.devices("kiln")[0]
            except Exception as exc:  # noqa: BLE001 - shown as the peer's reason
                self.missing = f"JAX has no kiln device ({type(exc).__name__}: {exc})"

    def compile(self, workload) -> Runner:
        import jax
        with jax.default_device(self.device):
            return super().compile(workload)


class IreePeer(Peer):
    """IREE's llvm-cpu backend for the host CPU, from the iree-base-compiler/-runtime wheels."""
    name = "iree"

    def __init__(self):
        try:
            import iree.compiler  # noqa: F401
            import iree.runtime  # noqa: F401
        except ImportError as exc:
            self.missing = f"iree-base-compiler/iree-base-runtime not installed ({exc.name})"

    def compile(self, workload) -> Runner:
        import iree.compiler as ireec
        import iree.runtime as ireert
        _, args, text = workload.build()
        vmfb = ireec.compile_str(text, target_backends=["llvm-cpu"], input_type="stablehlo",
                                 extra_args=["--iree-llvmcpu-target-cpu=host"])
        config = ireert.Config("local-task")
        ctx = ireert.SystemContext(config=config)
        vm_module = ireert.VmModule.copy_buffer(ctx.instance, vmfb)
        ctx.add_vm_module(vm_module)
        fn = ctx.modules[vm_module.name]["main"]
        dev = [ireert.asdevicearray(config.device, a) for a in args]

        def run():
            out = fn(*dev)
            out = out if isinstance(out, (tuple, list)) else (out,)
            return tuple(np.asarray(o.to_host() if hasattr(o, "to_host") else o) for o in out)
        return run


class NumpyPeer(Peer):
    """numpy (its bundled OpenBLAS) for the workloads that are one library call there."""
    name = "numpy"

    def compile(self, workload) -> Runner:
        if workload.numpy_fn is None:
            raise NotApplicable("no single numpy call computes this workload")
        _, args, _ = workload.build()
        return lambda: workload.numpy_fn(*args)


class NotApplicable(Exception):
    pass


def all_peers() -> list[Peer]:
    return [KilnPeer(), XlaPeer(), IreePeer(), NumpyPeer(), PjrtPeer()]


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start
