"""Specialising a dynamic-shape program to the shapes it is called with.

JAX exports shape-polymorphic programs with the dimension variables as leading scalar
integer parameters (`@main(%b: tensor<i64>, %x: tensor<?x4xf32>)`); the program builds its
shape operands (dynamic_broadcast_in_dim, dynamic_reshape, dynamic_iota...) from them. Giving
the entry concrete argument types alone therefore leaves those shapes unknown. Kiln compiles
per argument shapes (the cache key), so it also fixes each dimension variable to the value the
shapes imply, makes it a constant, and lets StableHLO's refinement fold every shape
computation; what stays dynamic after that is reported, never guessed at run time.

A dimension variable's value is the size of some dynamic dimension. When the call's dynamic
dimensions all have one size, that is every variable's value. Otherwise each assignment of
the sizes present is tried, and the one that makes the whole program static and valid is
taken; if several do, the call is ambiguous and rejected.
"""
from __future__ import annotations

import io
import itertools
import re

from torch_mlir import ir

from ..errors import KilnError
from ..pipeline import run_steps
from .ir_util import body_block, find_entry, function_type, symbol_name, walk

_MAX_ASSIGNMENTS = 256
_REFINE = [
    "stablehlo-refine-shapes",
    "func.func(stablehlo-canonicalize-dynamism)",
    "stablehlo-refine-shapes",
    "canonicalize",
]


def _ranked(t: ir.Type) -> ir.RankedTensorType | None:
    try:
        return ir.RankedTensorType(t)
    except ValueError:
        return None


def _dims(type_text: str) -> list[str]:
    m = re.fullmatch(r"tensor<(.*)>", type_text.strip())
    parts = m.group(1).split("x") if m else []
    return parts[:-1]


def dimension_arguments(input_types: list[ir.Type]) -> list[int]:
    """Indices of JAX's dimension-variable parameters: the leading rank-0 integer tensors of a
    signature that has dynamic tensors after them."""
    lead = []
    for i, t in enumerate(input_types):
        ranked = _ranked(t)
        if ranked is None or ranked.rank != 0 or not isinstance(ranked.element_type, ir.IntegerType):
            break
        lead.append(i)
    rest = input_types[len(lead):]
    dynamic = any(_ranked(t) is not None and not _ranked(t).has_static_shape for t in rest)
    return lead if dynamic and rest else []


def _dynamic_sizes(input_types: list[ir.Type], arg_types: list[str]) -> list[int]:
    sizes = []
    for t, concrete in zip(input_types, arg_types):
        if _ranked(t) is None:
            continue
        for d, size in zip(_ranked(t).shape, _dims(concrete)):
            if ir.ShapedType.is_dynamic_size(d) and size.isdigit() and int(size) not in sizes:
                sizes.append(int(size))
    return sizes


def _fix_dimension_arguments(func: ir.Operation, values: dict[int, int]) -> None:
    """Uses of each dimension parameter become a constant of its value (the parameter stays,
    so the signature and the caller's arguments do not change)."""
    block = body_block(func)
    first = block.operations[0]
    for index, value in values.items():
        arg = block.arguments[index]
        with ir.InsertionPoint(first), func.location:
            const = ir.Operation.create(
                "stablehlo.constant", results=[arg.type],
                attributes={"value": ir.DenseElementsAttr.get_splat(
                    arg.type, ir.IntegerAttr.get(_ranked(arg.type).element_type, value))})
        arg.replace_all_uses_with(const.result)


def _ranked_results(module: ir.Module):
    """The ranked tensor type of every op result in the module."""
    for func in module.body.operations:
        for op in walk(func.operation):
            for r in op.results:
                ranked = _ranked(r.type)
                if ranked is not None:
                    yield ranked


def _is_static(module: ir.Module) -> bool:
    return all(ranked.has_static_shape for ranked in _ranked_results(module))


