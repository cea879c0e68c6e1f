"""Executable: a compiled program called with numpy arrays.

Static signatures compile once, at `kiln.compile`. Dynamic ones (`tensor<?x3xf32>`) compile
per concrete argument shapes at call time, specialised as the front end's calling convention
says, and are cached per shape. The calling convention also decides how values are passed:
positional arrays in and a tuple out by default, the exported function's pytrees for JAX
exports (`.flat(*arrays)` always takes and returns flat arrays).
"""
from __future__ import annotations

import threading

import numpy as np
from torch_mlir import ir

from ..context import make_context
from ..diagnostics import format_location
from ..errors import CheckFailure, KilnError, api_boundary
from ..frontend.convention import PLAIN, CallingConvention
from ..lowering.ir_util import find_entry
from ..lowering.trust import check_imported
from ..lowering.tuples import flatten_entry_tuples
from ..pipeline import Stage, StageTiming, run_stages
from ..runtime import checks as check_eval
from ..runtime.dtypes import normalize_sub_byte
from ..runtime.memref import TensorSpec
from ..targets.base import Target
from . import avals, calling, fast_call, plan, result_memory
from .layouts import EntryLayouts
from ..dumping import next_module_id
from ..runtime.custom_call import REGISTRY
from . import build
from .compiler import (Compiled, CompileRequest, load_compiled, signature, specialised_module,
                       to_bytecode)


