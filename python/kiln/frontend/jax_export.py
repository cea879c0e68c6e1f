"""JAX exports: a serialized `jax.export.Exported` (`exp.serialize()`, a flatbuffer).

The flatbuffer is read here directly (no jax, no flatbuffers package needed): it carries the
StableHLO portable artifact (`mlir_module_serialized`) plus the calling convention that the
artifact's `@main` follows (https://docs.jax.dev/en/latest/export/export.html):

    @main(platform_index?, token * n_ordered_effects, kept array args...)
        -> (token * n_ordered_effects, array results...)

Kiln turns that into a plain entry function over *all* of the caller's flattened arguments:
the original `@main` becomes `@kiln_jax_main`, and a new `@main` passes it the index of "cpu"
among the export's platforms, fresh tokens, and only the arguments in `module_kept_var_idx`;
token results are dropped. Dimension variables of shape-polymorphic exports are computed
inside the artifact from the argument shapes (JAX wraps them), so a dynamic `@main` compiles
per concrete shape through the Executable's shape refinement; a `@main` that still takes a
dimension argument (`jax.global_constant = "b"`) gets it from `get_dimension_size` of the
argument whose symbolic shape names it. `shape_assertion` custom calls stay (the pipeline
raises their messages), and the Python side checks shapes against the symbolic ones first.

The loaders return the module with its calling convention (convention.py: the pytrees, the
symbolic shapes, how to specialise), which the driver applies; it also travels with the module
as a JSON attribute (`kiln.jax.info`), so a module from `kiln.load` compiles to the same.
"""
from __future__ import annotations

import base64
import json
import re
import struct
from dataclasses import dataclass, field

from torch_mlir import ir
from torch_mlir.dialects import func

from ..errors import KilnError
from ..dialects import kiln as names
from . import mlir as mlir_frontend
from .convention import PLAIN, Aval, CallingConvention

MLIR_BYTECODE_MAGIC = b"ML\xefR"
_PRODUCER = re.compile(rb"StableHLO_v\d+\.\d+\.\d+")  # a portable artifact's producer string
MAIN = "kiln_jax_main"
ATTR = names.JAX_INFO
# Calling conventions whose @main layout this loader implements (JAX 0.4.31+ export 9..10).
MIN_CALLING_CONVENTION, MAX_CALLING_CONVENTION = 9, 10

# Field indices of the `Exported` table in jax/_src/export/serialization.fbs.
_F_SER_VERSION, _F_FUN_NAME, _F_IN_TREE, _F_IN_AVALS, _F_OUT_TREE, _F_OUT_AVALS = 0, 1, 2, 3, 4, 5
_F_PLATFORMS, _F_ORDERED, _F_UNORDERED, _F_MLIR, _F_CC_VERSION, _F_KEPT = 9, 10, 11, 13, 14, 15
_F_UNIQUE_AVALS, _F_IN_AVAL_IDXS, _F_OUT_AVAL_IDXS = 19, 22, 23

# serialization.fbs `DType` enum -> MLIR element type.
_DTYPES = ["i1", "i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64", "f16", "f32", "f64",
           "complex<f32>", "complex<f64>", "bf16", "i4", "ui4", "f8E4M3B11FNUZ", "f8E4M3FN",
           "f8E4M3FNUZ", "f8E5M2", "f8E5M2FNUZ", "f0", "f8E4M3", "f8E3M4", "f8E8M0FNU",
           "f4E2M1FN", "key<fry>", "key<rbg>", "key<unsafe_rbg>"]
_TREE_KINDS = ["leaf", "none", "tuple", "list", "dict", "custom"]