def _refine(module: ir.Module, entry_name: str, values: dict[int, int], types: str,
            filename: str) -> None:
    func = find_entry(module, entry_name)
    _fix_dimension_arguments(func, values)
    run_steps(module, [f"stablehlo-refine-arguments{{types={types}}}", *_REFINE],
              filename, "specialize")
    # Shape arithmetic often sits in private helpers (JAX's @remainder, @_where): inline
    # them so the folder sees constants. Each fold can make more shapes static and so more
    # arithmetic foldable.
    run_steps(module, ["inline", *_REFINE], filename, "specialize")
    for _ in range(4):
        with module.context:
            folded = fold_shape_arithmetic(module)
            run_steps(module, ["cse"], filename, "specialize")  # equal start/limit terms
            if not (rewrite_offset_slices(module) or folded):
                break
        run_steps(module, _REFINE, filename, "specialize")


def _copy(module: ir.Module) -> ir.Module:
    buf = io.BytesIO()
    module.operation.write_bytecode(buf)
    return ir.Module.parse(buf.getvalue(), module.context)


def _refines(module: ir.Module, values: dict[int, int], types: str, filename: str, *,
             static: bool) -> bool:
    """Whether refining a copy with `values` for the dimension arguments succeeds, verifies,
    and (`static`) leaves no dynamic shape."""
    trial = _copy(module)
    try:
        _refine(trial, "main", values, types, filename)
        return (not static or _is_static(trial)) and not _negative_size(trial) and \
            trial.operation.verify()
    except (KilnError, ir.MLIRError):
        return False


def _negative_size(module: ir.Module) -> bool:
    """Whether refinement made a static size negative (the verifier lets `tensor<-3xf32>`
    through; lowering it fails)."""
    return any(d < 0 and not ir.ShapedType.is_dynamic_size(d)
               for ranked in _ranked_results(module) for d in ranked.shape)


def _infer_values(module: ir.Module, dim_args: list[int], sizes: list[int], types: str,
                  filename: str) -> dict[int, int]:
    # Leading integer scalars before dynamic arguments are how JAX passed dimension variables,
    # but a program may just as well compute with them. Where no reading of them as sizes
    # refines (a size the program negates, say), they are data: no values, and the program
    # is compiled for any values, with its run-time checks.
    if len(sizes) <= 1:
        values = {i: (sizes[0] if sizes else 0) for i in dim_args}
        return values if _refines(module, values, types, filename, static=False) else {}
    fitting = []
    combos = itertools.product(sizes, repeat=len(dim_args))
    for combo in itertools.islice(combos, _MAX_ASSIGNMENTS):
        values = dict(zip(dim_args, combo))
        if _refines(module, values, types, filename, static=True):
            fitting.append(values)
    if not fitting:
        return {}
    if len(fitting) == 1:
        return fitting[0]
    shown = ", ".join(f"%arg{i}" for i in dim_args)
    raise KilnError(
        f"cannot tell the dimension arguments ({shown}) from the argument shapes: "
        f"{len(fitting)} assignments of the dynamic sizes {sizes} fit",
        location=filename,
        hint="give every dynamic dimension the same size, or export the program with static shapes")


def specialize(module: ir.Module, entry: str, arg_types: list[str], filename: str) -> dict[int, int]:
    """Give the entry the concrete argument types and propagate them through the program.
    Returns the values inferred for JAX's dimension arguments (index -> value): the caller
    must check that the values passed agree, since the compiled code no longer reads them."""
    func = find_entry(module, entry)
    if symbol_name(func) != "main":
        # stablehlo-refine-arguments works on @main only.
        func.attributes["sym_name"] = ir.StringAttr.get("main")
    inputs = list(function_type(func).inputs)
    types = ",".join(arg_types)
    dim_args = dimension_arguments(inputs)
    values = {}
    if dim_args:
        sizes = _dynamic_sizes(inputs[len(dim_args):], arg_types[len(dim_args):])
        values = _infer_values(module, dim_args, sizes, types, filename)
    from .bounded import drop_argument_bounds
    drop_argument_bounds(find_entry(module, "main"))  # f32[<=N] arguments: refined like `?`
    _refine(module, "main", values, types, filename)
    func = find_entry(module, "main")
    if symbol_name(func) != entry:
        func.attributes["sym_name"] = ir.StringAttr.get(entry)
    return values