class Executable:
    """A compiled program: call it with numpy arrays (`exe(*arrays)`) and get a tuple of
    arrays back; made by `kiln.compile`, `kiln.jit` or `kiln.load_executable`."""

    def __init__(self, imported: ir.Module, target: Target, entry: str | None, filename: str,
                 compile_now: bool = True, convention: CallingConvention = PLAIN,
                 verify: bool = False, consume: bool = False):
        """`consume`: the caller is done with `imported`, which a first compile in this
        process may then lower in place (no second context, no second parse)."""
        self.target = target
        self.verify_calls = verify  # every call is also checked against the reference
        self.filename = filename
        self.convention = convention
        check_imported(imported, filename)  # the trust boundary, before anything reads it
        with imported.context:
            flatten_entry_tuples(imported, entry)
        self._imported = to_bytecode(imported)
        self.entry, self.arg_specs, self.result_specs = signature(imported, entry)
        self.layouts = EntryLayouts.read(find_entry(imported, self.entry), filename)
        from ..distributed.groups import device_counts
        self._device_counts = device_counts(imported, filename)
        self._cache: dict[tuple, Compiled] = {}
        self._lock = threading.Lock()
        if compile_now and all(s.is_static for s in self.arg_specs):
            shapes = tuple(s.shape for s in self.arg_specs)
            with self._lock:
                self._cache[shapes] = self._compile(shapes, module=imported if consume else None)

    @classmethod
    def load(cls, path, verify: bool = False) -> Executable:
        """The executable saved in a `.kx` file, its code linked in, nothing compiled."""
        from .saved import read
        saved = read(path)
        exe = cls._bare(saved.target, saved.filename, saved.convention, saved.imported,
                        saved.entry, saved.arg_specs, saved.result_specs, saved.layouts, verify)
        exe._cache = {shapes: load_compiled(artifact, exe.target, f"@{exe.entry} of {path}")
                      for shapes, artifact in saved.artifacts.items()}
        return exe

    @classmethod
    def from_parts(cls, target: Target, info, imported: bytes, artifacts: dict,
                   verify: bool = False) -> Executable:
        """The executable a compile worker imported (driver/front.py: `info` says what the
        module holds, `imported` is its bytecode), with `artifacts` per shapes linked in;
        nothing is parsed here."""
        exe = cls._bare(target, info.filename, info.convention, imported, info.entry,
                        info.arg_specs, info.result_specs, info.layouts, verify)
        exe._device_counts = tuple(info.device_counts)
        what = f"@{exe.entry} of {exe.filename}"
        exe._cache = {shapes: load_compiled(artifact, target, what)
                      for shapes, artifact in artifacts.items()}
        return exe

    @classmethod
    def _bare(cls, target, filename, convention, imported, entry, arg_specs, result_specs,
              layouts: dict, verify: bool) -> Executable:
        exe = cls.__new__(cls)
        exe.target, exe.filename, exe.convention = target, filename, convention
        exe.verify_calls = verify
        exe._imported, exe.entry = imported, entry
        exe.arg_specs, exe.result_specs = arg_specs, result_specs
        exe.layouts = EntryLayouts.from_json(layouts)
        exe._lock = threading.Lock()
        exe._cache = {}
        return exe

    # -- introspection -------------------------------------------------------------------------
    @property
    def stages(self) -> list[Stage]:
        """The target's pipeline for this program's entry, passes resolved."""
        return self.target.stages(self.entry)

    @api_boundary
    def ir(self, stage: str = "import", *, arg_shapes: list[tuple[int, ...]] | None = None,
           locations: bool = False) -> str:
        """The module's IR after `stage` ("import", or a name from `stage_names()`), with
        each op's source location when `locations` is set."""
        names = self.stage_names()
        if stage not in names:
            raise KilnError(f"unknown stage '{stage}'", hint="stages: " + ", ".join(names))
        ctx = make_context()
        module, _ = self._module(ctx, arg_shapes)
        if stage != "import":
            run_stages(module, self.stages, self.filename, until=stage)
        return module.operation.get_asm(enable_debug_info=locations)

    def stage_names(self) -> list[str]:
        """The stages `ir()` can show: "import", then the pipeline's stages in order."""
        return ["import"] + [s.name for s in self.stages]

    @property
    def timings(self) -> list[StageTiming]:
        """The compile's time per stage (per pass too when compiled with `timing=True`)."""
        return next(iter(self._cache.values())).timings if self._cache else []

    @api_boundary
    def buffer_assignment(self, *arg_shapes) -> plan.BufferAssignment:
        """Every buffer of the compiled entry function (after `codegen`): size, live range and
        offset, temporaries sharing space by live range. Shapes are needed only when the
        signature is dynamic."""
        return self._plan(arg_shapes)[0]

    @api_boundary
    def thunks(self, *arg_shapes) -> plan.ThunkSequence:
        """The execution plan: the entry function's units of work in program order, each with
        the buffer slices it reads and writes."""
        return self._plan(arg_shapes)[1]

    def _plan(self, arg_shapes):
        if hasattr(self.target, "gpu_plan"):  # GPU targets: the plan their compiled code holds
            shapes = tuple(tuple(s) for s in arg_shapes) if arg_shapes and None not in arg_shapes \
                else tuple(s.shape for s in self.arg_specs)
            code = self._compiled_for(shapes).artifact.code
            return plan.from_gpu(self.target.gpu_plan(code), len(self.result_specs))
        if "codegen" not in self.stage_names():
            raise KilnError(f"target '{self.target.name}' has no 'codegen' stage to plan from",
                            hint="stages: " + ", ".join(self.stage_names()))
        given = [s for s in arg_shapes if s is not None]
        shapes = [tuple(s) for s in given] if given and len(given) == len(arg_shapes) else None
        key = tuple(shapes) if shapes else tuple(s.shape for s in self.arg_specs)
        compiled = self._cache.get(key)
        if compiled is not None and compiled.artifact.plan is not None:
            return plan.from_json(compiled.artifact.plan)  # recorded when it was compiled
        text = self.ir("codegen", arg_shapes=shapes)
        return plan.analyse(text, self.entry, len(self.result_specs))

    @api_boundary
    def save(self, path) -> None:
        """Write this executable, with every specialisation compiled so far, to a `.kx` file
        that `kiln.load_executable` loads without compiling (driver/saved.py)."""
        from .saved import save
        save(self, path)

    @property
    def in_avals(self) -> tuple[avals.ShapedArray, ...]:
        """Shape and dtype of each flat argument (for JAX exports, the exported function's
        flattened arguments, with their symbolic dimensions)."""
        if self.convention.in_avals is not None:
            return tuple(avals.from_symbolic(a) for a in self.convention.in_avals)
        return tuple(avals.from_spec(s) for s in self.arg_specs)

    @property
    def out_avals(self) -> tuple[avals.ShapedArray, ...]:
        """Shape and dtype of each flat result."""
        if self.convention.out_avals is not None:
            return tuple(avals.from_symbolic(a) for a in self.convention.out_avals)
        return tuple(avals.from_spec(s) for s in self.result_specs)

    @property
    def origins(self) -> dict[tuple, str]:
        """Per compiled argument shapes, where its code came from: "compiled" (this process
        compiled it), "cache" (the persistent compile cache) or "file" (a `.kx` executable)."""
        return {shapes: c.artifact.origin for shapes, c in self._cache.items()}

    @property
    def has_checks(self) -> bool:
        """Whether the program holds checks (`check.*` ops, check custom calls) that a call
        evaluates, raising `CheckFailure` when one fails."""
        return any(c.checks for c in self._cache.values())

    # -- calling -------------------------------------------------------------------------------
    # The common case's call, once a call has shown it applies (driver/fast_call.py).
    _fast = None

    @api_boundary
    def __call__(self, *args, **kwargs):
        """Run the program; raises CheckFailure if a `check.*` in it does not hold. Takes and
        returns what the calling convention says: the exported function's pytrees for JAX
        exports, else positional arrays in and a tuple of numpy arrays out."""
        fast = self._fast
        if fast is not None and not kwargs:
            results = fast(args)
            if results is not None:
                return results
        tree = self.convention.in_tree
        if tree is None:
            if kwargs:
                raise KilnError(f"@{self.entry} takes positional arguments only, got "
                                + ", ".join(map(repr, kwargs)), hint="pass the arrays in order")
            return self.flat(*args)
        outputs = self.flat(*calling.flatten(tree, (args, kwargs), "the arguments"))
        out_tree = self.convention.out_tree
        return calling.unflatten(out_tree, iter(outputs)) if out_tree else outputs

    def flat(self, *arrays) -> tuple[np.ndarray, ...]:
        """Call with the flat arrays, get the flat results; raises CheckFailure (and, compiled
        with verify=True, KilnError where Kiln and the reference interpreter disagree)."""
        results, outcomes = self._run_checks(arrays)
        if outcomes:
            failures = [o for o in outcomes if not o.passed]
            if failures:
                raise CheckFailure(f"{len(failures)} check(s) failed; first: {failures[0]}",
                                   location=self.filename)
        if self.verify_calls:
            report = self.verify(*arrays)
            if not report.ok:
                raise KilnError(str(report), hint="a Kiln miscompilation: please report it "
                                                  "with the program and these inputs")
        return results

    @api_boundary
    def verify(self, *arrays):
        """Run the flat `arrays` through Kiln and through the StableHLO reference interpreter;
        the report names the first operation whose value differs (driver/verify.py)."""
        from .verify import verify_executable
        return verify_executable(self, self._coerce(arrays))

    @api_boundary
    def run_checks(self, *args) -> tuple[tuple[np.ndarray, ...], list[check_eval.CheckOutcome]]:
        """Like `flat`, but returns every check's outcome instead of raising on failure."""
        return self._run_checks(args)

    def _run_checks(self, args):
        arrays = self._coerce(args)
        if self.convention.in_avals is not None:
            calling.check_shapes(list(self.convention.in_avals), [a.shape for a in arrays],
                                 self.entry)
        compiled = self._compiled_for(tuple(a.shape for a in arrays))
        for index, value in compiled.dimension_values.items():
            if int(arrays[index]) != value:
                raise KilnError(
                    f"argument {index} of @{self.entry} is {int(arrays[index])}, but as a dimension "
                    f"argument (JAX shape polymorphism) it must be {value}, the size the other "
                    f"arguments' shapes give", hint="pass the matching size")
        if self._fast is None and len(self._cache) == 1:
            self._fast = fast_call.caller(self, compiled) or _general_only
        if self.num_devices > 1:
            return self._run_global(compiled, arrays)
        if compiled.uses_devices:  # infeed/outfeed, probes, or collectives among one device
            from ..distributed.collectives import on_device
            self.fabric.probes.clear()
            with on_device(self.fabric, 0):
                return self._run_one(compiled, arrays)
        return self._run_one(compiled, arrays)

    def _run_global(self, compiled, arrays):
        """Global arrays in and out, as jax's Exported.call: each device gets its shard of
        every sharded argument (the whole of the others), and each sharded result is put
        together from the devices' shards; an unsharded result is device 0's."""
        n = self.num_devices
        arg_shardings, result_shardings = self.shardings
        per_device = [list(arrays) for _ in range(n)]
        for i, (array, sharding) in enumerate(zip(arrays, arg_shardings)):
            if sharding is not None and not sharding.is_replicated:
                for d, shard in enumerate(sharding.split(array, n)):
                    per_device[d][i] = shard
        outputs = self._run_devices(compiled, per_device)
        results = []
        for j, first in enumerate(outputs[0][0]):
            sharding = result_shardings[j] if j < len(result_shardings) else None
            if sharding is None or sharding.is_replicated:
                results.append(first)
            else:
                shape = tuple(t * s for t, s in zip(sharding.tiles, first.shape))
                results.append(sharding.assemble([out[0][j] for out in outputs], shape, first.dtype))
        return tuple(results), outputs[0][1]

    @property
    def shardings(self):
        """(argument shardings, result shardings) of a partitioned program (None: whole on
        every device); distributed/sharding.py says what one is."""
        found = getattr(self, "_shardings", None)
        if found is None:
            from ..lowering.spmd import entry_shardings, is_partitioned
            module = ir.Module.parse(self._imported, context=make_context())
            with module.context:
                found = entry_shardings(module, self.entry) if is_partitioned(module) else \
                    ([None] * len(self.arg_specs), [None] * len(self.result_specs))
            self._shardings = found
        return found

    # -- several devices -------------------------------------------------------------------------
    @property
    def device_counts(self) -> tuple[int, int]:
        """(num_replicas, num_partitions) the program declares (mhlo.num_replicas /
        mhlo.num_partitions), or that `kiln.compile(num_replicas=, num_partitions=)` set."""
        counts = getattr(self, "_device_counts", None)
        if counts is None:
            from ..distributed.groups import device_counts
            counts = device_counts(ir.Module.parse(self._imported, context=make_context()))
            self._device_counts = counts
        return counts

    @property
    def num_devices(self) -> int:
        """How many devices a call runs on: replicas x partitions (`device_counts`)."""
        count = getattr(self, "_num_devices", None)
        if count is None:
            r, p = self.device_counts
            count = self._num_devices = r * p
        return count

    @property
    def fabric(self):
        """The devices' meeting place: collectives, channels, and the host queues behind
        `infeed` / `outfeed`. One per executable, kept across calls."""
        with self._lock:
            if getattr(self, "_fabric", None) is None:
                from ..distributed import mpi
                from ..distributed.fabric import LocalFabric
                under_mpi = mpi.launched_size() > 1
                self._fabric = (mpi.MpiFabric if under_mpi else LocalFabric)(*self.device_counts)
            return self._fabric

    @api_boundary
    def run_devices(self, per_device_args) -> list[tuple[np.ndarray, ...]]:
        """Run every device at once, device d on the flat arrays `per_device_args[d]`
        (device d = replica * num_partitions + partition); returns each device's results."""
        per_device_args = list(per_device_args)
        if len(per_device_args) != self.num_devices:
            raise KilnError(f"@{self.entry} runs on {self.num_devices} device(s), got arguments "
                            f"for {len(per_device_args)}", hint="one argument list per device")
        coerced = [self._coerce(a) for a in per_device_args]
        shapes = {tuple(a.shape for a in arrays) for arrays in coerced}
        if len(shapes) != 1:
            raise KilnError("every device must get arguments of the same shapes, got "
                            + "; ".join(map(str, shapes)))
        compiled = self._compiled_for(shapes.pop())
        outcomes = self._run_devices(compiled, coerced)
        failures = [o for _, checks in outcomes for o in checks if not o.passed]
        if failures:
            raise CheckFailure(f"{len(failures)} check(s) failed; first: {failures[0]}",
                               location=self.filename)
        return [results for results, _ in outcomes]

    def _run_devices(self, compiled, per_device_arrays):
        from ..distributed.run import run_devices
        n = self.num_devices
        return run_devices(self.fabric, [lambda a: self._run_one(compiled, a)] * n,
                           [[arrays] for arrays in per_device_arrays])

    def device_call(self, arrays) -> tuple[np.ndarray, ...]:
        """Run as the device this thread is (distributed/run.py set it): one device's share
        of a run whose devices may run different programs (interpreter.run_parallel)."""
        arrays = self._coerce(list(arrays))
        results, outcomes = self._run_one(self._compiled_for(tuple(a.shape for a in arrays)), arrays)
        failures = [o for o in outcomes if not o.passed]
        if failures:
            raise CheckFailure(f"{len(failures)} check(s) failed; first: {failures[0]}",
                               location=self.filename)
        return results

    def infeed(self, *arrays, device: int = 0) -> None:
        """Queue `arrays` for the next `infeed` that device `device` runs."""
        self.fabric.infeed[device].put([np.asarray(a) for a in arrays])

    def outfeed(self, device: int = 0, timeout: float | None = 0) -> list[np.ndarray]:
        """The arrays of the oldest `outfeed` device `device` ran (KilnError if none)."""
        import queue
        try:
            return self.fabric.outfeed[device].get(timeout=timeout) if timeout else \
                self.fabric.outfeed[device].get_nowait()
        except queue.Empty:
            raise KilnError(f"no outfeed from device {device}",
                            hint="the program has not run an outfeed (yet)") from None

    def _run_one(self, compiled, arrays):
        buffers = [_result_buffer(s, i, self.entry) for i, s in enumerate(compiled.results)]
        compiled.invoke(self.layouts.physical_arguments(arrays) + buffers)
        if compiled.sub_byte_results:
            for out, spec in zip(buffers, compiled.results):
                normalize_sub_byte(out, spec.element)
        if compiled.distinct_sources:
            outputs = [buffers[source] for source in compiled.sources]
        else:
            first_use: set[int] = set()
            outputs = []
            for source in compiled.sources:
                outputs.append(buffers[source] if source not in first_use else buffers[source].copy())
                first_use.add(source)
        outcomes = [check_eval.evaluate({**c, "loc": format_location(c["loc"], self.filename)},
                                        [outputs[i] for i in c["results"]] + _probed(c))
                    for c in compiled.checks]
        results = self.layouts.logical_results(outputs[:compiled.user_results])
        return tuple(results), outcomes

    def _coerce(self, args) -> list[np.ndarray]:
        if len(args) != len(self.arg_specs):
            raise KilnError(f"@{self.entry} takes {len(self.arg_specs)} argument(s), got {len(args)}",
                            hint="signature: (" + ", ".join(map(str, self.arg_specs)) + ")")
        arrays = []
        for i, (arg, spec) in enumerate(zip(args, self.arg_specs)):
            arrays.append(_coerce_one(arg, spec, f"argument {i} of @{self.entry}"))
        return arrays

    # -- compiling -----------------------------------------------------------------------------
    def _module(self, ctx: ir.Context, arg_shapes) -> tuple[ir.Module, dict[int, int]]:
        """The imported module, specialised to `arg_shapes` when the signature is dynamic;
        with the values that implies for JAX's dimension arguments."""
        return specialised_module(self._request(arg_shapes), ctx)

    def _request(self, shapes, want_plan: bool = False) -> CompileRequest:
        dynamic = not all(s.is_static for s in self.arg_specs)
        return CompileRequest(
            self._imported, self.entry, self.filename, self.target.name,
            dict(self.target.options), list(self.arg_specs),
            tuple(tuple(s) for s in shapes) if dynamic and shapes is not None else None,
            self.convention, next_module_id(), REGISTRY.describe(), want_plan)

    def _compiled_for(self, shapes: tuple) -> Compiled:
        compiled = self._cache.get(shapes)  # compiled already: no lock needed to read
        if compiled is not None:
            return compiled
        with self._lock:
            if shapes not in self._cache:
                self._cache[shapes] = self._compile(shapes)
            return self._cache[shapes]

    def _compile(self, shapes, want_plan: bool = False, module: ir.Module | None = None) -> Compiled:
        artifact = build.obtain(self._request(shapes, want_plan), module)
        return load_compiled(artifact, self.target, f"@{self.entry} of {self.filename}")


