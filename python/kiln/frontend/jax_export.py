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
argument whose symbolic shape names it. `shape_assertion` custom calls become
`check.expect_true`, and the Python side checks shapes against the symbolic ones first.

The input and output pytrees travel with the module as JSON attributes (`kiln.jax.*`) and
JaxExecutable restores them.
"""
from __future__ import annotations

import ast
import base64
import json
import re
import struct
from dataclasses import dataclass, field

import numpy as np
from torch_mlir import ir

from ..errors import KilnError
from . import mlir as mlir_frontend

MLIR_BYTECODE_MAGIC = b"ML\xefR"
_PRODUCER = re.compile(rb"StableHLO_v\d+\.\d+\.\d+")  # a portable artifact's producer string
MAIN = "kiln_jax_main"
ATTR = "kiln.jax.info"
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
class Aval:
    shape: list[str]       # one entry per dimension: "16", "b", "2*b"...
    element: str           # MLIR element type

    def mlir_type(self) -> str:
        dims = ["?" if not d.isdigit() else d for d in self.shape]
        return f"tensor<{''.join(d + 'x' for d in dims)}{self.element}>"


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
def load_exported(data: bytes, ctx: ir.Context, filename: str) -> ir.Module:
    return load_info(read_exported(data, filename), ctx, filename)


def load_info(info: ExportedInfo, ctx: ir.Context, filename: str) -> ir.Module:
    try:
        module = parse_artifact(info.mlir_module, ctx, filename)
    except KilnError as exc:
        # Version skew surfaces here: say it is the Exported's embedded artifact.
        raise KilnError(f"in the serialized jax.export.Exported's module: {exc.message}",
                        location=exc.location, hint=exc.hint) from None
    with ctx:
        adapt_calling_convention(module, info, filename)
        module.operation.attributes[ATTR] = ir.StringAttr.get(info.to_json())
    return module


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


def parse_raw_artifact(data: bytes, ctx: ir.Context, filename: str) -> ir.Module:
    """MLIR bytecode, and JAX's raw `exp.mlir_module_serialized` among it: Shardy attributes
    and JAX's calling-convention details are handled as far as the module alone allows."""
    if not _PRODUCER.search(data[:64]) or b"sdy" not in data:
        module = mlir_frontend.parse_bytecode(data, ctx, filename)
    else:
        module = parse_artifact(data, ctx, filename)
    with ctx:
        adapt_raw_jax_module(module, filename)
    return module


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
    # JaxExecutable then specialises dynamic shapes without taking leading scalar integer
    # arguments for dimension variables: JAX computes those inside its own @main.
    module.operation.attributes[ATTR] = ir.StringAttr.get(info.to_json())


def _aval_of_type(t: ir.Type) -> Aval:
    ranked = ir.RankedTensorType(t)
    return Aval(["?" if ir.ShapedType.is_dynamic_size(d) else str(d) for d in ranked.shape],
                str(ranked.element_type))