# -- a minimal flatbuffer reader ---------------------------------------------------------------
class _Table:
    """One flatbuffer table: fields are read lazily by index, bounds-checked."""

    def __init__(self, buf: bytes, pos: int):
        self.buf, self.pos = buf, pos
        vtable = pos - _i32(buf, pos)
        self.vt_size = _u16(buf, vtable)
        self.vtable = vtable
        if self.vt_size < 4 or vtable + self.vt_size > len(buf):
            raise ValueError("bad vtable")

    def _field(self, i: int) -> int:
        at = 4 + 2 * i
        if at + 2 > self.vt_size:
            return 0
        off = _u16(self.buf, self.vtable + at)
        return self.pos + off if off else 0

    def scalar(self, i: int, fmt: str, default=0):
        p = self._field(i)
        return struct.unpack_from("<" + fmt, self.buf, p)[0] if p else default

    def _target(self, i: int) -> int:
        p = self._field(i)
        return p + _u32(self.buf, p) if p else 0

    def table(self, i: int) -> "_Table | None":
        p = self._target(i)
        return _Table(self.buf, p) if p else None

    def bytes_(self, i: int) -> bytes | None:
        p = self._target(i)
        if not p:
            return None
        n = _u32(self.buf, p)
        if p + 4 + n > len(self.buf):
            raise ValueError("vector out of bounds")
        return self.buf[p + 4:p + 4 + n]

    def string(self, i: int) -> str | None:
        b = self.bytes_(i)
        return None if b is None else b.decode("utf-8")

    def scalars(self, i: int, fmt: str) -> list:
        p = self._target(i)
        if not p:
            return []
        n = _u32(self.buf, p)
        return list(struct.unpack_from(f"<{n}{fmt}", self.buf, p + 4))

    def _offsets(self, i: int) -> list[int]:
        p = self._target(i)
        if not p:
            return []
        n = _u32(self.buf, p)
        return [p + 4 + 4 * k + _u32(self.buf, p + 4 + 4 * k) for k in range(n)]

    def tables(self, i: int) -> list["_Table"]:
        return [_Table(self.buf, q) for q in self._offsets(i)]

    def strings(self, i: int) -> list[str]:
        return [self.buf[q + 4:q + 4 + _u32(self.buf, q)].decode("utf-8") for q in self._offsets(i)]


def _u16(b, p): return struct.unpack_from("<H", b, p)[0]
def _u32(b, p): return struct.unpack_from("<I", b, p)[0]
def _i32(b, p): return struct.unpack_from("<i", b, p)[0]


def _root(data: bytes) -> _Table:
    return _Table(data, _u32(data, 0))


def looks_like_exported(data: bytes) -> bool:
    """True for a serialized Exported: a flatbuffer whose field 13 is MLIR bytecode."""
    if len(data) < 16 or data.startswith(MLIR_BYTECODE_MAGIC) or _u32(data, 0) >= len(data):
        return False
    try:
        mlir = _root(data).bytes_(_F_MLIR)
    except (ValueError, struct.error, IndexError):
        return False
    return bool(mlir) and mlir.startswith(MLIR_BYTECODE_MAGIC)


# -- the Exported's metadata -------------------------------------------------------------------
@dataclass
class ExportedInfo:
    function_name: str
    platforms: list[str]
    calling_convention_version: int
    kept_var_idx: list[int]
    in_avals: list[Aval]
    out_avals: list[Aval]
    in_tree: list | None
    out_tree: list | None
    ordered_effects: list[str]
    unordered_effects: list[str]
    mlir_module: bytes = field(repr=False, default=b"")

    def to_json(self) -> str:
        d = {k: v for k, v in self.__dict__.items() if k != "mlir_module"}
        d["in_avals"] = [a.__dict__ for a in self.in_avals]
        d["out_avals"] = [a.__dict__ for a in self.out_avals]
        return json.dumps(d)

    @staticmethod
    def from_json(text: str) -> "ExportedInfo":
        d = json.loads(text)
        d["in_avals"] = [Aval(**a) for a in d["in_avals"]]
        d["out_avals"] = [Aval(**a) for a in d["out_avals"]]
        return ExportedInfo(**d)


def _aval(t: _Table, filename: str) -> Aval:
    if t.scalar(0, "b") != 0:
        raise KilnError("the export passes an abstract token as an argument or result",
                        location=filename, hint="Kiln runs exports whose inputs are arrays")
    code = t.scalar(2, "b")
    element = _DTYPES[code] if 0 <= code < len(_DTYPES) else f"dtype#{code}"
    if element.startswith(("key<", "f0", "dtype#")):
        raise KilnError(f"the export has an argument or result of JAX type {element}",
                        location=filename, hint="export with jax.random.key_data(...) arrays instead "
                                                "of typed PRNG keys")
    return Aval([s.replace(" ", "") for s in t.strings(1)], element)


def _tree(t: _Table | None) -> list | None:
    """PyTreeDef as JSON-able nested lists: [kind, children, names?, custom-name?, aux?]."""
    if t is None:
        return None
    kind = t.scalar(0, "b")
    node: list = [_TREE_KINDS[kind] if 0 <= kind < len(_TREE_KINDS) else f"kind#{kind}",
                  [_tree(c) for c in t.tables(1)]]
    if node[0] == "dict":
        node.append(t.strings(2))
    elif node[0] == "custom":
        node += [t.string(3), base64.b64encode(t.bytes_(4) or b"").decode("ascii")]
    return node