def _general_only(args):
    """The fast path of a program that always takes the general one."""
    return None


def _probed(check: dict) -> list:
    """What `interpreter.probe` recorded for a check.expect_serialized_eq (else nothing)."""
    if check["kind"] != "expect_serialized_eq":
        return []
    from ..distributed.collectives import current
    values = current().fabric.probes.get(check["probe_id"], [])
    return [values[check["iter"]] if check["iter"] < len(values) else None]


def _result_buffer(spec: TensorSpec, index: int, entry: str) -> np.ndarray:
    """The caller-owned buffer for one result; one numpy cannot make is a KilnError."""
    try:
        return result_memory.empty(tuple(spec.shape), spec.dtype)
    except (MemoryError, ValueError) as exc:
        size = int(np.prod(spec.shape, dtype=np.float64)) * spec.dtype.itemsize
        raise KilnError(f"result {index} of @{entry} ({spec}, {size:,} bytes) cannot be "
                        f"allocated: {exc}", hint="numpy arrays hold at most 64 dimensions and "
                        "must fit in memory") from None


# Python values may fill a parameter of these numpy kinds: bool, integers, floats, complex.
_WIDENS_TO = {"b": "b", "i": "biu", "u": "biu", "f": "biuf", "c": "biufc"}


def _from_python(arg, spec: TensorSpec, what: str) -> np.ndarray:
    """A Python number (or nested list of numbers) as the parameter's dtype, refusing what
    would silently change meaning: None (NaN), strings ("1.5"), floats into integers."""
    raw = np.asarray(arg) if not isinstance(arg, (str, bytes)) else np.asarray(arg, dtype=object)
    allowed = _WIDENS_TO.get(spec.dtype.kind, "biuf")
    if raw.dtype.kind not in allowed:
        got = type(arg).__name__ if raw.dtype.kind in "OUS" else f"{raw.dtype} values"
        raise KilnError(f"{what} must be {spec}, got {got}",
                        hint="pass a numpy array (or a Python number) of that type")
    return raw.astype(spec.dtype)


