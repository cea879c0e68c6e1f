"""Lowerings: custom_call (see passes/legalize/__init__.py).

`stablehlo.custom_call @target(operands)` becomes a call of the C runtime's dispatcher:

    %b0  = bufferization.to_buffer %operand read_only      // each operand leaf's buffer
    %out = memref.alloc() {alignment = 64}                  // each result leaf's buffer
    memref.alloca_scope {                                   // frees the array each iteration
      %leaves = memref.alloca() : memref<Nxi64>             // their addresses, operands first
      memref.store (pointer of %b0), %leaves[0] ...
      func.call @kiln_custom_call(%site, pointer of %leaves)
    }
    %result = bufferization.to_tensor %out restrict writable

`%site` is the address of a KilnCallSite (runtime/custom_call.py) holding the resolved
target, its ABI (the op's api_version), its opaque string and its tuple structure, from which
the dispatcher builds XLA's `out`/`in` pointer arrays. The IR stays tensor-level around the
call, so one-shot-bufferize accepts it; buffers stay alive until the end of their block, after
the call. Targets are resolved here, at compile time: an unknown one is a KilnError.

Kiln-specific attributes on a custom_call (front ends that flatten tuples set them):
`kiln.operand_tree` / `kiln.result_tree` (array<i32>, depth first, -1 a leaf, k >= 0 a tuple of
k) give the tuple structure of the flat operand list / of the one XLA result.

Tokens (`!stablehlo.token` operands, results or tuple elements) are leaves with no data: the
target sees a null pointer where XLA passes one (api_version 1-3), a rank-0 buffer of dtype
TOKEN with a null data pointer in the typed FFI, and None in a Python target's lists. A token
result is `stablehlo.after_all` of the call's token operands, so effects stay ordered.
"""
from __future__ import annotations

import json

import numpy as np
from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo
from torch_mlir.dialects import arith, bufferization, func, memref

from ...errors import KilnError
from ...dialects import kiln as names
from ...runtime import custom_call as cc
from ...runtime import ffi
from ...runtime.dtypes import numpy_dtype
from ..ir_util import walk

DISPATCHER = "kiln_custom_call"
# Globals holding the call sites' addresses, filled in by the loader (`record_site`).
SITE_SYMBOL_PREFIX = names.CALL_SITE_SYMBOL
CHECK_PREFIX = "check."  # conformance checks are outlined earlier (passes/checks.py)
INTERNAL_PREFIX = names.PREFIX

# A tree is None (a leaf buffer) or a list of trees (a tuple of its elements).


# ---- trees ----------------------------------------------------------------------------------

def _type_tree(t: ir.Type):
    if isinstance(t, ir.TupleType):
        tt = ir.TupleType(t)
        return [_type_tree(tt.get_type(i)) for i in range(tt.num_types)]
    return None


def _encode(tree, out: list[int]) -> list[int]:
    if tree is None:
        out.append(-1)
    else:
        out.append(len(tree))
        for child in tree:
            _encode(child, out)
    return out


def _decode(codes: list[int], pos: int = 0):
    if pos >= len(codes):
        raise ValueError("truncated tree")
    if codes[pos] < 0:
        return None, pos + 1
    children, pos, n = [], pos + 1, codes[pos]
    for _ in range(n):
        child, pos = _decode(codes, pos)
        children.append(child)
    return children, pos


def _count(tree) -> int:
    return 1 if tree is None else sum(_count(c) for c in tree)


def _leaf_index(trees: list, top: int, path: list[int]) -> int:
    """The flat leaf index of element `path` of top-level tree `top`."""
    index = sum(_count(t) for t in trees[:top])
    node = trees[top]
    for step in path:
        if node is None or step >= len(node):
            raise ValueError(path)
        index += sum(_count(c) for c in node[:step])
        node = node[step]
    if node is not None:
        raise ValueError(path)
    return index


