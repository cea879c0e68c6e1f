"""What Kiln's PJRT plugin (runtime/pjrt/kiln_pjrt_python.c) calls in Python.

The C side calls, holding the GIL:
  stablehlo_versions()                              -> ((major, minor, patch), (...))
  compile(code, format, options, num_devices)       -> Program | Failure
  Program.execute([[(memoryview, type, dims), ...] per device])
                                                    -> [[uint8 array per output] per device]
                                                       | Failure
  Program.serialize()                               -> bytes | Failure
  deserialize(data, options, num_devices)           -> Program | Failure
A Failure carries a PJRT error code and Kiln's message; the framework raises it as
JaxRuntimeError. Results go back as flat byte views of contiguous numpy arrays, which the C
buffers then own (no copy).
"""
from __future__ import annotations

import collections
import hashlib
import traceback

import numpy as np

from ..errors import KilnError
from . import element_types
from .compile_options import CompileOptions, parse_compile_options

# PJRT_Error_Code values (runtime/pjrt/kiln_pjrt_c_api.h)
CANCELLED = 1
INVALID_ARGUMENT = 3
INTERNAL = 13


# Where this process got the plugin's programs: "compiled" (Kiln compiled it), "kiln_cache"
# (Kiln's compile cache), "deserialized" (a serialized executable, e.g. from JAX's persistent
# cache); and "python_execute", the runs that went through Program.execute rather than the
# C path (runtime/pjrt/kiln_pjrt_direct.c). Updated under the GIL; for tests and for users
# asking what a run did.
counts: collections.Counter = collections.Counter()


class Failure:
    """An error for the C side to report: `pjrt_error_code` and `message`."""

    def __init__(self, code: int, message: str):
        self.pjrt_error_code = code
        self.message = message


def _failure(what: str, exc: BaseException) -> Failure:
    if isinstance(exc, KilnError):
        return Failure(INVALID_ARGUMENT, f"Kiln: {exc.one_line()}")
    # A bug in Kiln or the plugin: say where, for the report.
    where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    at = f" at {where.filename}:{where.lineno}" if where else ""
    return Failure(INTERNAL, f"Kiln PJRT plugin: {what} failed with "
                             f"{type(exc).__name__}: {exc}{at}")


def stablehlo_versions() -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """The StableHLO versions Kiln's importer reads: JAX serializes to at most the current."""
    from torch_mlir._mlir_libs import _stablehlo

    def parse(text):
        return tuple(int(part) for part in text.split("."))
    return parse(_stablehlo.get_current_version()), parse(_stablehlo.get_minimum_version())


