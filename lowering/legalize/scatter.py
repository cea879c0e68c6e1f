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

from dataclasses import dataclass
from math import prod

from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo
from torch_mlir.dialects import arith, tensor

from ...errors import KilnError
from ..patterns import pattern_pass
from .loops import (IndexConstants, all_true, apply_region, delinearize, for_loop, if_else,
                    replace_op, static_tensor_type)

SGE, SLE = arith.CmpIPredicate.sge, arith.CmpIPredicate.sle


@dataclass
class ScatterGeometry:
    """Where a stablehlo.scatter's update elements go: its dimension numbers resolved against
    static shapes (shared with the GPU target's parallel scatter, lowering/gpu/scatter.py)."""
    shape: list[int]
    update_shape: list[int]
    index_rank: int
    window_dims: list[int]
    batching: list[int]
    index_batching: list[int]
    to_operand: list[int]
    index_vector_dim: int
    scatter_dims: list[int]         # the update's dimensions that are not window dimensions
    index_dims: list[int]           # the indices' dimensions paired with scatter_dims, in order
    operand_window_dims: list[int]  # the operand's dimensions the window spans
    window: list[int]               # the window's extent in each operand dimension

    @classmethod
    def read(cls, op: ir.Operation, shape: list[int], update_shape: list[int],
             index_rank: int) -> ScatterGeometry | None:
        """None when the dimension numbers do not fit the shapes."""
        dn = _stablehlo.ScatterDimensionNumbers(op.attributes["scatter_dimension_numbers"])
        rank, urank = len(shape), len(update_shape)
        window_dims = list(dn.update_window_dims)
        inserted = list(dn.inserted_window_dims)
        batching = list(dn.input_batching_dims)
        ivd = dn.index_vector_dim
        scatter_dims = [d for d in range(urank) if d not in window_dims]
        index_dims = [d for d in range(index_rank) if d != ivd]
        operand_window_dims = [d for d in range(rank) if d not in inserted and d not in batching]
        if len(operand_window_dims) != len(window_dims) or len(index_dims) != len(scatter_dims):
            return None
        window = [1] * rank
        for k, d in enumerate(operand_window_dims):
            window[d] = update_shape[window_dims[k]]
        return cls(list(shape), list(update_shape), index_rank, window_dims, batching,
                   list(dn.scatter_indices_batching_dims), list(dn.scattered_dims_to_operand_dims),
                   ivd, scatter_dims, index_dims, operand_window_dims, window)

    @property
    def scatter_shape(self) -> list[int]:
        return [self.update_shape[d] for d in self.scatter_dims]

    @property
    def window_shape(self) -> list[int]:
        return [self.update_shape[d] for d in self.window_dims]

    def start(self, index: IndexConstants, indices: ir.Value,
              scatter_coords: list[ir.Value]) -> list[ir.Value]:
        """The full start index in the operand (index(0) where it needs no arithmetic):
        scatter dims from the (i64) indices, batching dims from the scatter position."""
        c0 = index(0)
        start = [c0] * len(self.shape)
        for k, operand_dim in enumerate(self.to_operand):
            at = [index(k) if d == self.index_vector_dim else
                  scatter_coords[self.index_dims.index(d)] for d in range(self.index_rank)]
            start[operand_dim] = arith.index_cast(ir.IndexType.get(), tensor.extract(indices, at))
        for operand_dim, index_dim in zip(self.batching, self.index_batching):
            start[operand_dim] = scatter_coords[self.index_dims.index(index_dim)]
        return start

    def inside(self, index: IndexConstants, start: list[ir.Value]) -> ir.Value:
        """Whether the whole window at `start` lies inside the operand (XLA skips others)."""
        c0 = index(0)
        conditions = []
        for d, at in enumerate(start):
            if at == c0:
                continue
            conditions.append(arith.cmpi(SGE, at, c0))
            conditions.append(arith.cmpi(SLE, at, index(self.shape[d] - self.window[d])))
        return all_true(conditions)

    def operand_index(self, c0: ir.Value, start: list[ir.Value],
                      window_coords: list[ir.Value]) -> list[ir.Value]:
        at = list(start)
        for k, d in enumerate(self.operand_window_dims):
            at[d] = window_coords[k] if start[d] == c0 else arith.addi(start[d], window_coords[k])
        return at

    def update_index(self, scatter_coords: list[ir.Value],
                     window_coords: list[ir.Value]) -> list[ir.Value]:
        at: list[ir.Value | None] = [None] * len(self.update_shape)
        for k, d in enumerate(self.scatter_dims):
            at[d] = scatter_coords[k]
        for k, d in enumerate(self.window_dims):
            at[d] = window_coords[k]
        return at


def _lower(op: ir.Operation) -> None:
    n = len(op.results)
    operands = list(op.operands)
    inputs, indices, updates = operands[:n], operands[n], operands[n + 1:]
    input_types = [static_tensor_type(v, op) for v in inputs]
    update_types = [static_tensor_type(v, op) for v in updates]
    index_type = static_tensor_type(indices, op)
    index_shape = list(index_type.shape)
    geometry = ScatterGeometry.read(op, list(input_types[0].shape),
                                    list(update_types[0].shape), len(index_shape))
    if geometry is None:
        raise KilnError("stablehlo.scatter dimension numbers do not match the operand shapes",
                        location=str(op.location), hint="check the op against the spec's constraints")
    window_shape = geometry.window_shape
    positions = prod(geometry.scatter_shape)

    if positions == 0 or prod(window_shape) == 0:
        replace_op(op, inputs)
        return

    elements = [t.element_type for t in input_types]
    with ir.InsertionPoint(op), op.location:
        index = IndexConstants()
        c0 = index(0)
        idx = indices
        i64 = ir.IntegerType.get_signless(64)
        if index_type.element_type != i64:
            # Signed and unsigned indices alike become i64 (huge unsigned values turn negative
            # and are skipped as out of bounds, which they are).
            idx = ir.Operation.create("stablehlo.convert", operands=[indices], results=[
                ir.RankedTensorType.get(index_shape, i64)]).result

        def position(p: ir.Value, accs: list[ir.Value]) -> list[ir.Value]:
            scatter_coords = delinearize(index, p, geometry.scatter_shape)
            start = geometry.start(index, idx, scatter_coords)

            def window_position(w: ir.Value, accs: list[ir.Value]) -> list[ir.Value]:
                window_coords = delinearize(index, w, window_shape)
                operand_index = geometry.operand_index(c0, start, window_coords)
                update_index = geometry.update_index(scatter_coords, window_coords)
                olds = [tensor.extract(acc, operand_index) for acc in accs]
                news = [tensor.extract(u, update_index) for u in updates]
                combined = apply_region(op.regions[0], olds + news, elements)
                return [tensor.insert(v, acc, operand_index) for v, acc in zip(combined, accs)]

            def update() -> list[ir.Value]:
                return for_loop(c0, index(prod(window_shape)), index(1), accs, window_position,
                                scalarize=True)

            return if_else(geometry.inside(index, start), [a.type for a in accs], update,
                           lambda: accs)

        results = for_loop(c0, index(positions), index(1), inputs, position)
    replace_op(op, results)


lower_scatters = pattern_pass({"stablehlo.scatter": _lower})
