"""Column reductions as tiled block reductions (`kiln-gpu-column-reductions`; XLA: the
column-reduction emitter).

A column reduction reduces dimensions that stride through memory while the inputs'
contiguous dimension is one the output keeps (a sum over axis 0 of a 4096x1000 array). One
thread per output element would read each column alone; here a block covers 32 output
columns and splits the reduced elements between its rows of threads:
- block (32, Y): threadIdx.x picks the column (a warp reads 32 consecutive addresses),
  threadIdx.y the reduced elements y, y + Y, y + 2Y, ... (Y = 8, or 32 for long columns);
  grid (columns / 32, the output's other elements);
- each thread starts from its first element (no identity needed: there are at least Y
  reduced elements), writes its partial to shared memory [Y][32], a barrier, and row 0
  combines the Y partials of its column in order and combines them into the output element
  (which holds the reduction's initial value).
- when that makes fewer than 256 blocks (a GPU has 100+ SMs) and the columns are long, they
  are cut into slices of at least 256 elements, one slice per blockIdx.z: the first launch
  writes each slice's partials to a buffer [slices][outputs], and a second launch reduces
  those the same way into the output (XLA splits such reductions in two, too).
Generics left to one thread per output (lowering/gpu/loops.py): fewer than 32 reduced
elements, several accumulators, a body the combiner split (reductions.split_body) rejects.
"""
from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir
from torch_mlir.dialects import arith, gpu, memref, scf

from ..codegen.builders import uses_dim
from ..ir_util import clone_ops
from . import kernel_ir as k
from .reductions import Packing, ReductionBody, split_body

COLUMNS = 32          # output columns a block covers (threadIdx.x)
MIN_REDUCED = 32      # fewer reduced elements: one thread per output is as good
LONG = 1024           # columns at least this long get 32 rows of threads, not 8
ROWS, ROWS_LONG = 8, 32
FEW_BLOCKS = 256      # fewer blocks than this (an H100 has 132 SMs): slice long columns
MIN_SLICE = 256       # ... into slices of at least this many elements


@dataclass
class _Columns:
    g: k.Generic
    body: ReductionBody
    column: int            # the dimension on threadIdx.x (the output's contiguous one)
    others: list[int]      # the output's other dimensions (blockIdx.y)
    reduced: list[int]     # the reduction dimensions, outermost first

    @property
    def reduced_count(self) -> int:
        return k.product(self.g.extents[d] for d in self.reduced)


def column_reductions(module: ir.Module) -> None:
    k.rewrite_generics(module, _plan, _emit)


def _plan(op: ir.Operation) -> _Columns | None:
    g = k.read_generic(op)
    if g is None or len(g.outs) != 1 or g.n_ins < 1 or any(v == g.outs[0] for v in g.ins):
        return None
    reduced = [d for d, r in enumerate(g.reduction) if r]
    parallel = [d for d, r in enumerate(g.reduction) if not r]
    if not reduced or not parallel:
        return None
    out_map = g.maps[-1]
    if any(uses_dim(e, d) for e in out_map.results for d in reduced):
        return None
    column = g.innermost_dim(g.n_ins)
    if column is None or g.reduction[column]:
        return None
    # the inputs' contiguous dimension is the output's (a column reduction, not a row one)
    if g.innermost_dim(0) != column:
        return None
    for i in range(g.n_ins):
        results = list(g.maps[i].results)
        if results and any(uses_dim(results[-1], d) for d in reduced):
            return None
    others = [d for d in parallel if d != column]
    if k.product(g.extents[d] for d in others) > k.MAX_GRID_YZ:
        return None
    if k.product(g.extents[d] for d in reduced) < MIN_REDUCED:
        return None
    body = split_body(op, g.extents, g.n_ins)
    if body is None or not k.scalar_kind(body.acc.type):
        return None
    return _Columns(g, body, column, others, reduced)