def _tuple_leaves(value: ir.Value, where: str) -> list[ir.Value]:
    """The tensors making up a (nested) tuple value built by stablehlo.tuple."""
    if not isinstance(value.type, ir.TupleType):
        return [value]
    owner = value.owner
    if not isinstance(owner, ir.OpView) or owner.operation.name != "stablehlo.tuple":
        raise KilnError("a custom call's tuple operand must be built by stablehlo.tuple",
                        location=where, hint="build the tuple in the same function")
    return [leaf for v in owner.operation.operands for leaf in _tuple_leaves(v, where)]


# ---- attributes -----------------------------------------------------------------------------

def to_python(attr: ir.Attribute):
    """An attribute of a backend_config dictionary as a Python value."""
    if isinstance(attr, ir.BoolAttr):
        return ir.BoolAttr(attr).value
    if isinstance(attr, ir.IntegerAttr):
        a = ir.IntegerAttr(attr)
        t = a.type
        if isinstance(t, ir.IntegerType) and ir.IntegerType(t).is_unsigned and a.value < 0:
            return a.value + (1 << ir.IntegerType(t).width)
        return a.value
    if isinstance(attr, ir.FloatAttr):
        return ir.FloatAttr(attr).value
    if isinstance(attr, ir.StringAttr):
        return ir.StringAttr(attr).value
    if isinstance(attr, ir.DictAttr):
        d = ir.DictAttr(attr)
        return {d[i].name: to_python(d[i].attr) for i in range(len(d))}
    if isinstance(attr, ir.ArrayAttr):
        return [to_python(a) for a in ir.ArrayAttr(attr)]
    for kind in (ir.DenseI64ArrayAttr, ir.DenseI32ArrayAttr, ir.DenseI16ArrayAttr,
                 ir.DenseI8ArrayAttr, ir.DenseF64ArrayAttr, ir.DenseF32ArrayAttr, ir.DenseBoolArrayAttr):
        if isinstance(attr, kind):
            return np.array(list(kind(attr)))
    if isinstance(attr, ir.DenseElementsAttr):
        dense = ir.DenseElementsAttr(attr)
        shape = tuple(ir.ShapedType(dense.type).shape)
        if dense.is_splat:
            return np.full(shape, to_python(dense.get_splat_value()))
        try:
            return np.array(dense).reshape(shape)
        except (TypeError, ValueError, RuntimeError):
            return str(attr)
    if isinstance(attr, ir.TypeAttr):
        return str(ir.TypeAttr(attr).value)
    if isinstance(attr, ir.UnitAttr):
        return True
    return str(attr)


def _config(op: ir.Operation) -> tuple[str, dict]:
    """(string backend_config, attributes dictionary) of a custom call."""
    text, attrs = "", {}
    if "backend_config" in op.attributes:
        cfg = op.attributes["backend_config"]
        if isinstance(cfg, ir.StringAttr):
            text = ir.StringAttr(cfg).value
        elif isinstance(cfg, ir.DictAttr):
            attrs = to_python(cfg)
    if "mhlo.backend_config" in op.attributes:
        cfg = op.attributes["mhlo.backend_config"]
        if isinstance(cfg, ir.DictAttr):
            attrs = {**attrs, **to_python(cfg)}
    return text, attrs


def ffi_attributes(op: ir.Operation, name: str, where: str) -> list[ffi.FfiAttr]:
    """The typed-FFI attributes of a call of a C handler, with their exact MLIR types (the
    headers decode by type): the dictionaries `backend_config` and `mhlo.backend_config`
    (JAX's form; a string backend_config beside it is empty)."""
    entries = []
    for attr_name in ("backend_config", "mhlo.backend_config"):
        cfg = op.attributes[attr_name] if attr_name in op.attributes else None
        if isinstance(cfg, ir.DictAttr):
            d = ir.DictAttr(cfg)
            entries += [(d[i].name, d[i].attr) for i in range(len(d))]
    return [_ffi_attr(n, a, name, where) for n, a in entries]


