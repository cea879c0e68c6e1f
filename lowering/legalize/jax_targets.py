"""The custom calls JAX emits on CPU that are ops rather than library calls, lowered to
StableHLO before `kiln-lower-custom-calls` sees them:

* `ApproxTopK` and `stablehlo.dynamic_approx_top_k` (`lax.approx_max_k` / `approx_min_k`):
  operands `inputs..., init_values...` (then, for the dynamic form, `k` and shape operands),
  a comparator in `called_computations`, `reduction_dim` in `mhlo.backend_config`. Exact top-k
  is a valid answer on CPU (XLA:CPU gives it too): a stable `stablehlo.sort` of the inputs along
  `reduction_dim` whose comparator calls the given one (the `inline` pass after this one folds
  the call in), sliced to the result's size there. The init values only pad for the
  approximate algorithm and are unused.
* `stablehlo.dynamic_rng_bit_generator(state, shape)`: once shape refinement made the output
  static, `stablehlo.rng_bit_generator` with the same `rng_algorithm`.
* `annotate_device_placement` (memory kinds, `jax.device_put(..., memory_kind=...)`), and
  `Sharding` / `SPMDFullToShardShape` / `SPMDShardToFullShape`: on one CPU device these are
  the identity on their operands.
* `shape_assertion(pred, args...)` {error_message}: the checks shape-polymorphic exports make
  of their dimension arguments. A predicate that folded to a constant is decided here (true:
  dropped; false: a KilnError with the message, formatted with the arguments' values, at the
  op's location). Otherwise it stays a call of the built-in Python target `shape_assertion`
  (python/kiln/runtime/jax_checks.py), which raises the same error when run, with the error
  message passed as the call's string backend_config.
* `mhlo.erf`, `mhlo.topk` and the other `mhlo.*` ops StableHLO lacks (what torch_xla and
  TensorFlow write): ops of the same meaning that Kiln lowers (mhlo_targets.py).
"""
from __future__ import annotations

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import func

from ...errors import KilnError
from ...runtime.jax_checks import format_assertion
from ..ir_util import constant_ints
from ..patterns import pattern_pass
from . import mhlo_targets
from .hlo_builder import HloBuilder, replace_op

_IDENTITY_TARGETS = {"annotate_device_placement", "Sharding", "SPMDFullToShardShape",
                     "SPMDShardToFullShape"}


def _target(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["call_target_name"]).value


def _where(op: ir.Operation) -> str:
    return str(op.location)


def _backend_config(op: ir.Operation) -> dict[str, ir.Attribute]:
    if "mhlo.backend_config" not in op.attributes:
        return {}
    attr = op.attributes["mhlo.backend_config"]
    if not isinstance(attr, ir.DictAttr):
        return {}
    return {named.name: named.attr for named in attr}


def _static(t: ir.Type, op: ir.Operation, what: str) -> ir.RankedTensorType:
    ranked = ir.RankedTensorType(t)
    if not ranked.has_static_shape:
        raise KilnError(f"custom call '{_target(op)}': {what} has a dynamic shape ({t})",
                        location=_where(op),
                        hint="export with concrete shapes, or call with arguments whose shapes "
                             "let shape refinement make it static")
    return ranked


# -- ApproxTopK ----------------------------------------------------------------------------------
def _comparator(op: ir.Operation) -> str:
    called = ir.ArrayAttr(op.attributes["called_computations"]) \
        if "called_computations" in op.attributes else []
    if len(called) != 1:
        raise KilnError(f"custom call '{_target(op)}' needs one comparator in "
                        f"called_computations, found {len(called)}", location=_where(op),
                        hint="JAX's approx_max_k names one, e.g. @top_k_gt_f32_comparator")
    return ir.FlatSymbolRefAttr(called[0]).value


def _lower_approx_top_k(op: ir.Operation) -> None:
    config = _backend_config(op)
    if "reduction_dim" not in config:
        raise KilnError(f"custom call '{_target(op)}' has no reduction_dim in its "
                        "mhlo.backend_config", location=_where(op),
                        hint="JAX writes it as reduction_dim = <i64>")
    n = len(op.results)
    inputs = list(op.operands)[:n]
    types = [_static(v.type, op, f"input {i}") for i, v in enumerate(inputs)]
    outs = [_static(r.type, op, f"result {i}") for i, r in enumerate(op.results)]
    rank = len(types[0].shape)
    dim = int(ir.IntegerAttr(config["reduction_dim"]).value)
    if dim < 0:
        dim += rank
    if not 0 <= dim < rank or any(list(t.shape) != list(types[0].shape) for t in types):
        raise KilnError(f"custom call '{_target(op)}': reduction_dim {dim} does not fit inputs "
                        f"of shapes {[list(t.shape) for t in types]}", location=_where(op),
                        hint="every input has the same shape; reduction_dim is one of its dims")
    k = outs[0].shape[dim]
    if k > types[0].shape[dim]:
        raise KilnError(f"custom call '{_target(op)}': {k} results from a dimension of size "
                        f"{types[0].shape[dim]}", location=_where(op))
    comparator = _comparator(op)
    scalars = [ir.RankedTensorType.get([], t.element_type) for t in types]
    sort = ir.Operation.create(
        "stablehlo.sort", results=list(types), operands=inputs,
        attributes={"dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim),
                    "is_stable": ir.BoolAttr.get(True)},
        regions=1, loc=op.location, ip=ir.InsertionPoint(op))
    # The comparator takes (lhs_0, rhs_0, lhs_1, rhs_1, ...), as sort's region does.
    block = sort.regions[0].blocks.append(*[s for s in scalars for _ in (0, 1)])
    with ir.InsertionPoint(block), op.location:
        pred = ir.RankedTensorType.get([], ir.IntegerType.get_signless(1))
        call = func.CallOp([pred], ir.FlatSymbolRefAttr.get(comparator), list(block.arguments))
        ir.Operation.create("stablehlo.return", operands=[call.result])
    with ir.InsertionPoint(op), op.location:
        h = HloBuilder()
        values = []
        for sorted_value, out in zip(sort.results, outs):
            limit = list(out.shape)
            values.append(h.slice(sorted_value, [0] * rank, limit))
    replace_op(op, values)


