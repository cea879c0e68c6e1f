"""The `mhlo.*` custom calls: ops MHLO has and StableHLO lacks, which the MHLO -> StableHLO
legalization writes as `stablehlo.custom_call @mhlo.<op>` with the op's attributes in the
dictionary `mhlo.attributes` (and `mhlo.version = 1`). torch_xla, TensorFlow and XLA's
HLO -> StableHLO export go through it: torch_xla's GELU and nn.TransformerEncoder call
`@mhlo.erf`, `torch.topk` becomes `@mhlo.topk`.

The bundled MLIR has no CHLO dialect (Kiln converts CHLO input through jaxlib, which a
torch_xla user need not have), so each target becomes ops Kiln lowers already:

    mhlo.erf, acos, acosh, asin, asinh, atanh, cosh, sinh (floats): a linalg.generic applying
      the `math` op of that name (f16/bf16 computed in f32 and rounded once), which fuses with
      its elementwise neighbours and finally calls the C library (erff, acoshf...);
    mhlo.tan (floats and complex): stablehlo.tan;
    mhlo.topk {k, largest = true}: values and i32 indices of the k largest along the last
      dimension: a stable stablehlo.sort of (operand, iota) by the values in total order (NaN
      first, ties keep the lower index, as XLA's TopK), sliced to k, which kiln-lower-top-k
      turns into an O(n) selection.

A topk with largest = false (MHLO defines none) or a complex operand of the math ops is a
located error; any other `mhlo.` target falls through to the runtime's target lookup, whose
error names it.
"""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import tensor

from ...errors import KilnError
from .hlo_builder import (HloBuilder, comparison_direction, comparison_type, element, shape,
                          tensor_of)

_LIBM = {"erf", "acos", "acosh", "asin", "asinh", "atanh", "cosh", "sinh"}
TARGETS = frozenset({f"mhlo.{name}" for name in _LIBM} | {"mhlo.tan", "mhlo.topk"})


def _target(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["call_target_name"]).value


def _attributes(op: ir.Operation) -> dict[str, ir.Attribute]:
    if "mhlo.attributes" not in op.attributes:
        return {}
    attr = op.attributes["mhlo.attributes"]
    if not isinstance(attr, ir.DictAttr):
        raise KilnError(f"custom call '{_target(op)}': mhlo.attributes is not a dictionary",
                        location=str(op.location),
                        hint="MHLO's legalization writes the op's attributes as {name = value}")
    return {named.name: named.attr for named in attr}


def _static(value: ir.Value, op: ir.Operation, what: str) -> ir.RankedTensorType:
    t = value.type
    if not isinstance(t, ir.RankedTensorType) or not ir.RankedTensorType(t).has_static_shape:
        raise KilnError(f"custom call '{_target(op)}': {what} has a dynamic shape ({t})",
                        location=str(op.location),
                        hint="export with concrete shapes so the operand is static")
    return ir.RankedTensorType(t)


def _expect_arity(op: ir.Operation, operands: int, results: int) -> None:
    if len(op.operands) != operands or len(op.results) != results:
        raise KilnError(f"custom call '{_target(op)}' has {len(op.operands)} operand(s) and "
                        f"{len(op.results)} result(s)", location=str(op.location),
                        hint=f"the MHLO op it stands for takes {operands} and gives {results}")


def _as_declared(values: list[ir.Value], op: ir.Operation) -> list[ir.Value]:
    """The values in the call's declared result types (a dynamic declared type gets a
    tensor.cast; an incompatible one is the program's error)."""
    out = []
    for value, result in zip(values, op.results):
        if value.type != result.type:
            declared = result.type
            if not isinstance(declared, ir.RankedTensorType) or \
                    ir.RankedTensorType(declared).element_type != element(value) or \
                    ir.RankedTensorType(declared).rank != len(shape(value)) or any(
                        d != ir.ShapedType.get_dynamic_size() and d != n
                        for d, n in zip(ir.RankedTensorType(declared).shape, shape(value))):
                raise KilnError(f"custom call '{_target(op)}' declares result type {declared}, "
                                f"but the op gives {value.type}", location=str(op.location))
            value = tensor.CastOp(declared, value).result
        out.append(value)
    return out