def _ffi_attr(key: str, attr: ir.Attribute, name: str, where: str) -> ffi.FfiAttr:
    def refuse(why: str):
        return KilnError(f"custom call '{name}': attribute '{key}' ({attr}) {why}", location=where,
                         hint="typed-FFI attributes are integer, float or bool scalars, strings, "
                              "arrays of integers or floats, and dictionaries of these")

    def scalar_type(t: ir.Type) -> str:
        dtype = ffi.attribute_dtype(str(t))
        if dtype is None:
            raise refuse(f"has element type {t}, which the FFI cannot pass")
        return dtype

    if isinstance(attr, ir.BoolAttr):
        return ffi.FfiAttr(key, "scalar", "pred", bool(ir.BoolAttr(attr).value))
    if isinstance(attr, ir.IntegerAttr):
        a = ir.IntegerAttr(attr)
        return ffi.FfiAttr(key, "scalar", scalar_type(a.type), to_python(attr))
    if isinstance(attr, ir.FloatAttr):
        a = ir.FloatAttr(attr)
        return ffi.FfiAttr(key, "scalar", scalar_type(a.type), a.value)
    if isinstance(attr, ir.StringAttr):
        return ffi.FfiAttr(key, "string", None, ir.StringAttr(attr).value)
    if isinstance(attr, ir.DictAttr):
        d = ir.DictAttr(attr)
        return ffi.FfiAttr(key, "dict", None,
                           [_ffi_attr(d[i].name, d[i].attr, name, where) for i in range(len(d))])
    for kind, dtype in ((ir.DenseBoolArrayAttr, "pred"), (ir.DenseI8ArrayAttr, "s8"),
                        (ir.DenseI16ArrayAttr, "s16"), (ir.DenseI32ArrayAttr, "s32"),
                        (ir.DenseI64ArrayAttr, "s64"), (ir.DenseF32ArrayAttr, "f32"),
                        (ir.DenseF64ArrayAttr, "f64")):
        if isinstance(attr, kind):
            return ffi.FfiAttr(key, "array", dtype, [v for v in kind(attr)])
    if isinstance(attr, ir.DenseElementsAttr):
        dense = ir.DenseElementsAttr(attr)
        dtype = scalar_type(ir.ShapedType(dense.type).element_type)
        values = to_python(attr)
        if isinstance(values, str):
            raise refuse("cannot be read")
        return ffi.FfiAttr(key, "array", dtype, np.asarray(values).reshape(-1).tolist())
    if isinstance(attr, ir.ArrayAttr):
        items = list(ir.ArrayAttr(attr))
        if all(isinstance(a, (ir.IntegerAttr, ir.FloatAttr)) and not isinstance(a, ir.BoolAttr)
               for a in items):
            types = {str(ir.IntegerAttr(a).type if isinstance(a, ir.IntegerAttr)
                         else ir.FloatAttr(a).type) for a in items}
            if len(types) <= 1:
                dtype = scalar_type(ir.Type.parse(types.pop())) if types else "s64"
                return ffi.FfiAttr(key, "array", dtype, [to_python(a) for a in items])
        raise refuse("is an array of mixed or non-numeric elements")
    raise refuse("has a kind the FFI cannot pass")


def _layouts(op: ir.Operation, name: str) -> list[list[int] | None]:
    if name not in op.attributes:
        return []
    return [[int(x) for x in np.array(ir.DenseIntElementsAttr(a))] for a in ir.ArrayAttr(op.attributes[name])]


def _aliases(op: ir.Operation) -> list[tuple[list[int], int, list[int]]]:
    if "output_operand_aliases" not in op.attributes:
        return []
    out = []
    for a in ir.ArrayAttr(op.attributes["output_operand_aliases"]):
        alias = _stablehlo.OutputOperandAlias(a)
        out.append((list(alias.output_tuple_indices), alias.operand_index,
                    list(alias.operand_tuple_indices)))
    return out


# ---- the rewrite ----------------------------------------------------------------------------

def _signless(t: ir.Type) -> ir.Type:
    if isinstance(t, ir.IntegerType) and not ir.IntegerType(t).is_signless:
        return ir.IntegerType.get_signless(ir.IntegerType(t).width)
    return t


def _is_token(t: ir.Type) -> bool:
    return _stablehlo.TokenType.isinstance(t)