def read_exported(data: bytes, filename: str) -> ExportedInfo:
    try:
        root = _root(data)
        mlir = root.bytes_(_F_MLIR)
        unique = root.tables(_F_UNIQUE_AVALS)
        in_idx, out_idx = root.scalars(_F_IN_AVAL_IDXS, "I"), root.scalars(_F_OUT_AVAL_IDXS, "I")
        # Since serialization version 10 avals are stored once and referenced by index.
        in_avals = [unique[i] for i in in_idx] if in_idx else root.tables(_F_IN_AVALS)
        out_avals = [unique[i] for i in out_idx] if out_idx else root.tables(_F_OUT_AVALS)
        info = ExportedInfo(
            function_name=root.string(_F_FUN_NAME) or "main",
            platforms=root.strings(_F_PLATFORMS),
            calling_convention_version=root.scalar(_F_CC_VERSION, "H"),
            kept_var_idx=root.scalars(_F_KEPT, "H"),
            in_avals=[_aval(a, filename) for a in in_avals],
            out_avals=[_aval(a, filename) for a in out_avals],
            in_tree=_tree(root.table(_F_IN_TREE)),
            out_tree=_tree(root.table(_F_OUT_TREE)),
            ordered_effects=[e.string(0) or "" for e in root.tables(_F_ORDERED)],
            unordered_effects=[e.string(0) or "" for e in root.tables(_F_UNORDERED)],
            mlir_module=bytes(mlir or b""),
        )
    except (ValueError, struct.error, IndexError, UnicodeDecodeError) as exc:
        raise KilnError(f"cannot read the serialized jax.export.Exported: {exc}", location=filename,
                        hint="pass the bytes of exp.serialize() unchanged") from None
    cc = info.calling_convention_version
    if not MIN_CALLING_CONVENTION <= cc <= MAX_CALLING_CONVENTION:
        raise KilnError(f"the export uses JAX calling convention version {cc}; Kiln reads versions "
                        f"{MIN_CALLING_CONVENTION} to {MAX_CALLING_CONVENTION}", location=filename,
                        hint="re-export with a JAX whose jax.export.maximum_supported_calling_"
                             f"convention_version is at most {MAX_CALLING_CONVENTION}, or set "
                             "jax_export_calling_convention_version")
    if info.platforms and "cpu" not in info.platforms:
        raise KilnError(f"the export was lowered for {', '.join(info.platforms)} only; Kiln runs "
                        "CPU code", location=filename,
                        hint="export with jax.export.export(f, platforms=('cpu', ...))")
    return info


def info_from_exported(exp) -> ExportedInfo:
    """ExportedInfo from a live `jax.export.Exported` (kiln.jit's path: no flatbuffer needed).
    Pytrees stay with the caller, who has jax's own."""
    from ..runtime.dtypes import mlir_element

    def aval(a):
        return Aval([str(d).replace(" ", "") for d in a.shape], mlir_element(a.dtype))
    return ExportedInfo(function_name=exp.fun_name, platforms=list(exp.platforms),
                        calling_convention_version=exp.calling_convention_version,
                        kept_var_idx=sorted(exp.module_kept_var_idx),
                        in_avals=[aval(a) for a in exp.in_avals],
                        out_avals=[aval(a) for a in exp.out_avals], in_tree=None, out_tree=None,
                        ordered_effects=[type(e).__name__ for e in exp.ordered_effects],
                        unordered_effects=[type(e).__name__ for e in exp.unordered_effects],
                        mlir_module=bytes(exp.mlir_module_serialized))


# -- the module ------------------------------------------------------------------------------
def load_exported(data: bytes, ctx: ir.Context, filename: str) -> tuple[ir.Module, CallingConvention]:
    return load_info(read_exported(data, filename), ctx, filename)


def load_info(info: ExportedInfo, ctx: ir.Context, filename: str) -> tuple[ir.Module, CallingConvention]:
    try:
        module = parse_artifact(info.mlir_module, ctx, filename)
    except KilnError as exc:
        # Version skew surfaces here: say it is the Exported's embedded artifact.
        raise KilnError(f"in the serialized jax.export.Exported's module: {exc.message}",
                        location=exc.location, hint=exc.hint) from None
    with ctx:
        adapt_calling_convention(module, info, filename)
        module.operation.attributes[ATTR] = ir.StringAttr.get(info.to_json())
    return module, convention_of(info)


