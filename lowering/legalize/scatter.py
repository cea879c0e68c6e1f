"""stablehlo.scatter -> scf loops over tensors (upstream has no lowering).

Semantics (XLA's, which the JAX-generated conformance data follows): the updates are applied
one update-scatter index at a time, in row-major order, so duplicate indices combine
sequentially through the update computation (exact for any region, commutative or not).
An update whose whole window does not fit inside the operand is skipped entirely, as XLA
does. (The StableHLO reference interpreter instead applies the in-bounds part of such a
window, element by element; the two agree whenever windows are wholly in or out.)

The loop nest, for N operands/updates:

    for p in update scatter positions:            # iter_args: the N results
      start = full start index (scatter dims from the indices, batching dims from p)
      if 0 <= start[d] <= dim[d] - window[d] for all d:
        for w in window positions:                # marked kiln.scalarize
          x_i = results_i[start + w];  u_i = updates_i[p, w]
          results_i[start + w] = update_computation(x..., u...)
"""
from __future__ import annotations

from math import prod

from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo

from ...errors import KilnError
from ..ir_util import walk
from .data_movement import SCALARIZE_ATTR, Text, replace_with_helper, tensor_type, type_text


def lower_scatters(module: ir.Module) -> None:
    for op in [o for o in walk(module.operation) if o.name == "stablehlo.scatter"]:
        _lower(op)


