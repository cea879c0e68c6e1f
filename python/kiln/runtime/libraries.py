"""The native libraries compiled code calls by name, found and bound here: the OpenBLAS that
large matrix products call (lowering/codegen/blas.py emits the calls), and whether Kiln's
runtime can take the bf16 and 8-bit products on AMX (runtime/kiln_gemm.c). Both the compiler (to
link) and the loader of compiled code (targets/objects.py) need the bindings; this module
needs nothing of MLIR, so loading a `.kx` file stays cheap."""
from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from pathlib import Path

# element type -> BLAS precision letter
_GEMM = {"f32": "s", "f64": "d", "complex<f32>": "c", "complex<f64>": "z"}
_ROUTINES = ("gemm", "gemv")


# Names the generated code calls; `jit_symbols()` binds them to the library's functions in
# the JIT only (the library is not loaded RTLD_GLOBAL: its thousands of unprefixed internal
# symbols would then interpose on another OpenBLAS loaded later, e.g. scipy's).
# OpenBLAS's thread count, kept at 1 around calls the generated code makes on one thread:
# the runtime's function (runtime/kiln_parallel.c), bound to the library by `bind_thread_control`.
_SET_THREADS = "kiln_blas_set_threads"


@dataclass(frozen=True)
class Blas:
    path: str
    prefix: str      # library symbols: {prefix}cblas_sgemm{suffix}
    suffix: str
    int_type: str    # blasint: i64 in the ILP64 build, i32 in the LP64 one

    def library_gemm(self, kind: str, routine: str = "gemm") -> str:
        return f"{self.prefix}cblas_{_GEMM[kind]}{routine}{self.suffix}"

    @staticmethod
    def gemm(kind: str, routine: str = "gemm") -> str:
        """The name generated code calls for `routine` ("gemm" or "gemv") in `kind`."""
        return f"kiln_blas_{_GEMM[kind]}{routine}"


def _bundled(package: str, pattern: str) -> list[Path]:
    try:
        module = __import__(package)
    except ImportError:
        return []
    return sorted((Path(module.__file__).parent.parent / f"{package}.libs").glob(pattern))


@functools.lru_cache(maxsize=None)
def blas() -> Blas | None:
    """The OpenBLAS that matrix products call. First numpy's own (a hard dependency; ILP64,
    shared with numpy's thread pool, so Kiln and numpy in one process do not run two pools
    of spinning BLAS threads), then scipy's (LP64). None if neither wheel bundles one
    (products then stay loop nests)."""
    candidates = [Blas(str(p), "scipy_", "64_", "i64")
                  for p in _bundled("numpy", "libscipy_openblas64_*.so")]
    candidates += [Blas(str(p), "scipy_", "", "i32")
                   for p in _bundled("scipy", "libscipy_openblas-*.so") if "64_" not in p.name]
    for found in candidates:
        try:
            lib = ctypes.CDLL(found.path)
            getattr(lib, found.library_gemm("f32")), getattr(lib, found.library_gemm("f64"))
            return found
        except (OSError, AttributeError):
            continue
    return None


def blas_library() -> str | None:
    found = blas()
    return found.path if found else None


@functools.lru_cache(maxsize=None)
def jit_symbols() -> dict[str, ctypes.c_void_p]:
    """{name the generated code calls: address} for the JIT to bind (empty without BLAS)."""
    found = blas()
    if found is None:
        return {}
    lib = ctypes.CDLL(found.path)
    address = lambda name: ctypes.cast(getattr(lib, name), ctypes.c_void_p)  # noqa: E731
    symbols = {}
    for kind in _GEMM:   # sgemm/dgemm are always there (`blas()`); the others where exported
        for routine in _ROUTINES:
            try:
                symbols[Blas.gemm(kind, routine)] = address(found.library_gemm(kind, routine))
            except AttributeError:
                pass
    return symbols


@functools.lru_cache(maxsize=None)
def _thread_setter() -> ctypes.c_void_p | None:
    """The library's `openblas_set_num_threads_local`, if it has one."""
    found = blas()
    try:
        return ctypes.cast(getattr(ctypes.CDLL(found.path), "openblas_set_num_threads_local"),
                           ctypes.c_void_p) if found else None
    except AttributeError:
        return None


def thread_control() -> bool:
    """Whether BLAS calls can be kept on the calling thread (what the compiler asks)."""
    return _thread_setter() is not None


def bind_thread_control() -> None:
    """Point the runtime's `kiln_blas_set_threads` (runtime/kiln_parallel.c), which wraps
    the library's setter in counted scopes, and its pooled products (GEMM_POOLED) at the
    library: once, before compiled code that calls them is loaded into this process."""
    setter = _thread_setter()
    if setter is not None:
        from .custom_call import runtime
        runtime().KilnBindBlasThreads(setter)
        symbols = jit_symbols()
        runtime().KilnBindBlasGemm(symbols[Blas.gemm("f32")], symbols[Blas.gemm("f64")],
                                   ctypes.c_int32(blas().int_type == "i64"))


def has_routine(kind: str, routine: str = "gemm") -> bool:
    """Whether generated code can call `routine` in element type `kind`."""
    return kind in _GEMM and Blas.gemm(kind, routine) in jit_symbols()




# Kiln's runtime's own products (runtime/kiln_gemm.c): C (+)= A B for bf16 -> f32 and
# 8-bit -> int32. They live in libkiln_runtime, which the JIT links anyway, so they need no
# binding here; lowering/trust.py lists them.
GEMM_BF16_F32 = "kiln_gemm_bf16_f32"
GEMM_I8_I32 = "kiln_gemm_i8_i32"
# ... and its f32 matrix-vector product (runtime/kiln_gemv.c): cblas_sgemv's row-major
# interface with int64 sizes, which large f32 gemv calls go to instead of the library's.
SGEMV_F32 = "kiln_sgemv"
# ... and f32 products with few rows (runtime/kiln_sgemm_small.c).
SGEMM_SMALL_F32 = "kiln_sgemm_small"
# ... and large f32/f64 products in pieces on its pool, each on the library's one-thread
# kernel (runtime/kiln_gemm_pooled.c; cblas_?gemm's row-major interface, int64 sizes).
GEMM_POOLED = {"f32": "kiln_sgemm_pooled", "f64": "kiln_dgemm_pooled"}


@functools.lru_cache(maxsize=None)
def _amx_probe():
    from ..native import runtime_library
    try:
        probe = ctypes.CDLL(str(runtime_library())).kiln_gemm_amx_available
    except (OSError, AttributeError):
        return None
    probe.restype = ctypes.c_int32
    return probe


def amx_products() -> bool:
    """Whether products in bf16 and 8-bit integers go to the runtime's AMX kernels: the CPU
    has AMX, Linux grants this process its tile state, and KILN_AMX=0 (read at each compile,
    as the runtime reads it at each call) does not turn them off."""
    try:
        probe = _amx_probe()
    except Exception:  # noqa: BLE001 - no runtime library: nothing to route to
        return False
    return bool(probe is not None and probe())