# -- folding shape arithmetic -------------------------------------------------------------------
# JAX computes shapes with scalar integer StableHLO ops (remainder, compare, select...) that
# MLIR's canonicalizer does not fold and the bundled StableHLO has no folder pass for; left
# unfolded they keep ops such as real_dynamic_slice dynamic. Kiln folds small integer and
# boolean computations on constants itself, with StableHLO's semantics (wrapping arithmetic,
# truncating division; a division by zero or INT_MIN / -1 is left alone).
_FOLD_LIMIT = 64  # elements: shapes and indices, never data


def _np_dtype(element: ir.Type):
    import numpy as np
    if not isinstance(element, ir.IntegerType):
        return None
    if element.width == 1:
        return np.dtype(np.bool_)
    if element.width not in (8, 16, 32, 64):
        return None
    return np.dtype(f"{'u' if element.is_unsigned else 'i'}{element.width // 8}")


def _const_value(value: ir.Value):
    import numpy as np
    owner = value.owner
    if not isinstance(owner, ir.OpView) and not isinstance(owner, ir.Operation):
        return None
    op = owner.operation if hasattr(owner, "operation") else owner
    if op.name != "stablehlo.constant":
        return None
    ranked = _ranked(value.type)
    dtype = _np_dtype(ranked.element_type) if ranked is not None else None
    if dtype is None or not ranked.has_static_shape or np.prod(ranked.shape, dtype=np.int64) > _FOLD_LIMIT:
        return None
    attr = ir.DenseElementsAttr(op.attributes["value"])
    if attr.is_splat:
        return np.full(ranked.shape, _scalar(attr.get_splat_value()), dtype)
    return np.array(attr).astype(dtype).reshape(ranked.shape)


def _scalar(attr: ir.Attribute):
    if isinstance(attr, ir.BoolAttr):
        return attr.value
    return ir.IntegerAttr(attr).value


def _ints(op: ir.Operation, name: str) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


def _compute(op: ir.Operation, args: list, dtype):
    import numpy as np
    name = op.name[len("stablehlo."):]
    binary = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
              "maximum": np.maximum, "minimum": np.minimum, "and": np.logical_and if dtype == bool else np.bitwise_and,
              "or": np.logical_or if dtype == bool else np.bitwise_or,
              "xor": np.logical_xor if dtype == bool else np.bitwise_xor}
    if name in binary:
        return binary[name](args[0], args[1])
    if name in ("divide", "remainder"):
        a, b = args
        if (b == 0).any() or (dtype.kind == "i" and ((a == np.iinfo(dtype).min) & (b == -1)).any()):
            return None
        q = np.abs(a) // np.abs(b) * np.sign(a) * np.sign(b) if dtype.kind == "i" else a // b
        return q if name == "divide" else a - q * b
    if name == "negate":
        return np.negative(args[0])
    if name == "not":
        return np.logical_not(args[0]) if dtype == bool else np.invert(args[0])
    if name == "compare":
        direction = str(op.attributes["comparison_direction"]).split()[-1].rstrip(">")
        fn = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
              "GT": np.greater, "GE": np.greater_equal}[direction]
        return fn(args[0], args[1])
    if name == "select":
        return np.where(args[0], args[1], args[2])
    if name in ("convert", "reshape"):
        return args[0]
    if name == "broadcast_in_dim":
        shape = _ranked(op.results[0].type).shape
        dims = _ints(op, "broadcast_dimensions")
        expanded = [1] * len(shape)
        for i, d in enumerate(dims):
            expanded[d] = args[0].shape[i]
        return np.broadcast_to(args[0].reshape(expanded), shape)
    if name == "slice":
        return args[0][tuple(slice(s, e, k) for s, e, k in zip(
            _ints(op, "start_indices"), _ints(op, "limit_indices"), _ints(op, "strides")))]
    if name == "concatenate":
        return np.concatenate(args, axis=ir.IntegerAttr(op.attributes["dimension"]).value)
    return None


_FOLDABLE = {"add", "subtract", "multiply", "maximum", "minimum", "and", "or", "xor", "divide",
             "remainder", "negate", "not", "compare", "select", "convert", "reshape",
             "broadcast_in_dim", "slice", "concatenate"}