def _lower(op: ir.Operation) -> None:
    n = len(op.results)
    operands = list(op.operands)
    inputs, indices, updates = operands[:n], operands[n], operands[n + 1:]
    input_types = [tensor_type(v, op) for v in inputs]
    update_types = [tensor_type(v, op) for v in updates]
    index_type = tensor_type(indices, op)
    dn = _stablehlo.ScatterDimensionNumbers(op.attributes["scatter_dimension_numbers"])

    shape = list(input_types[0].shape)
    update_shape = list(update_types[0].shape)
    index_shape = list(index_type.shape)
    rank, urank, irank = len(shape), len(update_shape), len(index_shape)
    window_dims = list(dn.update_window_dims)
    inserted = list(dn.inserted_window_dims)
    batching = list(dn.input_batching_dims)
    index_batching = list(dn.scatter_indices_batching_dims)
    to_operand = list(dn.scattered_dims_to_operand_dims)
    ivd = dn.index_vector_dim

    scatter_dims = [d for d in range(urank) if d not in window_dims]
    index_dims = [d for d in range(irank) if d != ivd]  # pair up with scatter_dims, in order
    operand_window_dims = [d for d in range(rank) if d not in inserted and d not in batching]
    if len(operand_window_dims) != len(window_dims) or len(index_dims) != len(scatter_dims):
        raise KilnError("stablehlo.scatter dimension numbers do not match the operand shapes",
                        location=str(op.location), hint="check the op against the spec's constraints")
    window = [1] * rank
    for k, d in enumerate(operand_window_dims):
        window[d] = update_shape[window_dims[k]]
    window_shape = [update_shape[d] for d in window_dims]
    positions = prod(update_shape[d] for d in scatter_dims)

    if positions == 0 or prod(window_shape) == 0:
        for result, value in zip(op.results, inputs):
            result.replace_all_uses_with(value)
        op.erase()
        return

    t = Text("sc")
    elements = [str(it.element_type) for it in input_types]
    result_types = [type_text(shape, e) for e in elements]
    args = [f"%in{i}: {result_types[i]}" for i in range(n)]
    args.append(f"%idx: {type_text(index_shape, index_type.element_type)}")
    args += [f"%up{i}: {type_text(update_shape, elements[i])}" for i in range(n)]

    body = t.lines
    idx = "%idx"
    if str(index_type.element_type) != "i64":
        # Signed and unsigned indices alike become i64 (huge unsigned values turn negative
        # and are skipped as out of bounds, which they are).
        idx = t.op(f"stablehlo.convert %idx : ({type_text(index_shape, index_type.element_type)})"
                   f" -> {type_text(index_shape, 'i64')}")
    idx_type = type_text(index_shape, "i64")

    accs = [t.fresh("acc") for _ in range(n)]
    p = t.fresh("p")
    loop_results = t.fresh("res")
    iter_args = ", ".join(f"{a} = %in{i}" for i, a in enumerate(accs))
    types = ", ".join(result_types)
    t.emit(f"{loop_results}:{n} = scf.for {p} = {t.index(0)} to {t.index(positions)} "
           f"step {t.index(1)} iter_args({iter_args}) -> ({types}) {{")
    scatter_coords = t.delinearize(p, [update_shape[d] for d in scatter_dims])

    # The full start index in the operand.
    start = [t.index(0)] * rank
    for k, operand_dim in enumerate(to_operand):
        coords = []
        for d in range(irank):
            coords.append(t.index(k) if d == ivd else scatter_coords[index_dims.index(d)])
        value = t.op(f"tensor.extract {idx}[{', '.join(coords)}] : {idx_type}")
        start[operand_dim] = t.op(f"arith.index_cast {value} : i64 to index")
    for operand_dim, index_dim in zip(batching, index_batching):
        start[operand_dim] = scatter_coords[index_dims.index(index_dim)]

    conditions = []
    for d in range(rank):
        if start[d] == t.index(0):
            continue
        conditions.append(t.op(f"arith.cmpi sge, {start[d]}, {t.index(0)} : index"))
        conditions.append(t.op(f"arith.cmpi sle, {start[d]}, {t.index(shape[d] - window[d])} : index"))
    in_bounds = t.all_true(conditions)

    updated = t.fresh("upd")
    t.emit(f"{updated}:{n} = scf.if {in_bounds} -> ({types}) {{")
    accs2 = [t.fresh("acc") for _ in range(n)]
    w = t.fresh("w")
    inner = t.fresh("inner")
    iter_args = ", ".join(f"{a} = {b}" for a, b in zip(accs2, accs))
    t.emit(f"{inner}:{n} = scf.for {w} = {t.index(0)} to {t.index(prod(window_shape))} "
           f"step {t.index(1)} iter_args({iter_args}) -> ({types}) {{")
    window_coords = t.delinearize(w, window_shape)
    operand_index = list(start)
    for k, d in enumerate(operand_window_dims):
        operand_index[d] = window_coords[k] if start[d] == t.index(0) else t.add(start[d], window_coords[k])
    update_index = [""] * urank
    for k, d in enumerate(scatter_dims):
        update_index[d] = scatter_coords[k]
    for k, d in enumerate(window_dims):
        update_index[d] = window_coords[k]
    oi, ui = ", ".join(operand_index), ", ".join(update_index)
    olds = [t.op(f"tensor.extract {accs2[i]}[{oi}] : {result_types[i]}") for i in range(n)]
    news = [t.op(f"tensor.extract %up{i}[{ui}] : {type_text(update_shape, elements[i])}")
            for i in range(n)]
    combined = t.apply_region(0, olds + news, list(elements) * 2, list(elements))
    stored = []
    for i in range(n):
        stored.append(t.op(f"tensor.insert {combined[i]} into {accs2[i]}[{oi}] : {result_types[i]}"))
    t.emit(f"scf.yield {', '.join(stored)} : {types}")
    t.emit(f"}} {{{SCALARIZE_ATTR}}}")
    t.emit(f"scf.yield {', '.join(f'{inner}#{i}' for i in range(n))} : {types}")
    t.emit("} else {")
    t.emit(f"scf.yield {', '.join(accs)} : {types}")
    t.emit("}")
    t.emit(f"scf.yield {', '.join(f'{updated}#{i}' for i in range(n))} : {types}")
    t.emit("}")

    text = (f"func.func private @kiln_scatter({', '.join(args)}) -> ({types}) {{\n"
            + "\n".join(t.constant_lines() + body)
            + f"\nreturn {', '.join(f'{loop_results}#{i}' for i in range(n))} : {types}\n}}")
    replace_with_helper(op, text, inputs + [indices] + updates, [op.regions[0]])
