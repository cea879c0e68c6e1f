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
from ..dialects import kiln as names
from ..errors import CheckFailure, KilnError, api_boundary
from ..frontend.convention import PLAIN, CallingConvention
from ..lowering.ir_util import find_entry
from ..lowering.tuples import flatten_entry_tuples
from ..pipeline import Stage, StageTiming, run_stages
from ..runtime import checks as check_eval
from ..runtime.dtypes import normalize_sub_byte
from ..runtime.memref import TensorSpec
from ..targets.base import Target
from . import avals, calling, plan
from .compiler import Compiled, compile_module, signature, to_bytecode
from .specialize import specialize_to


class Executable:
    def __init__(self, imported: ir.Module, target: Target, entry: str | None, filename: str,
                 compile_now: bool = True, convention: CallingConvention = PLAIN,
                 verify: bool = False):
        self.target = target
        self.verify_calls = verify  # every call is also checked against the reference
        self.filename = filename
        self.convention = convention
        with imported.context:
            flatten_entry_tuples(imported, entry)
        self._imported = to_bytecode(imported)
        self.entry, self.arg_specs, self.result_specs = signature(imported, entry)
        self.result_orders = _result_memory_orders(find_entry(imported, self.entry))
        self._cache: dict[tuple, Compiled] = {}
        self._lock = threading.Lock()
        if compile_now and all(s.is_static for s in self.arg_specs):
            self._compiled_for(tuple(s.shape for s in self.arg_specs))

    # -- introspection -------------------------------------------------------------------------
    @property
    def stages(self) -> list[Stage]:
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
        return ["import"] + [s.name for s in self.stages]

    @property
    def timings(self) -> list[StageTiming]:
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
        if "codegen" not in self.stage_names():
            raise KilnError(f"target '{self.target.name}' has no 'codegen' stage to plan from",
                            hint="stages: " + ", ".join(self.stage_names()))
        given = [s for s in arg_shapes if s is not None]
        shapes = [tuple(s) for s in given] if given and len(given) == len(arg_shapes) else None
        text = self.ir("codegen", arg_shapes=shapes)
        return plan.analyse(text, self.entry, len(self.result_specs))

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
    def has_checks(self) -> bool:
        return any(c.checks for c in self._cache.values())

    # -- calling -------------------------------------------------------------------------------
    @api_boundary
    def __call__(self, *args, **kwargs):
        """Run the program; raises CheckFailure if a `check.*` in it does not hold. Takes and
        returns what the calling convention says: the exported function's pytrees for JAX
        exports, else positional arrays in and a tuple of numpy arrays out."""
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
        results, outcomes = self.run_checks(*arrays)
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
        buffers = [_result_buffer(s, i, self.entry) for i, s in enumerate(compiled.results)]
        compiled.invoke(arrays + buffers)
        for out, spec in zip(buffers, compiled.results):
            normalize_sub_byte(out, spec.element)
        first_use: set[int] = set()
        outputs = []
        for source in compiled.sources:
            outputs.append(buffers[source] if source not in first_use else buffers[source].copy())
            first_use.add(source)
        outcomes = [check_eval.evaluate({**c, "loc": format_location(c["loc"], self.filename)},
                                        [outputs[i] for i in c["results"]]) for c in compiled.checks]
        results = [_in_memory_order(out, order) for out, order in
                   zip(outputs[:compiled.user_results], self.result_orders + [None] * len(outputs))]
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
        with ctx:
            module = ir.Module.parse(self._imported)
        dimension_values: dict[int, int] = {}
        if arg_shapes is not None and not all(s.is_static for s in self.arg_specs):
            types = [s.mlir_type(tuple(shape)) for s, shape in zip(self.arg_specs, arg_shapes)]
            dimension_values = specialize_to(module, self.entry, types, self.filename,
                                             self.convention)
        return module, dimension_values

    def _compiled_for(self, shapes: tuple) -> Compiled:
        with self._lock:
            if shapes not in self._cache:
                self._cache[shapes] = self._compile(shapes)
            return self._cache[shapes]

    def _compile(self, shapes) -> Compiled:
        module, dimension_values = self._module(make_context(), shapes)
        return compile_module(module, self.target, self.entry, self.filename, dimension_values)


def _result_memory_orders(func: ir.Operation) -> list[tuple[int, ...] | None]:
    """Per result, the dimension order (major to minor) its `kiln.layout` (an HLO layout
    the importer recorded, e.g. "{0,1}") asks for, or None for row-major / no layout."""
    if "res_attrs" not in func.attributes:
        return []
    orders = []
    for attrs in ir.ArrayAttr(func.attributes["res_attrs"]):
        entries = {a.name: a.attr for a in ir.DictAttr(attrs)}
        order = None
        if names.LAYOUT in entries:
            text = ir.StringAttr(entries[names.LAYOUT]).value.strip("{}").split(":")[0]
            minor_to_major = [int(x) for x in text.split(",") if x.strip()]
            major_to_minor = tuple(reversed(minor_to_major))
            if sorted(major_to_minor) == list(range(len(major_to_minor))) and \
                    major_to_minor != tuple(range(len(major_to_minor))):
                order = major_to_minor
        orders.append(order)
    return orders


def _in_memory_order(array: np.ndarray, order: tuple[int, ...] | None) -> np.ndarray:
    """The same logical array, its memory laid out major-to-minor in `order` (numpy strides
    express any dimension order; tiling is the importer's business)."""
    if order is None or array.ndim != len(order):
        return array
    physical = np.ascontiguousarray(array.transpose(order))
    return physical.transpose(np.argsort(order))


def _result_buffer(spec: TensorSpec, index: int, entry: str) -> np.ndarray:
    """The caller-owned buffer for one result; one numpy cannot make is a KilnError."""
    try:
        return np.empty(tuple(spec.shape), spec.dtype)
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