def convention_of(info: ExportedInfo) -> CallingConvention:
    """The calling convention of an export's module after adapt_calling_convention: the
    wrapping @main computes JAX's dimension variables itself."""
    return CallingConvention(
        in_tree=info.in_tree, out_tree=info.out_tree, in_avals=tuple(info.in_avals),
        out_avals=tuple(info.out_avals), infer_dimension_arguments=False,
        kept_arguments=tuple(info.kept_var_idx), ordered_effects=tuple(info.ordered_effects),
        platform_index=info.platforms.index("cpu") if "cpu" in info.platforms else None)


def recorded_convention(module: ir.Module) -> CallingConvention:
    """The convention a JAX loader recorded on `module` (a module from `kiln.load`, or its
    text), else Kiln's plain one."""
    attrs = module.operation.attributes
    if ATTR not in attrs:
        return PLAIN
    # A program's text may carry the attribute too: read it only if it is a string (the
    # bindings abort on some values: lowering/attribute_reader.py), and refuse what the
    # reader did not write.
    from ..lowering import attribute_reader
    value = attribute_reader.Attributes(module.operation).value(ATTR)
    try:
        if not attribute_reader.is_kind(value, "String"):
            raise TypeError(ATTR)
        return convention_of(ExportedInfo.from_json(ir.StringAttr(attrs[ATTR]).value))
    except (ValueError, KeyError, TypeError, AttributeError, IndexError, RuntimeError):
        raise KilnError(f"the module's {ATTR} attribute is not a calling convention Kiln's JAX "
                        f"export reader wrote",
                        hint="Kiln writes it when it reads a JAX export; remove it") from None


def parse_artifact(data: bytes, ctx: ir.Context, filename: str) -> ir.Module:
    """The portable artifact JAX embeds. JAX annotates custom calls with Shardy attributes
    (`sdy.sharding_rule`) whose bytecode only a context with the sdy dialect can read, which
    Kiln's StableHLO lacks; such artifacts go through jaxlib's deserializer to text (sdy
    attributes then parse as opaque attributes) and the sharding annotations are dropped:
    Kiln runs one device."""
    mlir_frontend.check_artifact_version(data, filename)
    if b"sdy" not in data:
        return mlir_frontend.parse_bytecode(data, ctx, filename)
    text = _artifact_text_via_jax(data, filename)
    module = mlir_frontend.parse_text(text, ctx, filename)
    _drop_sharding_annotations(module)
    return module


def parse_raw_artifact(data: bytes, ctx: ir.Context, filename: str) -> tuple[ir.Module, CallingConvention]:
    """MLIR bytecode, and JAX's raw `exp.mlir_module_serialized` among it: Shardy attributes
    and JAX's calling-convention details are handled as far as the module alone allows."""
    if not _PRODUCER.search(data[:64]) or b"sdy" not in data:
        module = mlir_frontend.parse_bytecode(data, ctx, filename)
    else:
        module = parse_artifact(data, ctx, filename)
    with ctx:
        adapt_raw_jax_module(module, filename)
    return module, recorded_convention(module)


def adapt_raw_jax_module(module: ir.Module, filename: str) -> None:
    """A JAX module without its Exported: shape assertions become checks, effect tokens are
    made and dropped; a platform-index argument cannot be resolved without the platform list."""
    from ..lowering.ir_util import find_entry, function_type, functions, symbol_name
    # JAX marks its modules (`jax.uses_shape_polymorphism`); leave every other module alone.
    if not any(a.startswith("jax.") for a in module.operation.attributes) or \
            "main" not in [symbol_name(f) for f in functions(module)]:
        return
    main = find_entry(module, "main")
    ftype = function_type(main)
    attrs = _arg_attrs(main, "arg_attrs") or [None] * len(ftype.inputs)
    constants = [_attr_str(a, "jax.global_constant") for a in attrs]
    if "_platform_index" in constants:
        raise KilnError("this JAX module was exported for several platforms and takes the "
                        "platform's index first; which index is 'cpu' is recorded only in the "
                        "serialized Exported", location=filename,
                        hint="load exp.serialize() instead of exp.mlir_module_serialized, or "
                             "export with platforms=('cpu',)")
    _rewrite_shape_assertions(module)
    if any(constants):
        return  # dimension arguments of an old calling convention: passes/shapes.py infers them
    arrays = [t for t in ftype.inputs if not _is_token(t)]
    outs = [t for t in ftype.results if not _is_token(t)]
    info = ExportedInfo(function_name="main", platforms=["cpu"],
                        calling_convention_version=MAX_CALLING_CONVENTION,
                        kept_var_idx=list(range(len(arrays))),
                        in_avals=[_aval_of_type(t) for t in arrays],
                        out_avals=[_aval_of_type(t) for t in outs], in_tree=None, out_tree=None,
                        ordered_effects=[], unordered_effects=[])
    if len(arrays) != len(ftype.inputs) or len(outs) != len(ftype.results):
        adapt_calling_convention(module, info, filename)
    # The driver then specialises dynamic shapes without taking leading scalar integer
    # arguments for dimension variables: JAX computes those inside its own @main.
    module.operation.attributes[ATTR] = ir.StringAttr.get(info.to_json())