# -- the rest ------------------------------------------------------------------------------------
def _lower_dynamic_rng(op: ir.Operation) -> None:
    out = ir.RankedTensorType(op.results[1].type)
    if not out.has_static_shape:
        # Shape refinement leaves custom-call results alone, but it folds the shape operand:
        # read the output shape there. Its users accept the static type (it refines theirs).
        dims = constant_ints(op.operands[1])
        if dims is None or len(dims) != out.rank or any(
                not out.is_dynamic_dim(i) and out.shape[i] != d for i, d in enumerate(dims)):
            _static(out, op, "the output")
        out = ir.RankedTensorType.get(dims, out.element_type)
    attributes = {"rng_algorithm": op.attributes["rng_algorithm"]
                  if "rng_algorithm" in op.attributes
                  else ir.Attribute.parse("#stablehlo<rng_algorithm DEFAULT>")}
    generated = ir.Operation.create("stablehlo.rng_bit_generator",
                                    results=[op.results[0].type, out],
                                    operands=[op.operands[0]], attributes=attributes,
                                    loc=op.location, ip=ir.InsertionPoint(op))
    replace_op(op, list(generated.results))


def _constant_value(value: ir.Value):
    """The value of a constant scalar (or splat) tensor, else None."""
    owner = value.owner
    if not isinstance(owner, ir.OpView) or owner.operation.name not in (
            "stablehlo.constant", "arith.constant"):
        return None
    attr = owner.operation.attributes["value"]
    if not isinstance(attr, ir.DenseElementsAttr) or not attr.is_splat:
        return None
    value = attr.get_splat_value()
    if isinstance(value, ir.BoolAttr):
        return bool(value.value)
    if isinstance(value, ir.IntegerAttr):
        return int(value.value)
    return None


def _lower_shape_assertion(op: ir.Operation) -> bool:
    if "error_message" not in op.attributes:
        raise KilnError("custom call 'shape_assertion' has no error_message", location=_where(op),
                        hint="JAX's shape-polymorphic exports always give one")
    message = ir.StringAttr(op.attributes["error_message"]).value
    if not len(op.operands):
        raise KilnError("custom call 'shape_assertion' has no predicate operand",
                        location=_where(op))
    holds = _constant_value(op.operands[0])
    if holds is None:
        # Decided at run time: the call stays, with the message where the Python target
        # (python/kiln/runtime/jax_checks.py) reads it.
        if "backend_config" in op.attributes and \
                ir.StringAttr(op.attributes["backend_config"]).value == message:
            return False
        op.attributes["backend_config"] = ir.StringAttr.get(message)
        op.attributes["api_version"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 2)
        return None
    if holds:
        replace_op(op, [])
        return None
    values = [_constant_value(v) for v in list(op.operands)[1:]]
    raise KilnError(format_assertion(message, ["?" if v is None else v for v in values])
                    if None not in values else message, location=_where(op),
                    hint="the arguments' shapes break the export's shape-polymorphism "
                         "constraints")


def _lower(op: ir.Operation) -> bool | None:
    with op.location:
        return _lower_at(op, _target(op))


def _lower_at(op: ir.Operation, name: str) -> bool | None:
    if name in ("ApproxTopK", "stablehlo.dynamic_approx_top_k"):
        _lower_approx_top_k(op)
    elif name == "stablehlo.dynamic_rng_bit_generator":
        _lower_dynamic_rng(op)
    elif name in _IDENTITY_TARGETS:
        if len(op.operands) != len(op.results):
            raise KilnError(f"custom call '{name}' has {len(op.operands)} operands and "
                            f"{len(op.results)} results", location=_where(op),
                            hint="on one device it must pass its operands through unchanged")
        replace_op(op, list(op.operands))
    elif name == "shape_assertion":
        return _lower_shape_assertion(op)
    elif name in mhlo_targets.TARGETS:
        replace_op(op, mhlo_targets.lower(op, name))
    else:
        return False
    return None


lower_jax_custom_calls = pattern_pass({"stablehlo.custom_call": _lower})