def _static_tensor(t: ir.Type, what: str, where: str) -> ir.RankedTensorType:
    if not isinstance(t, ir.RankedTensorType):
        raise KilnError(f"{what} has type {t}, which Kiln cannot pass to a custom call",
                        location=where, hint="operands and results must be ranked tensors, "
                                             "tokens or tuples of them")
    rt = ir.RankedTensorType(t)
    if not rt.has_static_shape:
        raise KilnError(f"{what} has dynamic type {t}", location=where,
                        hint="custom-call buffers need static shapes")
    return rt


def _leaf_perm(t: ir.Type, layouts: list, i: int, what: str, where: str) -> list[int] | None:
    """The memory-order permutation of leaf `i` (None for row-major and for tokens, whose
    layout XLA gives as empty)."""
    layout = layouts[i] if i < len(layouts) else None
    if _is_token(t):
        if layout:
            raise KilnError(f"{what} is a token but has layout {layout}", location=where,
                            hint="a token's layout is empty (dense<> : tensor<0xindex>)")
        return None
    rank = _static_tensor(t, what, where).rank
    return _physical_perm(layout, rank, what, where)


def _physical_perm(layout: list[int] | None, rank: int, what: str, where: str) -> list[int] | None:
    """The transpose from logical to memory order for a minor_to_major layout (None: row-major)."""
    if layout is None or layout == list(range(rank - 1, -1, -1)):
        return None
    if sorted(layout) != list(range(rank)):
        raise KilnError(f"{what} has layout {layout}, not a permutation of its {rank} dimensions",
                        location=where)
    return list(reversed(layout))


def _leaf_spec(t: ir.RankedTensorType, perm: list[int] | None) -> cc.Leaf:
    shape = list(t.shape)
    physical = [shape[p] for p in perm] if perm else shape
    try:
        dtype = numpy_dtype(str(t.element_type))
    except KilnError:
        dtype = np.dtype(np.uint8)  # only Python targets view buffers; they are checked below
    inverse = [perm.index(i) for i in range(len(perm))] if perm else None
    return cc.Leaf(tuple(physical), dtype, tuple(inverse) if inverse else None, str(t.element_type))


def _token_spec() -> cc.Leaf:
    return cc.Leaf((), np.dtype(np.uint8), None, ffi.TOKEN)


def _create(name: str, results: list[ir.Type], operands: list[ir.Value], **attributes) -> ir.Operation:
    return ir.Operation.create(name, results=results, operands=operands, attributes=attributes)


def _transpose(value: ir.Value, perm: list[int]) -> ir.Value:
    t = ir.RankedTensorType(value.type)
    shape = [t.shape[p] for p in perm]
    return _create("stablehlo.transpose", [ir.RankedTensorType.get(shape, t.element_type)], [value],
                   permutation=ir.DenseI64ArrayAttr.get(perm)).result


def _bitcast(value: ir.Value, element: ir.Type) -> ir.Value:
    t = ir.RankedTensorType(value.type)
    if t.element_type == element:
        return value
    return _create("stablehlo.bitcast_convert", [ir.RankedTensorType.get(t.shape, element)], [value]).result


def _pointer(buffer: ir.Value) -> ir.Value:
    index = memref.ExtractAlignedPointerAsIndexOp(buffer).result
    return arith.IndexCastOp(ir.IntegerType.get_signless(64), index).result


def _declare_dispatcher(module: ir.Module) -> None:
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.operation.attributes["sym_name"]).value == DISPATCHER:
            return
    i64 = ir.IntegerType.get_signless(64)
    with ir.InsertionPoint.at_block_begin(module.body), ir.Location.unknown():
        # Plain C ABI (no llvm.emit_c_interface): void kiln_custom_call(int64_t, int64_t).
        func.FuncOp(DISPATCHER, ir.FunctionType.get([i64, i64], []), visibility="private")