def _coerce_one(arg, spec: TensorSpec, what: str) -> np.ndarray:
    # The common case first, cheaply: a contiguous numpy array of the right dtype and shape.
    if type(arg) is np.ndarray and arg.dtype == spec.dtype and arg.shape == spec.shape and \
            arg.flags.c_contiguous:
        return arg
    if hasattr(arg, "__dlpack__") and not isinstance(arg, np.ndarray):
        try:
            arg = np.from_dlpack(arg)
        except (TypeError, BufferError, RuntimeError):
            arg = np.asarray(arg)
    is_array = isinstance(arg, np.ndarray) or hasattr(arg, "__array__")
    array = np.asarray(arg) if is_array else _from_python(arg, spec, what)
    if array.dtype != spec.dtype:
        raise KilnError(f"{what} must be {spec}, got {array.dtype}{list(array.shape)}",
                        hint=f"convert it with .astype({spec.dtype.name!r})")
    if array.ndim != len(spec.shape) or any(d is not None and d != n for d, n in zip(spec.shape, array.shape)):
        raise KilnError(f"{what} must be {spec}, got shape {list(array.shape)}")
    # Not np.ascontiguousarray: it turns rank-0 arrays into rank 1.
    return array if array.flags.c_contiguous else array.copy(order="C")