def _artifact_text_via_jax(data: bytes, filename: str) -> str:
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
            return jax_mlir.module_to_string(_jax.mlir.deserialize_portable_artifact(data))
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
    from ..lowering.ir_util import find_entry, function_type
    main = find_entry(module, "main")
    ftype = function_type(main)
    in_types, out_types = list(ftype.inputs), list(ftype.results)
    arg_attrs = _arg_attrs(main, "arg_attrs") or [None] * len(in_types)
    res_attrs = _arg_attrs(main, "res_attrs") or [None] * len(out_types)
    wrapper_args = [a.mlir_type() for a in info.in_avals]
    kept = info.kept_var_idx
    lines, call_operands, n_array, dims = [], [], 0, []
    for k, (t, attrs) in enumerate(zip(in_types, arg_attrs)):
        name = _attr_str(attrs, "jax.global_constant")
        var = f"%v{k}"
        if name == "_platform_index":
            lines.append(f"{var} = stablehlo.constant dense<{info.platforms.index('cpu')}> : {t}")
        elif name is not None:
            dims.append((var, name, str(t)))
        elif _is_token(t):
            lines.append(f"{var} = stablehlo.after_all : !stablehlo.token")
        else:
            if n_array >= len(kept):
                raise KilnError(f"@main takes more array arguments than the export keeps ({len(kept)})",
                                location=filename, hint="the Exported and its module disagree")
            src = kept[n_array]
            wrapper_args[src] = str(t)
            var = f"%arg{src}"
            n_array += 1
        call_operands.append(var)
    if n_array != len(kept):
        raise KilnError(f"@main takes {n_array} array argument(s) but the export keeps {len(kept)}",
                        location=filename, hint="the Exported and its module disagree")
    for var, name, t in dims:  # after the loop: the wrapper's argument types are final now
        lines += _dimension_value(var, name, t, info, wrapper_args, filename)
    results = [(i, t, a) for i, (t, a) in enumerate(zip(out_types, res_attrs)) if not _is_token(t)]
    if len(results) != len(info.out_avals):
        raise KilnError(f"@main returns {len(results)} array(s) but the export declares "
                        f"{len(info.out_avals)}", location=filename)
    main.attributes["sym_name"] = ir.StringAttr.get(MAIN)
    main.attributes["sym_visibility"] = ir.StringAttr.get("private")
    res_sig = ", ".join(f"{t} {a}" if a is not None and len(a) else str(t) for _, t, a in results)
    n_out = len(out_types)
    binding = "" if n_out == 0 else "%r = " if n_out == 1 else f"%r:{n_out} = "
    call = (f"{binding}func.call @{MAIN}({', '.join(call_operands)}) "
            f": ({', '.join(map(str, in_types))}) -> ({', '.join(map(str, out_types))})")
    rets = [f"%r#{i}" if n_out > 1 else "%r" for i, _, _ in results]
    text = "\n".join([
        f"func.func private @{MAIN}({', '.join(map(str, in_types))}) -> ({', '.join(map(str, out_types))})",
        f"func.func public @main({', '.join(f'%arg{i}: {t}' for i, t in enumerate(wrapper_args))})"
        f" -> ({res_sig}) {{",
        *lines, call,
        f"  func.return {', '.join(rets)} : {', '.join(str(t) for _, t, _ in results)}" if rets
        else "  func.return", "}"])
    try:
        helper = ir.Module.parse(text)
    except ir.MLIRError as exc:
        raise KilnError(f"cannot build the entry for the export's calling convention: {exc}",
                        location=filename) from None
    wrapper = list(helper.body.operations)[1].operation
    wrapper.move_before(list(module.body.operations)[0].operation)
    _rewrite_shape_assertions(module)


def _dimension_value(var: str, name: str, t: str, info: ExportedInfo, arg_types: list[str],
                     filename: str) -> list[str]:
    """A dimension argument of @main, read off the shape of the argument that names it."""
    for arg, aval in enumerate(info.in_avals):
        if name in aval.shape:
            dim = aval.shape.index(name)
            return [f"{var}_i32 = stablehlo.get_dimension_size %arg{arg}, dim = {dim} : "
                    f"({arg_types[arg]}) -> tensor<i32>",
                    f"{var} = stablehlo.convert {var}_i32 : (tensor<i32>) -> {t}"]
    raise KilnError(f"@main takes dimension variable '{name}', which no argument's shape names "
                    "on its own", location=filename,
                    hint="export with shapes where every dimension variable is some dimension")


def _rewrite_shape_assertions(module: ir.Module) -> None:
    """JAX's `shape_assertion` custom call holds when the shapes fit the symbolic ones. After
    specialisation its predicate folds; `check.expect_true` makes Kiln enforce it."""
    from ..lowering.ir_util import walk
    for op in list(walk(module.operation)):
        if op.name != "stablehlo.custom_call" or \
                ir.StringAttr(op.attributes["call_target_name"]).value != "shape_assertion":
            continue
        message = ir.StringAttr(op.attributes["error_message"]).value \
            if "error_message" in op.attributes else "shape assertion"
        with ir.InsertionPoint(op), ir.Location.name(message[:200], childLoc=op.location):
            ir.Operation.create("stablehlo.custom_call", results=[], operands=[op.operands[0]],
                                attributes={"call_target_name": ir.StringAttr.get("check.expect_true"),
                                            "has_side_effect": ir.BoolAttr.get(True)})
        op.erase()