def _resolve(name: str, api: int, where: str) -> cc.CustomCallTarget:
    target = cc.REGISTRY.lookup(name, "cpu")
    if target is None:
        elsewhere = cc.REGISTRY.platforms_of(name)
        known = cc.REGISTRY.names("cpu")
        if elsewhere:
            raise KilnError(f"custom-call target '{name}' is registered for {', '.join(elsewhere)}, "
                            "not for the CPU", location=where,
                            hint="register a CPU implementation with platform='cpu'")
        listed = ", ".join(known[:20]) + (f" and {len(known) - 20} more" if len(known) > 20 else "")
        raise KilnError(f"unknown custom-call target '{name}'", location=where,
                        hint="registered CPU targets: " + (listed or "none")
                             + "; register it with kiln.register_custom_call or "
                               "kiln.register_custom_call_library")
    if target.api_version is not None and target.api_version != api:
        raise KilnError(f"custom call '{name}' has api_version {api}, but its target was "
                        f"registered for api_version {target.api_version}", location=where,
                        hint="the api_version selects the calling convention; they must agree")
    if not target.is_python and api not in (1, 2, 3, cc.API_TYPED_FFI):
        raise KilnError(f"custom call '{name}' has unknown api_version {api}", location=where)
    if api == cc.API_TYPED_FFI and not target.ffi_capable:
        raise KilnError(f"custom call '{name}' uses the typed FFI (api_version 4), but its target "
                        "was declared with XLA_REGISTER_CUSTOM_CALL_TARGET, an api_version 1-3 "
                        "function", location=where,
                        hint="call it with api_version 1-3, or register an XLA FFI handler "
                             "(XLA_FFI_DEFINE_HANDLER_SYMBOL) or a Python target")
    return target