def _aval_of_type(t: ir.Type) -> Aval:
    ranked = ir.RankedTensorType(t)
    return Aval(["?" if ir.ShapedType.is_dynamic_size(d) else str(d) for d in ranked.shape],
                str(ranked.element_type))


def _artifact_text_via_jax(data: bytes, filename: str) -> str:
    from ..dialects.sdy import lower_shardy, strip_shardy
    try:
        from jax._src.interpreters import mlir as jax_mlir
        from jax._src.lib import _jax
    except ImportError:
        raise KilnError("this JAX artifact carries Shardy ('sdy') sharding attributes, which only "
                        "jaxlib can deserialize, and jax is not installed", location=filename,
                        hint="install jax, or export with jax.config.update("
                             "'jax_use_shardy_partitioner', False)") from None
    try:
        with jax_mlir.make_ir_context():
            module = _jax.mlir.deserialize_portable_artifact(data)
            lower_shardy(module, jax_mlir.ir)  # shardings and shard_map bodies, Kiln's way
            strip_shardy(module, jax_mlir.ir)  # Kiln's contexts lack Shardy (dialects/sdy.py)
            return jax_mlir.module_to_string(module)
    except Exception as exc:  # jaxlib raises plain ValueError/RuntimeError here
        raise KilnError(f"jaxlib cannot deserialize the artifact: {exc}", location=filename,
                        hint="pass the bytes of exp.serialize() or exp.mlir_module_serialized "
                             "unchanged") from None


def _drop_sharding_annotations(module: ir.Module) -> None:
    from ..lowering.ir_util import walk
    ops = [module.operation, *walk(module.operation)]
    for op in ops:
        for name in [n for n in op.attributes if n.startswith("sdy.")]:
            del op.attributes[name]
    # Shardy's mesh declarations (`sdy.mesh`) are symbols of a dialect Kiln does not lower.
    for op in list(module.body.operations):
        if op.operation.name.startswith("sdy."):
            op.operation.erase()


def _attr_str(attrs: ir.DictAttr | None, name: str) -> str | None:
    if attrs is None or name not in attrs:
        return None
    try:
        return ir.StringAttr(attrs[name]).value
    except ValueError:
        return None


def _arg_attrs(func: ir.Operation, key: str) -> list:
    if key not in func.attributes:
        return []
    return [ir.DictAttr(a) for a in ir.ArrayAttr(func.attributes[key])]


def _is_token(t: ir.Type) -> bool:
    return str(t) == "!stablehlo.token"