class Program:
    """A program compiled by Kiln for the plugin, with the metadata the C side copies."""

    def __init__(self, executable, name: str, options: CompileOptions, fingerprint: str,
                 token_outputs=()):
        self.executable = executable
        self.name = name
        self.fingerprint = fingerprint
        self.num_replicas = options.num_replicas
        self.num_partitions = options.num_partitions
        self.device_ids = options.device_ids
        self.device_assignment = options.serialized_device_assignment()
        specs = executable.result_specs
        self.output_dtypes = [np.dtype(s.dtype) for s in specs]
        # Results the program declares as !stablehlo.token: Kiln computes an empty bool array
        # for each (lowering/tuples.py), the framework gets a buffer of PJRT's TOKEN type.
        self.token_outputs = sorted(token_outputs)
        self.output_types = [element_types.TOKEN if i in token_outputs else
                             element_types.code_of(s.dtype, f"result {i}")
                             for i, s in enumerate(specs)]
        if not all(s.is_static for s in specs):
            raise KilnError("results of dynamic shape cannot be returned through PJRT",
                            location=name)
        self.code_size = 0
        self.donated: list[int] = []  # parameters whose buffers a run consumes
        self._plain = executable.convention.in_tree is None
        self._devices = len(self.device_ids)
        if executable.num_devices != self._devices:
            raise KilnError(f"the program declares {executable.num_devices} device(s), the "
                            f"compile options {self._devices}", location=name)
        self._global_shapes = None
        # Serialized xla.OpSharding of each parameter and output (JAX reads a partitioned
        # program's through the PJRT Shardings extension), None where they do not apply.
        self.parameter_shardings = self.output_shardings = None
        if self._devices > 1:
            self._set_up_devices(executable, specs, options)
        else:
            self.output_dims = [tuple(int(d) for d in s.shape) for s in specs]
        for i in self.token_outputs:
            self.output_dims[i] = ()
        self.native_call = _native_call(executable, name) \
            if self._devices == 1 and not self.token_outputs else None

    def _set_up_devices(self, executable, specs, options: CompileOptions):
        """A program over several devices: replicas (pmap) run the whole program each on
        their own arguments; partitions (jit shardings, shard_map) take and return each
        device's shard of the global values (lowering/spmd.py), whose shardings JAX reads."""
        from .shardings import op_sharding
        if options.num_replicas > 1 and options.num_partitions > 1:
            raise KilnError(f"{options.num_replicas} replicas of a program partitioned "
                            f"{options.num_partitions} ways do not run through Kiln's PJRT "
                            "plugin", location=self.name,
                            hint="use replicas (pmap) or partitions (jit shardings), not both")
        if not all(s.is_static for s in executable.arg_specs):
            raise KilnError("programs over several devices need static argument shapes",
                            location=self.name)
        self._global_shapes = tuple(tuple(int(d) for d in s.shape)
                                    for s in executable.arg_specs)
        if options.num_partitions == 1:
            self.output_dims = [tuple(int(d) for d in s.shape) for s in specs]
            self._argument_dims = self._global_shapes
            return
        arguments, results = executable.shardings
        self._argument_dims = tuple(
            sharding.local_shape(shape, f"argument {i}") if sharding else shape
            for i, (shape, sharding) in enumerate(zip(self._global_shapes, arguments)))
        self.output_dims = [
            sharding.local_shape(tuple(s.shape), f"result {i}") if sharding else
            tuple(int(d) for d in s.shape)
            for i, (s, sharding) in enumerate(zip(specs, results))]
        self.parameter_shardings = [op_sharding(s) for s in arguments]
        # No outputs: XLA reports one sharding, the empty tuple's, and JAX expects that.
        self.output_shardings = [op_sharding(s) for s in results] or [op_sharding(None)]

    def stopped(self, reason: int, message: bytes):
        """The Failure of a run the C execute path started and KilnInvoke stopped early
        (runtime/kiln_invocation.h); called on the thread that ran it."""
        from ..runtime.custom_call import stop_exception
        exc = stop_exception(reason, message.decode(errors="replace"))
        if isinstance(exc, KeyboardInterrupt):
            return Failure(CANCELLED, f"Kiln: {self.name} was interrupted (Ctrl-C)")
        return _failure("execute", exc)

    def serialize(self):
        """This program as signed bytes (kiln/pjrt/serialized.py) for
        PJRT_Executable_Serialize."""
        try:
            from . import serialized
            return serialized.dump(self.executable, {
                "name": self.name, "fingerprint": self.fingerprint, "donated": self.donated,
                "token_outputs": self.token_outputs})
        except Exception as exc:  # reported through PJRT, never lost
            return _failure("serialize", exc)

    def execute(self, per_device):
        counts["python_execute"] += 1
        try:
            arrays = [[_array(view, code, dims) for view, code, dims in arguments]
                      for arguments in per_device]
            results = self._run_devices(arrays) if self._devices > 1 else \
                [self._call(arrays[0])]
            return [[self._result(i, out, args) for i, out in enumerate(outs)]
                    for outs, args in zip(results, arrays)]
        except Exception as exc:  # reported through PJRT, never lost
            return _failure("execute", exc)

    def _run_devices(self, per_device):
        """Every device at once (threads of Kiln's fabric), each on its own arguments."""
        if len(per_device) != self._devices:
            raise KilnError(f"{self.name} runs on {self._devices} devices, got arguments for "
                            f"{len(per_device)}")
        for d, arrays in enumerate(per_device):
            shapes = tuple(a.shape for a in arrays)
            if shapes != self._argument_dims:
                raise KilnError(f"device {d}'s arguments have shapes {list(shapes)}, the "
                                f"program takes {list(self._argument_dims)}",
                                location=self.name)
        executable = self.executable
        outcomes = executable._run_devices(executable._compiled_for(self._global_shapes),
                                           per_device)
        failures = [o for _, checks in outcomes for o in checks if not o.passed]
        if failures:
            raise KilnError(f"{len(failures)} check(s) failed; first: {failures[0]}",
                            location=self.name)
        return [results for results, _ in outcomes]

    def _call(self, arrays):
        if self._plain:
            return self.executable(*arrays)  # the executable's fast call path
        return self.executable.flat(*arrays)

    def _result(self, index: int, out, arguments):
        if index in self.token_outputs:
            return np.empty(0, np.uint8)  # a token holds no data
        out = np.asarray(out)
        if out.dtype != self.output_dtypes[index] or out.shape != self.output_dims[index]:
            raise KilnError(f"result {index} is {out.dtype}{list(out.shape)}, compiled as "
                            f"{self.output_dtypes[index]}{list(self.output_dims[index])}",
                            location=self.name)
        # The buffer will own this memory: it must not be an argument's (freed with it).
        if not out.flags.c_contiguous or _views_any(out, arguments):
            out = np.array(out, order="C", copy=True)
        return out.reshape(-1).view(np.uint8)