def lower_custom_call(op: ir.Operation, module: ir.Module) -> None:
    where = str(op.location)
    name = ir.StringAttr(op.attributes["call_target_name"]).value
    api = ir.IntegerAttr(op.attributes["api_version"]).value if "api_version" in op.attributes else 1
    api = api or 1  # API_VERSION_UNSPECIFIED behaves as the original convention
    # JAX marks typed-FFI calls by a dictionary `mhlo.backend_config` and leaves api_version
    # at 1 (XLA's converter then picks the FFI); a dictionary backend_config means the same.
    if any(n in op.attributes and isinstance(op.attributes[n], ir.DictAttr)
           for n in ("mhlo.backend_config", "backend_config")):
        api = cc.API_TYPED_FFI
    if "called_computations" in op.attributes and len(ir.ArrayAttr(op.attributes["called_computations"])):
        raise KilnError(f"custom call '{name}' has called_computations, which Kiln does not support",
                        location=where)
    target = _resolve(name, api, where)
    backend_config, attributes = _config(op)
    typed_attributes = None
    if api == cc.API_TYPED_FFI and not target.is_python:
        typed_attributes = ffi_attributes(op, name, where)

    # Operand and result structure.
    operands = list(op.operands)
    if names.OPERAND_TREE in op.attributes:
        codes = list(ir.DenseI32ArrayAttr(op.attributes[names.OPERAND_TREE]))
        operand_trees, pos = [], 0
        try:
            while pos < len(codes):
                tree, pos = _decode(codes, pos)
                operand_trees.append(tree)
        except ValueError:
            operand_trees = [None] * (len(operands) + 1)  # reported just below
        leaf_values = operands
    else:
        operand_trees = [_type_tree(v.type) for v in operands]
        leaf_values = [leaf for v in operands for leaf in _tuple_leaves(v, where)]
    if sum(_count(t) for t in operand_trees) != len(leaf_values):
        raise KilnError(f"custom call '{name}': kiln.operand_tree does not match its operands",
                        location=where)
    results = list(op.results)
    if names.RESULT_TREE in op.attributes:
        codes = list(ir.DenseI32ArrayAttr(op.attributes[names.RESULT_TREE]))
        try:
            result_tree, end = _decode(codes)
        except ValueError:
            result_tree, end = [None] * (len(results) + 1), -1
        if end != len(codes):
            result_tree = [None] * (len(results) + 1)  # reported just below
        result_types = [r.type for r in results]
    elif len(results) == 1:
        result_tree = _type_tree(results[0].type)
        result_types = _flatten_types(results[0].type)
    else:
        result_tree = [_type_tree(r.type) for r in results]
        result_types = [t for r in results for t in _flatten_types(r.type)]
    if _count(result_tree) != len(result_types):
        raise KilnError(f"custom call '{name}': kiln.result_tree does not match its results",
                        location=where)

    # Layouts apply to top-level array operands/results (XLA's operand_layout_constraints).
    op_layouts = _layouts(op, "operand_layouts")
    res_layouts = _layouts(op, "result_layouts")
    # Layouts that cannot be matched to leaf buffers are an error, never silently ignored.
    if op_layouts and len(op_layouts) != len(leaf_values):
        raise KilnError(f"custom call '{name}' has operand_layouts for {len(op_layouts)} operand(s) "
                        f"but {len(leaf_values)} operand buffer(s)", location=where,
                        hint="layouts are supported for array operands, not tuples")
    if res_layouts and len(res_layouts) != len(result_types):
        raise KilnError(f"custom call '{name}' has result_layouts for {len(res_layouts)} result(s) "
                        f"but {len(result_types)} result buffer(s)", location=where,
                        hint="layouts are supported for array results, not nested tuples")
    operand_perms = [_leaf_perm(v.type, op_layouts, i, f"operand {i} of custom call '{name}'", where)
                     for i, v in enumerate(leaf_values)]
    result_perms = [_leaf_perm(t, res_layouts, i, f"result {i} of custom call '{name}'", where)
                    for i, t in enumerate(result_types)]

    # Aliased outputs share their operand's buffer (XLA's output_operand_aliases).
    aliases: dict[int, int] = {}
    out_trees = [result_tree] if result_tree is None else result_tree
    for out_path, operand_index, operand_path in _aliases(op):
        try:
            if result_tree is None:
                if out_path:
                    raise ValueError(out_path)
                r = 0
            else:
                r = _leaf_index(out_trees, out_path[0], out_path[1:]) if out_path else None
                if r is None:
                    raise ValueError(out_path)
            o = _leaf_index(operand_trees, operand_index, operand_path)
        except (ValueError, IndexError):
            raise KilnError(f"custom call '{name}' has an output_operand_alias that names no "
                            "buffer", location=where) from None
        if _is_token(leaf_values[o].type) or _is_token(result_types[r]):
            raise KilnError(f"custom call '{name}' aliases a token (result {r}, operand {o})",
                            location=where, hint="tokens have no buffer to share; alias arrays")
        if ir.RankedTensorType(leaf_values[o].type) != ir.RankedTensorType(result_types[r]) or \
                operand_perms[o] != result_perms[r]:
            raise KilnError(f"custom call '{name}' aliases result {r} with operand {o} of another "
                            "type or layout", location=where)
        aliases[r] = o

    operand_specs = [_token_spec() if _is_token(v.type) else
                     _leaf_spec(ir.RankedTensorType(v.type), p)
                     for v, p in zip(leaf_values, operand_perms)]
    result_specs = [_token_spec() if _is_token(t) else _leaf_spec(ir.RankedTensorType(t), p)
                    for t, p in zip(result_types, result_perms)]
    array_types = [t for t in [v.type for v in leaf_values] + result_types if not _is_token(t)]
    if target.is_python:
        for t in array_types:
            numpy_dtype(str(ir.RankedTensorType(t).element_type))  # KilnError if no numpy view
    elif typed_attributes is not None:
        for t in array_types:
            element = str(ir.RankedTensorType(t).element_type)
            if element not in ffi.DTYPE_CODES:
                raise KilnError(f"custom call '{name}' passes {element} buffers, which have no "
                                "XLA FFI data type", location=where,
                                hint="supported: " + ", ".join(ffi.DTYPE_CODES))
    tree_codes = []
    for t in operand_trees:
        _encode(t, tree_codes)
    _encode(result_tree, tree_codes)
    site = record_site(module, cc.SiteSpec(name, "cpu", api, backend_config, attributes,
                                           operand_specs, result_specs, len(operand_trees),
                                           tree_codes, aliases, typed_attributes))

    i64 = ir.IntegerType.get_signless(64)
    index = ir.IndexType.get()
    with ir.InsertionPoint(op), op.location:
        # Operands in memory order and signless, as buffers (None for tokens: no data).
        # Every operand's tensor is computed before the first becomes a buffer: bufferization
        # sees an operand read only at its to_buffer, not at the call that reads the memory
        # later, so a transpose computed between two to_buffers could be written into the
        # buffer of the operand before it (trsm's two column-major 3x3 operands both landed
        # in the result's buffer: the call read B for A).
        staged = []
        for v, perm in zip(leaf_values, operand_perms):
            if _is_token(v.type):
                staged.append(None)
                continue
            if perm:
                v = _transpose(v, perm)
            t = ir.RankedTensorType(v.type)
            staged.append(_bitcast(v, _signless(t.element_type)))
        buffers = []
        for v in staged:
            if v is None:
                buffers.append(None)
                continue
            t = ir.RankedTensorType(v.type)
            to_buffer = bufferization.ToBufferOp(
                ir.MemRefType.get(t.shape, _signless(t.element_type)), v, read_only=True)
            # One-shot bufferization sees this read only where the op stands; if CSE merged it
            # with an identical earlier to_buffer, the target would read a buffer that later
            # in-place ops may already have reused. A per-site attribute keeps them apart.
            to_buffer.operation.attributes[names.CUSTOM_CALL_SITE] = ir.IntegerAttr.get(i64, site)
            buffers.append(to_buffer.result)
        outs = []
        for i, (rt, perm) in enumerate(zip(result_types, result_perms)):
            if _is_token(rt):
                outs.append(None)
                continue
            t = ir.RankedTensorType(rt)
            shape = [t.shape[p] for p in perm] if perm else list(t.shape)
            alloc = memref.AllocOp(ir.MemRefType.get(shape, _signless(t.element_type)), [], [],
                                   alignment=64).result
            if i in aliases:
                memref.CopyOp(buffers[aliases[i]], alloc)
            outs.append(alloc)
        leaf_buffers = list(buffers)
        for r, o in aliases.items():
            leaf_buffers[o] = outs[r]  # the target sees one buffer, as in XLA
        null = None
        pointers = []
        for b in leaf_buffers + outs:
            if b is None and null is None:
                null = arith.ConstantOp(i64, 0).result
            pointers.append(null if b is None else _pointer(b))
        site_global = memref.GetGlobalOp(ir.MemRefType.get([], i64), site_symbol(site)).result
        site_value = memref.LoadOp(site_global, []).result
        scope = memref.AllocaScopeOp([])
        body = scope.regions[0].blocks.append()
        with ir.InsertionPoint(body):
            array = memref.AllocaOp(ir.MemRefType.get([max(len(pointers), 1)], i64), [], []).result
            for k, p in enumerate(pointers):
                memref.StoreOp(p, array, [arith.ConstantOp(index, k).result])
            call = func.CallOp([], DISPATCHER, [site_value, _pointer(array)])
            call.operation.attributes[names.CUSTOM_CALL_TARGET] = ir.StringAttr.get(name)
            ir.Operation.create("memref.alloca_scope.return", operands=[])
        # Results: the filled buffers as tensors, back in logical order and element type.
        # A token result depends on every token operand, as the call itself did.
        operand_tokens = [v for v in leaf_values if _is_token(v.type)]
        leaves = []
        for out, rt, perm in zip(outs, result_types, result_perms):
            if out is None:
                leaves.append(_create("stablehlo.after_all", [rt], operand_tokens).result)
                continue
            t = ir.RankedTensorType(rt)
            value = bufferization.ToTensorOp(
                ir.RankedTensorType.get(ir.MemRefType(out.type).shape, _signless(t.element_type)),
                out, restrict=True, writable=True).result
            value = _bitcast(value, t.element_type)
            if perm:
                value = _transpose(value, [perm.index(i) for i in range(len(perm))])
            leaves.append(value)
        if names.RESULT_TREE in op.attributes or len(results) != 1:
            replacements = _rebuild_each(results, leaves)
        else:
            replacements = [_rebuild(results[0].type, iter(leaves))]
    for old, new in zip(results, replacements):
        old.replace_all_uses_with(new)
    op.erase()
    _declare_dispatcher(module)