def adapt_calling_convention(module: ir.Module, info: ExportedInfo, filename: str) -> None:
    """Rename JAX's @main to @kiln_jax_main and put a plain @main over every flat argument in
    front of it, which passes the platform index, fresh tokens, dimension variables and the
    kept arguments, and returns the array results."""
    from ..lowering.ir_util import find_entry, function_type
    main = find_entry(module, "main")
    ftype = function_type(main)
    in_types, out_types = list(ftype.inputs), list(ftype.results)
    arg_attrs = _arg_attrs(main, "arg_attrs") or [None] * len(in_types)
    res_attrs = _arg_attrs(main, "res_attrs") or [None] * len(out_types)
    try:
        with main.location:
            wrapper_types = [_aval_type(a) for a in info.in_avals]
    except (ir.MLIRError, ValueError) as exc:
        raise KilnError(f"cannot build the entry for the export's calling convention: {exc}",
                        location=filename, hint="the Exported's argument types are not "
                                                "MLIR types Kiln knows") from None
    # What the wrapper passes for each parameter of JAX's @main: (kind, detail).
    plan: list[tuple[str, object]] = []
    kept, arrays = info.kept_var_idx, 0
    for t, attrs in zip(in_types, arg_attrs):
        name = _attr_str(attrs, "jax.global_constant")
        if name == "_platform_index":
            plan.append(("platform", info.platforms.index("cpu")))
        elif name is not None:
            plan.append(("dimension", _dimension_source(name, info, filename)))
        elif _is_token(t):
            plan.append(("token", None))
        else:
            if arrays >= len(kept):
                raise KilnError(f"@main takes more array arguments than the export keeps ({len(kept)})",
                                location=filename, hint="the Exported and its module disagree")
            wrapper_types[kept[arrays]] = t  # the module's type: it may be more precise
            plan.append(("argument", kept[arrays]))
            arrays += 1
    if arrays != len(kept):
        raise KilnError(f"@main takes {arrays} array argument(s) but the export keeps {len(kept)}",
                        location=filename, hint="the Exported and its module disagree")
    results = [i for i, t in enumerate(out_types) if not _is_token(t)]
    if len(results) != len(info.out_avals):
        raise KilnError(f"@main returns {len(results)} array(s) but the export declares "
                        f"{len(info.out_avals)}", location=filename)
    main.attributes["sym_name"] = ir.StringAttr.get(MAIN)
    main.attributes["sym_visibility"] = ir.StringAttr.get("private")
    first = list(module.body.operations)[0]
    with ir.InsertionPoint(first), main.location:
        wrapper = func.FuncOp("main", (wrapper_types, [out_types[i] for i in results]),
                              visibility="public")
        if any(res_attrs[i] is not None and len(res_attrs[i]) for i in results):
            wrapper.result_attrs = ir.ArrayAttr.get(
                [res_attrs[i] if res_attrs[i] is not None else ir.DictAttr.get({}) for i in results])
        block = wrapper.add_entry_block()
        with ir.InsertionPoint(block):
            operands = [_wrapper_operand(kind, detail, t, block.arguments)
                        for (kind, detail), t in zip(plan, in_types)]
            call = func.CallOp(out_types, MAIN, operands)
            func.ReturnOp([call.results[i] for i in results])
    _rewrite_shape_assertions(module)


def _aval_type(aval: Aval) -> ir.Type:
    dims = [int(d) if d.isdigit() else ir.ShapedType.get_dynamic_size() for d in aval.shape]
    return ir.RankedTensorType.get(dims, ir.Type.parse(aval.element))


def _dimension_source(name: str, info: ExportedInfo, filename: str) -> tuple[int, int]:
    """(argument, dimension) whose size is JAX's dimension variable `name`."""
    for arg, aval in enumerate(info.in_avals):
        if name in aval.shape:
            return arg, aval.shape.index(name)
    raise KilnError(f"@main takes dimension variable '{name}', which no argument's shape names "
                    "on its own", location=filename,
                    hint="export with shapes where every dimension variable is some dimension")


def _wrapper_operand(kind: str, detail, t: ir.Type, args) -> ir.Value:
    """The value the wrapping @main passes for one parameter of JAX's @main (of type `t`)."""
    if kind == "argument":
        return args[detail]
    if kind == "platform":
        return _hlo("stablehlo.constant", [], t, value=ir.DenseElementsAttr.get_splat(
            t, ir.IntegerAttr.get(ir.RankedTensorType(t).element_type, detail)))
    if kind == "token":
        return _hlo("stablehlo.after_all", [], t)
    arg, dim = detail  # a dimension variable: the size of that argument's dimension
    i32 = ir.RankedTensorType.get([], ir.IntegerType.get_signless(32))
    size = _hlo("stablehlo.get_dimension_size", [args[arg]], i32,
                dimension=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim))
    return _hlo("stablehlo.convert", [size], t)


def _hlo(name: str, operands: list[ir.Value], result: ir.Type, **attributes) -> ir.Value:
    return ir.Operation.create(name, results=[result], operands=operands,
                               attributes=attributes).result


def _rewrite_shape_assertions(module: ir.Module) -> None:
    """JAX's `shape_assertion` custom calls stay as they are: the CPU pipeline's
    `kiln-lower-jax-custom-calls` (lowering/legalize/jax_targets.py) decides those whose
    predicate folds once shapes are specialised, and runs the others, raising JAX's error
    message formatted with the call's arguments when one fails."""