def _elementwise_math(x: ir.Value, name: str) -> ir.Value:
    """linalg.generic { math.<name> } over x (f32 or f64; narrower floats computed in f32).
    The math op is pure, so fusion may copy it into consumers and drop the original; the
    pipeline's convert-math-to-libm makes it a call of the C library at the end."""
    h = HloBuilder()
    etype = element(x)
    compute = ir.F64Type.get() if str(etype) == "f64" else ir.F32Type.get()
    wide = h.convert(x, compute)
    dims = shape(x)
    init = tensor.EmptyOp(list(dims), compute).result
    identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(len(dims)))
    parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
    generic = ir.Operation.create(
        "linalg.generic", results=[tensor_of(dims, compute)], operands=[wide, init],
        attributes={"indexing_maps": ir.ArrayAttr.get([identity, identity]),
                    "iterator_types": ir.ArrayAttr.get([parallel] * len(dims)),
                    "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 1])},
        regions=1)
    location = ir.Location.current
    block = generic.regions[0].blocks.append(compute, compute, arg_locs=[location, location])
    with ir.InsertionPoint(block):
        value = ir.Operation.create(f"math.{name}", results=[compute],
                                    operands=[block.arguments[0]]).result
        ir.Operation.create("linalg.yield", operands=[value])
    return h.convert(generic.result, etype)


def _unary(op: ir.Operation, name: str) -> list[ir.Value]:
    _expect_arity(op, 1, 1)
    x = op.operands[0]
    _static(x, op, "the operand")
    etype = element(x)
    allowed = (ir.FloatType, ir.ComplexType) if name == "tan" else (ir.FloatType,)
    if not isinstance(etype, allowed) or element(op.results[0]) != etype:
        kinds = "floating-point or complex" if name == "tan" else "floating-point"
        raise KilnError(f"custom call 'mhlo.{name}' on {x.type} -> {op.results[0].type}",
                        location=str(op.location),
                        hint=f"Kiln supports mhlo.{name} elementwise on {kinds} tensors")
    if name == "tan":
        return [HloBuilder().unary("tan", x)]
    return [_elementwise_math(x, name)]


def _top_k(op: ir.Operation) -> list[ir.Value]:
    _expect_arity(op, 1, 2)
    attributes = _attributes(op)
    if "k" not in attributes or not isinstance(attributes["k"], ir.IntegerAttr):
        raise KilnError("custom call 'mhlo.topk' has no integer k in mhlo.attributes",
                        location=str(op.location), hint="write mhlo.attributes = {k = 4 : i64}")
    largest = attributes.get("largest")
    if largest is not None and not (isinstance(largest, ir.BoolAttr) and ir.BoolAttr(largest).value):
        raise KilnError("custom call 'mhlo.topk' with largest = false", location=str(op.location),
                        hint="MHLO's top-k selects the largest elements; negate the operand "
                             "to select the smallest")
    x = op.operands[0]
    dims = list(_static(x, op, "the operand").shape)
    k = ir.IntegerAttr(attributes["k"]).value
    index_type = element(op.results[1]) if isinstance(op.results[1].type, ir.ShapedType) else None
    if not dims or not 0 <= k <= dims[-1] or not isinstance(index_type, ir.IntegerType):
        raise KilnError(f"custom call 'mhlo.topk': k = {k} of {x.type} -> "
                        f"({op.results[0].type}, {op.results[1].type})", location=str(op.location),
                        hint="k is at most the last dimension's size; indices are integers")
    etype = element(x)
    h = HloBuilder()
    dim = len(dims) - 1
    iota = h.iota(dims, dim, index_type)
    sort = ir.Operation.create(
        "stablehlo.sort", results=[x.type, iota.type], operands=[x, iota],
        attributes={"dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim),
                    "is_stable": ir.BoolAttr.get(True)}, regions=1)
    scalars = [tensor_of([], etype)] * 2 + [tensor_of([], index_type)] * 2
    location = ir.Location.current
    block = sort.regions[0].blocks.append(*scalars, arg_locs=[location] * 4)
    if isinstance(etype, ir.FloatType):
        kind = "TOTALORDER"
    elif isinstance(etype, ir.IntegerType) and ir.IntegerType(etype).is_unsigned:
        kind = "UNSIGNED"
    else:
        kind = "SIGNED"
    with ir.InsertionPoint(block):
        greater = ir.Operation.create(
            "stablehlo.compare", results=[tensor_of([], "i1")],
            operands=[block.arguments[0], block.arguments[1]],
            attributes={"comparison_direction": comparison_direction("GT"),
                        "compare_type": comparison_type(kind)}).result
        ir.Operation.create("stablehlo.return", operands=[greater])
    limit = dims[:-1] + [k]
    return [h.slice(sort.results[0], [0] * len(dims), limit),
            h.slice(sort.results[1], [0] * len(dims), limit)]


def lower(op: ir.Operation, target: str) -> list[ir.Value]:
    """Ops of the same meaning as custom call `op` (target one of TARGETS), built before it,
    in its declared result types."""
    name = target[len("mhlo."):]
    with ir.InsertionPoint(op), op.location:
        values = _top_k(op) if name == "topk" else _unary(op, name)
        return _as_declared(values, op)