def site_symbol(index: int) -> str:
    return f"{SITE_SYMBOL_PREFIX}{index}"


def record_site(module: ir.Module, spec: cc.SiteSpec) -> int:
    """Record `spec` in the module's `kiln.call_sites` (read by the driver, which ships the
    specs with the object code) and give it a global the loader fills with the C site's
    address; returns its index. Object code holds no process addresses, so it can be cached,
    saved and compiled in another process."""
    attrs = module.operation.attributes
    sites = list(ir.ArrayAttr(attrs[names.CALL_SITES])) if names.CALL_SITES in attrs else []
    index = len(sites)
    attrs[names.CALL_SITES] = ir.ArrayAttr.get(
        sites + [ir.StringAttr.get(json.dumps(spec.to_json()))])
    i64 = ir.IntegerType.get_signless(64)
    with ir.InsertionPoint.at_block_begin(module.body), ir.Location.unknown():
        memref.GlobalOp(site_symbol(index), ir.TypeAttr.get(ir.MemRefType.get([], i64)),
                        sym_visibility="public",
                        initial_value=ir.DenseElementsAttr.get(
                            np.zeros((), np.int64), type=ir.RankedTensorType.get([], i64)))
    return index


def read_sites(module: ir.Module) -> list[cc.SiteSpec]:
    """The call sites `record_site` recorded, in index order."""
    attrs = module.operation.attributes
    if names.CALL_SITES not in attrs:
        return []
    return [cc.SiteSpec.from_json(json.loads(ir.StringAttr(a).value))
            for a in ir.ArrayAttr(attrs[names.CALL_SITES])]


