"""Kiln's environment variables: the one table of every KILN_* setting, and its accessor.

Python code reads a setting through `get(name)` (its value, else the table's default), or
`raw(name)` where unset must stay distinguishable from the default (cache keys). Both refuse
a name missing from the table, so a new variable cannot be read before it is documented: the
reference page (docs/reference/environment.md) is generated from `VARIABLES`, and
tests/py/test_docs_reference.py fails on a KILN_* name in the sources that is not here. The
C runtime reads its own variables with getenv; they are listed too, marked `runtime`.

This module imports nothing of Kiln's: kiln/__init__.py reads KILN_MLIR_DEEPBIND through it
before anything else is loaded.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

PYTHON = "python"
RUNTIME = "runtime"  # read by the C runtime (runtime/*.c), in the process that calls the code


@dataclass(frozen=True)
class Variable:
    """A KILN_* setting. `default`: what `get` returns when it is unset (None: the reader
    computes the default, which `default_text` describes)."""
    name: str
    default: str | None
    meaning: str
    read_by: str = PYTHON
    default_text: str | None = None

    def described_default(self) -> str:
        """The default as the reference shows it."""
        if self.default_text is not None:
            return self.default_text
        return "unset" if self.default in (None, "") else f"`{self.default}`"


VARIABLES: tuple[Variable, ...] = (
    # compiling
    Variable("KILN_CACHE", "1", "`0` (or `false`, `off`, `no`) turns the persistent compile "
             "cache off"),
    Variable("KILN_CACHE_DIR", None, "where the compile cache lives",
             default_text="`$XDG_CACHE_HOME/kiln`, else `~/.cache/kiln`"),
    Variable("KILN_CACHE_MAX_MB", "2048", "the most megabytes the compile cache keeps (the "
             "least recently used entries go first)"),
    Variable("KILN_CONFORMANCE_REPORT", None, "a `kiln conformance --json` report the "
             "documentation build reads: the op-support table then shows, per op, how many "
             "of the report's files passed (CI builds the site with its conformance sample's)"),
    Variable("KILN_COMPILE_IN_PROCESS", "0", "`1` compiles in the calling process instead of "
             "a compile worker (no isolation from a crash of the compiler)"),
    Variable("KILN_COMPILE_TIMEOUT", "1800", "seconds a compile in a worker may take before "
             "it is stopped with an error"),
    Variable("KILN_RUN_TIMEOUT", None, "seconds one call of a compiled program may run before "
             "it is stopped with an error (a program may loop forever: set it for programs you "
             "do not trust); read when the runtime is loaded", default_text="no limit"),
    Variable("KILN_COMPILE_MEMORY", None, "memory one compile or read may use: bytes or a "
             "K/M/G/T amount (`16G`), `0` or `none` for no limit",
             default_text="half of physical memory"),
    Variable("KILN_READ_TIMEOUT", "60", "seconds after which a reader of a binary input "
             "(protos, bytecode) that has not finished is taken to hang"),
    Variable("KILN_MAX_INLINED_OPS", "2097152", "the most operations inlining calls into the "
             "entry may build (a program may in any case grow to 8 times its size)"),
    Variable("KILN_MAX_BUFFER_BYTES", None, "the largest buffer a program may declare or "
             "allocate, in bytes (checked when compiling, and by the runtime's allocator)",
             default_text="physical memory"),
    Variable("KILN_LLVM_OPTIONS", "", "LLVM command-line options for code generation, "
             "space-separated (`-vectorize-slp=false`); they take part in the cache key"),
    Variable("KILN_QUICK_CODEGEN", "1", "`0` turns off LLVM's quick (O0) code generation for "
             "tiny programs"),
    Variable("KILN_VERIFY_EACH_PASS", "0", "`1` verifies the IR after every pass, not only "
             "between stages, to find the pass that broke it"),
    Variable("KILN_CUSTOM_CALL_LIBRARIES", "", "shared libraries of custom-call targets to "
             "load (separated by `:`), so the command-line tools can compile programs calling "
             "them"),
    # devices
    Variable("KILN_DEVICES", "1", "how many devices Kiln's PJRT plugin offers JAX (1 to "
             "1024, threads of one process sharing host memory)"),
    Variable("KILN_JAX_CPU", "1", "with `JAX_PLATFORMS=kiln`, also start JAX's CPU backend "
             "(after Kiln, which stays the default): JAX's callbacks and `lax.scan` place "
             "values on it by name; `0` leaves it out"),
    Variable("KILN_MAX_DEVICES", None, "the most devices (replicas x partitions) a program "
             "may ask for", default_text="1024, or half the process's thread limit if lower"),
    Variable("KILN_COLLECTIVE_TIMEOUT", "600", "seconds a device waits in a collective for "
             "the others before it fails"),
    Variable("KILN_GPU_EMULATOR_SHARED", "poison", "what the gpu-emulator target's shared "
             "memory holds as each block starts: `poison` (0xFF bytes) or `zero`"),
    # loading
    Variable("KILN_MLIR_DEEPBIND", "1", "`0` loads torch-mlir's LLVM the ordinary way, where "
             "the platform refuses RTLD_DEEPBIND (sharing a process with TensorFlow needs it)"),
    Variable("KILN_RUNTIME_LIBRARY", None, "a runtime library to load instead of the "
             "installed one (the sanitizer build in the tests)"),
    Variable("KILN_PJRT_LIBRARY", None, "a PJRT plugin library for JAX to load instead of "
             "the installed one (the sanitizer build in the tests)"),
    # the C runtime
    Variable("KILN_AMX", None, "`0` (or `off`, `false`, `no`) keeps bf16/int8 products off "
             "the AMX units; read when compiling too, and part of the cache key", RUNTIME,
             default_text="on where the CPU has AMX"),
    Variable("KILN_NUM_THREADS", None, "threads of the runtime's pool (loops on all cores)",
             RUNTIME, default_text="the number of online CPUs"),
    Variable("KILN_SPIN_US", None, "microseconds an idle pool thread spins before it sleeps "
             "(`0`: sleep at once)", RUNTIME, default_text="the runtime's built-in spin time"),
    Variable("KILN_SHARED_CORES", None, "whether the largest matrix products (2^29 "
             "multiply-adds and up) assume other processes share the cores: `1` runs them in "
             "pieces on the runtime's pool like smaller ones, `0` on the BLAS library's own "
             "threads", RUNTIME,
             default_text="measured: pieces while other processes kept the cores busy lately"),
    Variable("KILN_POOL_MB", "512", "megabytes of freed temporary buffers the runtime keeps "
             "for reuse", RUNTIME),
)

_BY_NAME = {variable.name: variable for variable in VARIABLES}


def variable(name: str) -> Variable:
    """The table's entry for `name`; a name missing from the table is a bug in Kiln."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise LookupError(f"{name} is not in kiln.environment.VARIABLES: add it there, with "
                          "its default and meaning") from None


def get(name: str) -> str | None:
    """The value of setting `name` now (read at each call, so a change takes effect), else
    its default from the table (None where the reader computes it)."""
    return os.environ.get(name, variable(name).default)


def raw(name: str) -> str | None:
    """The value of setting `name` as set now, None when unset."""
    variable(name)
    return os.environ.get(name)