# -- calling with pytrees ----------------------------------------------------------------------
def info_of(module: ir.Module) -> ExportedInfo | None:
    attrs = module.operation.attributes
    return ExportedInfo.from_json(ir.StringAttr(attrs[ATTR]).value) if ATTR in attrs else None


def executable_class(module: ir.Module):
    """The Executable class for `module`: JaxExecutable for JAX exports (pytrees restored)."""
    from ..runtime.executable import Executable
    return JaxExecutable if info_of(module) is not None else Executable


def _custom_node(node: list):
    try:
        from jax._src.export import _export
    except ImportError:
        raise KilnError(f"the export's pytree has a custom node '{node[2]}'; restoring it needs jax",
                        hint="install jax, or call the Executable's .flat(...) with flat arrays") from None
    if node[2] not in _export.deserialization_registry:
        raise KilnError(f"the export's pytree has node type '{node[2]}', unknown to this jax",
                        hint="register it with jax.export.register_pytree_node_serialization")
    _, from_aux, from_iter = _export.deserialization_registry[node[2]]
    return from_aux(base64.b64decode(node[3])), from_iter


def unflatten(tree: list, leaves):
    """Build the pytree `tree` (see _tree) from an iterator of leaves."""
    kind, children = tree[0], tree[1]
    if kind == "leaf":
        return next(leaves)
    values = [unflatten(c, leaves) for c in children]
    if kind == "none":
        return None
    if kind == "tuple":
        return tuple(values)
    if kind == "list":
        return values
    if kind == "dict":
        return dict(zip(tree[2], values))
    if kind == "custom":
        aux, from_iter = _custom_node(tree)
        return from_iter(aux, values)
    raise KilnError(f"unknown pytree node kind {kind}")


def flatten(tree: list, value, what: str) -> list:
    """The leaves of `value`, checked against the structure `tree`."""
    kind, children = tree[0], tree[1]
    if kind == "leaf":
        return [value]
    if kind == "none":
        if value is not None:
            raise KilnError(f"{what} must be None")
        return []
    if kind in ("tuple", "list"):
        if not isinstance(value, (tuple, list)) or len(value) != len(children):
            raise KilnError(f"{what} must be a {kind} of {len(children)}, got {type(value).__name__}"
                            + (f" of {len(value)}" if isinstance(value, (tuple, list)) else ""))
        return [x for c, v, i in zip(children, value, range(len(children)))
                for x in flatten(c, v, f"{what}[{i}]")]
    if kind == "dict":
        if not isinstance(value, dict) or sorted(value) != sorted(tree[2]):
            raise KilnError(f"{what} must be a dict with keys {tree[2]}")
        return [x for c, k in zip(children, tree[2]) for x in flatten(c, value[k], f"{what}[{k!r}]")]
    if kind == "custom":
        aux, from_iter = _custom_node(tree)  # a clear error first when jax is missing
        import jax
        placeholder = from_iter(aux, [unflatten(c, iter(lambda: 0.0, None)) for c in children])
        treedef = jax.tree_util.tree_structure(placeholder)
        return list(jax.tree_util.tree_leaves(treedef.flatten_up_to(value)))
    raise KilnError(f"unknown pytree node kind {kind}")


_DIM_FUNCS = {"floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b, "max": max, "min": min,
              "non_negative": lambda a: max(a, 0)}
_DIM_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
            ast.Mult: lambda a, b: a * b, ast.FloorDiv: lambda a, b: a // b,
            ast.Mod: lambda a, b: a % b}