def _slices(p: _Columns, rows: int) -> tuple[int, int] | None:
    """(slices, elements a slice) when too few blocks would cover the columns: long
    columns are cut into slices, each on its own blocks (grid.z), reduced in two passes."""
    blocks = k.ceil_div(p.g.extents[p.column], COLUMNS) * k.product(
        p.g.extents[d] for d in p.others)
    count = p.reduced_count
    if blocks >= FEW_BLOCKS or count < 2 * MIN_SLICE:
        return None
    slices = min(k.ceil_div(FEW_BLOCKS, blocks), count // MIN_SLICE, k.MAX_GRID_YZ)
    chunk = k.ceil_div(k.ceil_div(count, slices), rows) * rows   # whole rows of threads
    slices = k.ceil_div(count, chunk)
    if count - (slices - 1) * chunk < rows:   # every thread of the last slice needs one
        slices -= 1                           # (the last slice takes the rest)
    return (slices, chunk) if slices > 1 else None


def _emit(p: _Columns) -> None:
    g, body = p.g, p.body
    count = p.reduced_count
    rows = ROWS_LONG if count >= LONG else ROWS
    outputs = k.product(g.extents[d] for d in p.others) * g.extents[p.column]
    split = _slices(p, rows)
    args = g.op.regions[0].blocks[0].arguments

    def from_inputs(r: ir.Value, ivs: list, constants: dict) -> ir.Value:
        at = list(ivs)
        for d, v in zip(p.reduced, k.delinearize(r, [g.extents[d] for d in p.reduced])):
            at[d] = v
        mapping = dict(constants)
        for i in range(g.n_ins):
            mapping[args[i]] = memref.load(g.operands[i], k.indices(g.maps[i], at))
        k.clone_body_ops(body.element_ops, mapping, at)
        return mapping[body.element]

    def into_output(total: ir.Value, ivs: list, flat, combine) -> None:
        place = k.indices(g.maps[-1], ivs)
        old = memref.load(g.outs[0], place)
        memref.store(combine(total, old), g.outs[0], place)

    if split is None:
        _kernel(p, rows, 1, count, count, from_inputs, into_output)
        return
    slices, chunk = split
    # pass 1: each slice's partial per output element; pass 2: the slices' partials
    partials = memref.alloc(ir.MemRefType.get([slices, outputs], body.acc.type), [], [])

    def into_partials(total, ivs, flat, combine) -> None:
        memref.store(total, partials, [flat[1], flat[0]])

    def from_partials(r, ivs, constants) -> ir.Value:
        return memref.load(partials, [r, flat_of(ivs)])

    def flat_of(ivs) -> ir.Value:
        linear = k.c(0)
        for d in p.others + [p.column]:
            linear = arith.addi(arith.muli(linear, k.c(g.extents[d])), ivs[d])
        return linear

    _kernel(p, rows, slices, chunk, count, from_inputs, into_partials, flat_of)
    _kernel(p, min(ROWS, 1 << (slices.bit_length() - 1)), 1, slices, slices, from_partials,
            into_output)


def _kernel(p: _Columns, rows: int, slices: int, chunk: int, count: int, element_at, finish,
            flat_of=None) -> None:
    """One launch: blocks of COLUMNS x rows threads over the output's columns (grid.x), its
    other elements (grid.y) and `slices` slices of `chunk` reduced elements (grid.z, the
    last one up to `count`). `element_at(r, ivs, constants)` is reduced element r;
    `finish(total, ivs, (flat index, slice), combine)` stores a column's result."""
    g, body = p.g, p.body
    n_columns = g.extents[p.column]
    packing = Packing(body.acc.type)
    grid = (k.ceil_div(n_columns, COLUMNS), k.product(g.extents[d] for d in p.others), slices)
    with k.Launch(grid, (COLUMNS, rows, 1), [k.workgroup_memref([rows, COLUMNS],
                                                                 packing.packed)]) as launch:
        (partials,) = launch.shared
        tx, ty = launch.thread_id[0], launch.thread_id[1]
        constants: dict = {}
        clone_ops(body.constant_ops, constants, ir.InsertionPoint.current)
        col = arith.addi(arith.muli(launch.block_id[0], k.c(COLUMNS)), tx)
        inside = arith.cmpi(arith.CmpIPredicate.ult, col, k.c(n_columns))
        ivs: list = [None] * len(g.extents)
        ivs[p.column] = col
        for d, v in zip(p.others, k.delinearize(launch.block_id[1],
                                                [g.extents[d] for d in p.others])):
            ivs[d] = v

        def combine(value: ir.Value, accumulator: ir.Value) -> ir.Value:
            mapping = dict(constants)
            mapping[body.element], mapping[body.acc] = value, accumulator
            clone_ops(body.combine_ops, mapping, ir.InsertionPoint.current)
            return mapping[body.result]

        # each thread: its slice's elements ty, ty + rows, ... (every thread has one)
        if slices > 1:
            z = launch.block_id[2]
            begin = arith.muli(z, k.c(chunk))
            last = arith.cmpi(arith.CmpIPredicate.eq, z, k.c(slices - 1))
            end = arith.select(last, k.c(count), arith.addi(begin, k.c(chunk)))
            first = arith.addi(begin, ty)
        else:
            end, first = k.c(count), ty
        mine = scf.IfOp(inside, [body.acc.type], has_else=True)
        with ir.InsertionPoint(mine.then_block):
            partial = element_at(first, ivs, constants)
            if chunk > rows or slices > 1:
                loop = scf.ForOp(arith.addi(first, k.c(rows)), end, k.c(rows), [partial])
                with ir.InsertionPoint(loop.body):
                    scf.YieldOp([combine(element_at(loop.induction_variable, ivs, constants),
                                         loop.inner_iter_args[0])])
                partial = loop.results[0]
            scf.YieldOp([partial])
        with ir.InsertionPoint(mine.else_block):
            scf.YieldOp([packing.zero()])
        memref.store(packing.pack(mine.results[0]), partials, [ty, tx])
        gpu.barrier()
        # row 0: the column's partials in order, then into the output element
        first_row = arith.cmpi(arith.CmpIPredicate.eq, ty, k.c(0))
        write = scf.IfOp(arith.andi(first_row, inside))
        with ir.InsertionPoint(write.then_block):
            total = packing.unpack(memref.load(partials, [k.c(0), tx]))
            if rows > 1:
                loop = scf.ForOp(k.c(1), k.c(rows), k.c(1), [total])
                with ir.InsertionPoint(loop.body):
                    other = packing.unpack(memref.load(partials,
                                                       [loop.induction_variable, tx]))
                    scf.YieldOp([combine(other, loop.inner_iter_args[0])])
                total = loop.results[0]
            flat = (flat_of(ivs), launch.block_id[2]) if flat_of else None
            finish(total, ivs, flat, combine)
            scf.YieldOp([])