def fold_shape_arithmetic(module: ir.Module) -> bool:
    """Replace foldable ops whose operands are all small integer/boolean constants by
    constants. Returns whether anything changed."""
    import numpy as np
    changed = False
    for func in module.body.operations:
        for op in list(walk(func.operation)):
            if not op.name.startswith("stablehlo.") or op.name[len("stablehlo."):] not in _FOLDABLE \
                    or len(op.results) != 1:
                continue
            ranked = _ranked(op.results[0].type)
            dtype = _np_dtype(ranked.element_type) if ranked is not None else None
            if dtype is None or not ranked.has_static_shape:
                continue
            args = [_const_value(v) for v in op.operands]
            if not args or any(a is None for a in args):
                continue
            with np.errstate(all="ignore"):
                result = _compute(op, args, args[-1].dtype if op.name != "stablehlo.compare" else dtype)
            if result is None:
                continue
            with np.errstate(all="ignore"):
                result = np.asarray(result)
                result = (result != 0) if dtype == np.bool_ else result.astype(dtype)
            result = np.ascontiguousarray(result.reshape(ranked.shape))
            with ir.InsertionPoint(op), op.location:
                const = ir.Operation.create("stablehlo.constant", results=[op.results[0].type],
                                            attributes={"value": ir.DenseElementsAttr.get(
                                                result, type=op.results[0].type)})
            op.results[0].replace_all_uses_with(const.results[0])
            op.erase()
            changed = True
    return changed


def _defining(value: ir.Value):
    owner = value.owner
    return None if isinstance(owner, ir.Block) else owner.operation


def rewrite_offset_slices(module: ir.Module) -> bool:
    """real_dynamic_slice(x, start, start + sizes, 1) with constant `sizes` (what JAX emits for
    lax.dynamic_slice under shape polymorphism) is a dynamic_slice of static size: its result
    shape no longer depends on data once the dimension variables are known. Returns whether
    anything changed."""
    changed = False
    for func in module.body.operations:
        for op in list(walk(func.operation)):
            if op.name != "stablehlo.real_dynamic_slice":
                continue
            operand, start, limit, strides = op.operands
            add = _defining(limit)
            stride_values = _const_value(strides)
            if add is None or add.name != "stablehlo.add" or stride_values is None \
                    or not (stride_values == 1).all():
                continue
            lhs, rhs = add.operands
            sizes = _const_value(rhs) if lhs == start else _const_value(lhs) if rhs == start else None
            if sizes is None or (sizes < 0).any():
                continue
            operand_type = _ranked(operand.type)
            index_type = ir.RankedTensorType(start.type)
            with ir.InsertionPoint(op), op.location:
                scalar = ir.RankedTensorType.get([], index_type.element_type)
                one = ir.RankedTensorType.get([1], index_type.element_type)
                starts = []
                for d in range(len(sizes)):
                    piece = ir.Operation.create(
                        "stablehlo.slice", results=[one], operands=[start], attributes={
                            "start_indices": ir.DenseI64ArrayAttr.get([d]),
                            "limit_indices": ir.DenseI64ArrayAttr.get([d + 1]),
                            "strides": ir.DenseI64ArrayAttr.get([1])}).result
                    starts.append(ir.Operation.create("stablehlo.reshape", results=[scalar],
                                                      operands=[piece]).result)
                result_type = ir.RankedTensorType.get([int(n) for n in sizes],
                                                      operand_type.element_type)
                new = ir.Operation.create(
                    "stablehlo.dynamic_slice", results=[result_type], operands=[operand, *starts],
                    attributes={"slice_sizes": ir.DenseI64ArrayAttr.get([int(n) for n in sizes])})
            # Users see the refined type directly; stablehlo-refine-shapes then updates them
            # (and the function's result types) to match.
            op.results[0].replace_all_uses_with(new.result)
            op.erase()
            changed = True
            _retype_results(func.operation)
    return changed


def _retype_results(func: ir.Operation) -> None:
    """Make a function's result types those its return now returns (refined, never wider)."""
    if func.name != "func.func":
        return
    block = func.regions[0].blocks[0]
    ret = block.operations[len(block.operations) - 1].operation
    old = function_type(func)
    func.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(old.inputs, [v.type for v in ret.operands]))