def _native_call(executable, name: str):
    """How runtime/pjrt/kiln_pjrt_direct.c runs the program without Python, or None (then
    each execute goes through Program.execute): (entry, (KilnInvoke, KilnStatusCreate,
    KilnStatusMessage, KilnStatusDestroy), [(element type, dims) per argument],
    [(element type, dims) per result buffer], [result buffer of each output]), addresses as
    integers. The C side checks every argument buffer against these before a call and takes
    the Python path for anything else, which explains."""
    import ctypes

    from ..driver import fast_call
    from ..runtime.custom_call import runtime
    compiled = executable._compiled_for(tuple(tuple(s.shape) for s in executable.arg_specs)) \
        if all(s.is_static for s in executable.arg_specs) else None
    plan = compiled and fast_call.native_plan(executable, compiled)
    if not plan:
        return None
    entry, arguments, buffers, sources = plan
    lib = runtime()
    functions = tuple(ctypes.cast(getattr(lib, f), ctypes.c_void_p).value for f in (
        "KilnInvoke", "KilnStatusCreate", "KilnStatusMessage", "KilnStatusDestroy"))

    try:
        arguments, buffers = ([(element_types.code_of(dtype, name), shape)
                               for dtype, shape in specs] for specs in (arguments, buffers))
    except KilnError:  # an element type PJRT has no code for: the Python path explains
        return None
    return entry, functions, arguments, buffers, sources


def _array(view: memoryview, code: int, dims: tuple) -> np.ndarray:
    if code == element_types.TOKEN:
        return np.zeros(0, np.bool_)  # what Kiln's entry takes for a token (lowering/tuples.py)
    return np.frombuffer(view, dtype=np.uint8).view(element_types.dtype_of(code)).reshape(dims)


def _views_any(out: np.ndarray, arguments) -> bool:
    base = out.base
    while base is not None:
        if any(base is a or base is a.base for a in arguments):
            return True
        base = getattr(base, "base", None)
    return False


def compile(code: bytes, format: str, options: bytes, num_devices: int):
    """Compile a program from JAX: `format` "mlir" is a StableHLO module (portable artifact or
    text); `options` a serialized CompileOptionsProto."""
    try:
        if format != "mlir":
            raise KilnError(f"programs in format '{format}' cannot be compiled by Kiln's PJRT "
                            "plugin", hint="JAX sends StableHLO ('mlir')")
        compile_options = parse_compile_options(options, num_devices)
        import kiln
        name, donated, tokens = _read_module(code)
        executable = kiln.compile(code, filename=name)
        digest = hashlib.sha256(code + options).hexdigest()[:32]
        program = Program(executable, name, compile_options, digest, tokens)
        program.donated = donated
        from_cache = set(executable.origins.values()) == {"cache"}
        counts["kiln_cache" if from_cache else "compiled"] += 1
        return program
    except Exception as exc:  # reported through PJRT, never lost
        return _failure("compile", exc)


def deserialize(data: bytes, options: bytes, num_devices: int):
    """The program of a serialized executable (Program.serialize's bytes), checked before any
    of its code is linked; `options`: the framework's compile options for this load (empty:
    one device, the first)."""
    try:
        from . import serialized
        executable, header = serialized.load(data)
        compile_options = parse_compile_options(options, num_devices)
        program = Program(executable, header["name"], compile_options, header["fingerprint"],
                          header.get("token_outputs", ()))
        program.donated = header["donated"]
        counts["deserialized"] += 1
        return program
    except Exception as exc:  # reported through PJRT, never lost
        return _failure("deserialize", exc)


def _read_module(code: bytes) -> tuple[str, list[int], list[int]]:
    """The module's name (JAX names it after the function: jit_f), for messages; the
    parameters JAX donates (tf.aliasing_output / jax.buffer_donor on @main's arguments): the
    plugin marks their buffers deleted after a run, as XLA does, so that JAX sees them
    consumed; Kiln writes results to new memory, so nothing else changes; and @main's results
    of type !stablehlo.token. (A portable artifact encodes attribute names, so they cannot be
    searched for in its bytes: the module is read, a small cost beside compiling it.)"""
    from jax._src.interpreters.mlir import make_ir_context
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo

    with make_ir_context() as ctx:  # every dialect JAX emits (sdy, chlo...) is known there
        if code[:4] == b"ML\xefR":
            module = stablehlo.deserialize_portable_artifact(ctx, code)
        else:
            module = ir.Module.parse(code.decode())
        attributes = module.operation.attributes
        name = ir.StringAttr(attributes["sym_name"]).value if "sym_name" in attributes \
            else "jax-program"
        for op in module.body.operations:
            if op.operation.name == "func.func" and \
                    ir.StringAttr(op.attributes["sym_name"]).value == "main":
                results = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value).results
                tokens = [i for i, t in enumerate(results) if str(t) == "!stablehlo.token"]
                if "arg_attrs" not in op.attributes:
                    return name, [], tokens
                return name, [i for i, attrs in enumerate(op.attributes["arg_attrs"])
                              if "tf.aliasing_output" in ir.DictAttr(attrs)
                              or "jax.buffer_donor" in ir.DictAttr(attrs)], tokens
    return name, [], []