def _flatten_types(t: ir.Type) -> list[ir.Type]:
    if isinstance(t, ir.TupleType):
        tt = ir.TupleType(t)
        return [x for i in range(tt.num_types) for x in _flatten_types(tt.get_type(i))]
    return [t]


def _rebuild(t: ir.Type, leaves) -> ir.Value:
    if not isinstance(t, ir.TupleType):
        return next(leaves)
    tt = ir.TupleType(t)
    parts = [_rebuild(tt.get_type(i), leaves) for i in range(tt.num_types)]
    return _create("stablehlo.tuple", [t], parts).result


def _rebuild_each(results: list[ir.Value], leaves: list[ir.Value]) -> list[ir.Value]:
    it = iter(leaves)
    return [_rebuild(r.type, it) for r in results]


def _fold_tuples(module: ir.Module) -> None:
    """get_tuple_element(tuple(...)) -> the element, then drop unused tuples, so the tuples
    built around custom calls disappear before upstream legalization."""
    changed = True
    while changed:
        changed = False
        for op in list(walk(module.operation)):
            if op.name == "stablehlo.get_tuple_element":
                src = op.operands[0].owner
                if isinstance(src, ir.OpView) and src.operation.name == "stablehlo.tuple":
                    idx = ir.IntegerAttr(op.attributes["index"]).value
                    op.results[0].replace_all_uses_with(src.operation.operands[idx])
                    op.erase()
                    changed = True
        for op in list(walk(module.operation)):
            if op.name == "stablehlo.tuple" and not list(op.results[0].uses):
                op.erase()
                changed = True


def _is_user_call(op: ir.Operation) -> bool:
    """Conformance checks (outlined earlier) and unregistered `kiln.*` targets (Kiln-internal
    calls front ends emit for other lowerings to expand) are not calls of registered targets."""
    if op.name != "stablehlo.custom_call":
        return False
    name = ir.StringAttr(op.attributes["call_target_name"]).value
    if name.startswith(CHECK_PREFIX):
        return False
    return not (name.startswith(INTERNAL_PREFIX) and cc.REGISTRY.lookup(name, "cpu") is None)


def lower_custom_calls(module: ir.Module) -> None:
    todo = [op for op in walk(module.operation) if _is_user_call(op)]
    for op in todo:
        lower_custom_call(op, module)
    if todo:
        _fold_tuples(module)
