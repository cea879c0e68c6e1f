"""Transposes through shared memory (`kiln-gpu-tiled-transposes`; XLA: the transpose
emitter).

An all-parallel linalg.generic (a copy, or elementwise work) whose output's contiguous
dimension `x` is not its input's contiguous dimension `t` (a 2-D transpose, the last two
dimensions of a batched one, any permutation that moves the innermost dimension) would
have either its reads or its writes strided, one thread per element. Here a block of
32 x 8 threads moves a 32 x 32 tile of (t, x):
1. reads: threadIdx.x along t (consecutive threads, consecutive input addresses), four
   rows of x a thread, each transposed input's element into shared memory tile[x][t];
2. a barrier;
3. writes: threadIdx.x along x, four rows of t a thread, the body computed from
   tile[x][t] (and the other inputs, read where the output is) and stored coalesced.
The tile has 33 columns: threads of a warp reading a column of it hit 32 different banks.
Grid: (x tiles, t tiles, the other dimensions). Edges (extents not multiples of 32) are
guarded on both sides. Generics left to one thread per element (lowering/gpu/loops.py):
sides shorter than 16, inputs whose contiguous dimension is neither x nor t (broadcasts
along x read from a third dimension), i1 or complex elements.
"""
from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir
from torch_mlir.dialects import arith, gpu, memref, scf

from . import kernel_ir as k

TILE = 32
ROWS = 8              # threadIdx.y: each thread moves TILE / ROWS elements each way
PAD = 1               # tile columns past TILE: no bank conflicts reading a column
MIN_SIDE = 16         # a shorter side: the plain loops waste less


@dataclass
class _Transpose:
    g: k.Generic
    x: int                 # the output's contiguous dimension (threadIdx.x when writing)
    t: int                 # the transposed inputs' contiguous dimension (... when reading)
    tiled: list[int]       # the inputs staged in shared memory
    others: list[int]      # the remaining dimensions (blockIdx.z)


def tiled_transposes(module: ir.Module) -> None:
    k.rewrite_generics(module, _plan, _emit)


def _plan(op: ir.Operation) -> _Transpose | None:
    g = k.read_generic(op)
    if g is None or any(g.reduction) or not g.outs:
        return None
    x = g.innermost_dim(g.n_ins)
    if x is None:
        return None
    for o in range(g.n_ins, len(g.operands)):
        if g.innermost_dim(o) != x or any(g.operands[o] == v for v in g.ins):
            return None
    t, tiled = None, []
    for i in range(g.n_ins):
        if not list(g.maps[i].results):
            continue                    # a 0-d input: read by every thread
        d = g.innermost_dim(i)
        if d == x:
            continue                    # read where the output is written: coalesced
        if d is None or (t is not None and d != t):
            return None
        if not k.scalar_kind(ir.MemRefType(g.operands[i].type).element_type):
            return None
        t = d
        tiled.append(i)
    if t is None or min(g.extents[x], g.extents[t]) < MIN_SIDE:
        return None
    others = [d for d in range(len(g.extents)) if d not in (x, t)]
    if k.ceil_div(g.extents[t], TILE) > k.MAX_GRID_YZ \
            or k.product(g.extents[d] for d in others) > k.MAX_GRID_YZ:
        return None
    return _Transpose(g, x, t, tiled, others)


def _emit(p: _Transpose) -> None:
    g = p.g
    n_x, n_t = g.extents[p.x], g.extents[p.t]
    tiles = [k.workgroup_memref([TILE, TILE + PAD],
                                ir.MemRefType(g.operands[i].type).element_type)
             for i in p.tiled]
    grid = (k.ceil_div(n_x, TILE), k.ceil_div(n_t, TILE),
            k.product(g.extents[d] for d in p.others))
    args = g.op.regions[0].blocks[0].arguments
    with k.Launch(grid, (TILE, ROWS, 1), tiles) as launch:
        tx, ty = launch.thread_id[0], launch.thread_id[1]
        x0 = arith.muli(launch.block_id[0], k.c(TILE))
        t0 = arith.muli(launch.block_id[1], k.c(TILE))
        base: list = [None] * len(g.extents)
        for d, v in zip(p.others, k.delinearize(launch.block_id[2],
                                                [g.extents[d] for d in p.others])):
            base[d] = v

        def at(x_local: ir.Value, t_local: ir.Value):
            """Loop indices and whether they are inside the iteration space."""
            ivs = list(base)
            ivs[p.x], ivs[p.t] = arith.addi(x0, x_local), arith.addi(t0, t_local)
            inside = arith.andi(arith.cmpi(arith.CmpIPredicate.ult, ivs[p.x], k.c(n_x)),
                                arith.cmpi(arith.CmpIPredicate.ult, ivs[p.t], k.c(n_t)))
            return ivs, inside

        # 1. coalesced reads along t into tile[x][t]
        for j in range(TILE // ROWS):
            row = arith.addi(ty, k.c(j * ROWS)) if j else ty
            ivs, inside = at(row, tx)
            branch = scf.IfOp(inside)
            with ir.InsertionPoint(branch.then_block):
                for i, tile in zip(p.tiled, launch.shared):
                    value = memref.load(g.operands[i], k.indices(g.maps[i], ivs))
                    memref.store(value, tile, [row, tx])
                scf.YieldOp([])
        gpu.barrier()
        # 3. coalesced writes along x, from tile[x][t]
        for j in range(TILE // ROWS):
            row = arith.addi(ty, k.c(j * ROWS)) if j else ty
            ivs, inside = at(tx, row)
            branch = scf.IfOp(inside)
            with ir.InsertionPoint(branch.then_block):
                mapping = {}
                for i in range(g.n_ins):
                    if i in p.tiled:
                        tile = launch.shared[p.tiled.index(i)]
                        mapping[args[i]] = memref.load(tile, [tx, row])
                    else:
                        mapping[args[i]] = memref.load(g.operands[i],
                                                       k.indices(g.maps[i], ivs))
                for o in range(g.n_ins, len(g.operands)):
                    if k.body_uses(g, o):
                        mapping[args[o]] = memref.load(g.operands[o],
                                                       k.indices(g.maps[o], ivs))
                values = k.clone_body(g, mapping, ivs)
                for o, value in zip(range(g.n_ins, len(g.operands)), values):
                    memref.store(value, g.operands[o], k.indices(g.maps[o], ivs))
                scf.YieldOp([])