def eval_dim(expr: str, env: dict[str, int]) -> int:
    """The value of one of JAX's symbolic dimension expressions ("2*b + 1", "floordiv(b, 2)",
    "max(a, b)"...) for the variables in `env`. The text comes from a file, so it is evaluated
    from its syntax tree, never with eval(). Raises ValueError for any other form."""
    def value(node):
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name) and node.id in env:
            return env[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _DIM_OPS:
            return _DIM_OPS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in _DIM_FUNCS and not node.keywords:
            return _DIM_FUNCS[node.func.id](*(value(a) for a in node.args))
        raise ValueError(f"unsupported dimension expression {expr!r}")
    try:
        return value(ast.parse(expr, mode="eval").body)
    except (SyntaxError, ZeroDivisionError, TypeError, RecursionError) as exc:
        raise ValueError(str(exc)) from None


def check_shapes(avals: list[Aval], shapes: list[tuple[int, ...]], entry: str) -> None:
    """Check concrete shapes against the symbolic ones before compiling: a clear error instead
    of a program specialised to inconsistent dimension variables."""
    env: dict[str, int] = {}
    for arg, (aval, shape) in enumerate(zip(avals, shapes)):
        for d, (sym, n) in enumerate(zip(aval.shape, shape)):
            if re.fullmatch(r"[A-Za-z_]\w*", sym):
                if sym in env and env[sym] != n:
                    raise KilnError(f"argument {arg} of @{entry} has dimension {d} = {n}, but "
                                    f"dimension variable '{sym}' is {env[sym]} from an earlier "
                                    "argument", hint="shapes must fit the export's symbolic shapes")
                if n < 1:
                    raise KilnError(f"dimension variable '{sym}' must be >= 1, got {n} "
                                    f"(argument {arg} of @{entry}, dimension {d})")
                env[sym] = n
    for arg, (aval, shape) in enumerate(zip(avals, shapes)):
        for d, (sym, n) in enumerate(zip(aval.shape, shape)):
            try:
                want = eval_dim(sym, env)
            except ValueError:  # a form this check cannot evaluate: the program's own check decides
                continue
            if want != n:
                raise KilnError(f"argument {arg} of @{entry} must have dimension {d} = {sym} = "
                                f"{want}, got {n}", hint="shapes must fit the export's symbolic shapes: "
                                + ", ".join("(" + ", ".join(a.shape) + ")" for a in avals))


def _executable_base():
    from ..runtime.executable import Executable
    return Executable


class JaxExecutable(_executable_base()):
    """An Executable for a JAX export: called like the exported function (its pytrees of
    arrays in, its pytree of numpy arrays out). `.flat(*arrays)` calls it with flat arrays."""

    def __init__(self, imported: ir.Module, *args, **kwargs):
        self.jax_info = info_of(imported)
        super().__init__(imported, *args, **kwargs)

    def __call__(self, *args, **kwargs):
        info = self.jax_info
        if info.in_tree is None:
            return super().__call__(*args)
        leaves = flatten(info.in_tree, (args, kwargs), "the arguments")
        outputs = super().__call__(*leaves)
        return unflatten(info.out_tree, iter(outputs)) if info.out_tree else outputs

    def _module(self, ctx: ir.Context, arg_shapes) -> tuple[ir.Module, dict[int, int]]:
        """Specialise to concrete shapes by plain StableHLO refinement. The wrapping @main
        computes JAX's dimension variables itself, so its leading scalar integer parameters are
        the user's own values and must not be taken for dimension arguments."""
        if arg_shapes is None or all(s.is_static for s in self.arg_specs):
            return super()._module(ctx, arg_shapes)
        from ..pipeline import run_steps
        module, _ = super()._module(ctx, None)
        types = ",".join(s.mlir_type(tuple(shape)) for s, shape in zip(self.arg_specs, arg_shapes))
        run_steps(module, [f"stablehlo-refine-arguments{{types={types}}}", "stablehlo-refine-shapes",
                           "func.func(stablehlo-canonicalize-dynamism)", "stablehlo-refine-shapes",
                           "canonicalize"], self.filename, "specialize")
        return module, {}

    def flat(self, *arrays) -> tuple[np.ndarray, ...]:
        return super().__call__(*arrays)

    def run_checks(self, *args):
        arrays = self._coerce(args)
        check_shapes(self.jax_info.in_avals, [a.shape for a in arrays], self.entry)
        return super().run_checks(*arrays)
