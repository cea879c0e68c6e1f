"""Contractions as shared-memory tiled kernels (`kiln-gpu-tiled-products`; XLA hands these
to cuBLAS or its Triton GEMM emitter).

After the shared legalize stage and `linalg-generalize-named-ops`, a matrix product is a
linalg.generic with two inputs A and B and one accumulating output C: dot_general's batch
dimensions are parallel dimensions both inputs read, its free dimensions parallel ones one
input reads (M: A's, N: B's, N holding C's contiguous dimension), its contracting
dimensions reductions (K). linalg.matmul, batch_matmul, dot_general with transposed
operands, and convolutions (linalg.conv_2d_* reads its input at `oh + kh`: an implicit
GEMM, M = batch x output pixels, N = output features, K = window x input features) all
have that form. The body is `combine(f(a, b), c)` (reductions.split_body): f32
multiply-add, f16/bf16 extended to f32 then multiply-add, integer products.

The kernel (grid: N / 64, M / 64, batch; block 16 x 16):
- a block computes a 64 x 64 tile of C; thread (x, y) owns rows y + 16i and columns x + 16j
  (i, j < 4): 16 accumulators in registers, starting from C's values (the reduction's
  initial value), so any combiner and any element type keeps linalg's meaning;
- K in steps of 16: each thread loads 4 elements of A's 64 x 16 tile and 4 of B's 16 x 64
  tile into shared memory (consecutive threads along whichever of the two dimensions is
  contiguous in that operand: coalesced reads), a barrier, 16 steps of 4 x 4 products from
  shared memory, a barrier;
- K % 16 left over: one more step with a shorter inner loop (K is static);
- rows or columns past M or N are loaded as zeros and never stored.
The tiles are padded to 65 columns: a k-contiguous operand's tile is written down a column,
and 65 words apart are 32 different banks. Contractions left to the loops (lowering/gpu/
loops.py, one thread per output element): M or N under 16, K under 8, a body reading
linalg.index, a parallel dimension C does not hold.
"""
from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir
from torch_mlir.dialects import arith, gpu, memref, scf

from ..codegen.builders import uses_dim
from ..ir_util import clone_ops
from . import kernel_ir as k
from .reductions import ReductionBody, split_body

TILE_M = TILE_N = 64
TILE_K = 16
THREADS = 16          # a block is THREADS x THREADS
REG = TILE_M // THREADS  # 4 x 4 accumulators a thread
PAD = 1
MIN_SIDE = 16
MIN_K = 8


@dataclass
class _Product:
    g: k.Generic
    body: ReductionBody
    a: int                   # the input index of A (reads M dims), B is 1 - a
    batch: list[int]
    m: list[int]             # outermost first, in C's order
    n: list[int]
    k: list[int]

    def extent(self, dims: list[int]) -> int:
        return k.product(self.g.extents[d] for d in dims)


def tiled_products(module: ir.Module) -> None:
    k.rewrite_generics(module, _plan, _emit)


def _plan(op: ir.Operation) -> _Product | None:
    g = k.read_generic(op)
    if g is None or g.n_ins != 2 or len(g.outs) != 1 or any(v == g.outs[0] for v in g.ins):
        return None
    reduced = [d for d, r in enumerate(g.reduction) if r]
    out_dims = []
    for e in g.maps[-1].results:
        e = e.maybe_downcast()
        if not isinstance(e, ir.AffineDimExpr) or g.reduction[e.position]:
            return None
        out_dims.append(e.position)
    parallel = [d for d, r in enumerate(g.reduction) if not r]
    if not reduced or not out_dims or sorted(out_dims) != parallel:
        return None

    def reads(i: int, d: int) -> bool:
        return any(uses_dim(e, d) for e in g.maps[i].results)

    n_dim = out_dims[-1]
    if reads(0, n_dim) == reads(1, n_dim):
        return None
    b = 0 if reads(0, n_dim) else 1
    a = 1 - b
    batch, m, n = [], [], []
    for d in out_dims:
        in_a, in_b = reads(a, d), reads(b, d)
        if in_a and in_b:
            batch.append(d)
        elif in_a:
            m.append(d)
        elif in_b:
            n.append(d)
        else:
            return None
    if not m:
        return None
    for i in range(2):
        if not k.scalar_kind(ir.MemRefType(g.ins[i].type).element_type):
            return None
    body = split_body(op, g.extents, 2)
    if body is None or not k.scalar_kind(body.acc.type) \
            or any(o.name == "linalg.index" for o in body.element_ops):
        return None
    p = _Product(g, body, a, batch, m, n, reduced)
    if p.extent(m) < MIN_SIDE or p.extent(n) < MIN_SIDE or p.extent(reduced) < MIN_K:
        return None
    if p.extent(batch) > k.MAX_GRID_YZ or k.ceil_div(p.extent(m), TILE_M) > k.MAX_GRID_YZ:
        return None
    return p


def _emit(p: _Product) -> None:
    g, body = p.g, p.body
    b = 1 - p.a
    size_m, size_n, size_k = p.extent(p.m), p.extent(p.n), p.extent(p.k)
    types = [ir.MemRefType(v.type).element_type for v in g.ins]
    shared = [k.workgroup_memref([TILE_K, TILE_M + PAD], types[p.a]),
              k.workgroup_memref([TILE_K, TILE_N + PAD], types[b])]
    grid = (k.ceil_div(size_n, TILE_N), k.ceil_div(size_m, TILE_M), p.extent(p.batch))
    args = g.op.regions[0].blocks[0].arguments
    with k.Launch(grid, (THREADS, THREADS, 1), shared) as launch:
        a_tile, b_tile = launch.shared
        tx, ty = launch.thread_id[0], launch.thread_id[1]
        m0 = arith.muli(launch.block_id[1], k.c(TILE_M))
        n0 = arith.muli(launch.block_id[0], k.c(TILE_N))
        base: list = [None] * len(g.extents)
        for d, v in zip(p.batch, k.delinearize(launch.block_id[2],
                                                [g.extents[d] for d in p.batch])):
            base[d] = v
        constants: dict = {}
        clone_ops(body.constant_ops, constants, ir.InsertionPoint.current)
        tid = arith.addi(arith.muli(ty, k.c(THREADS)), tx)

        def place(ivs: list, dims: list[int], linear: ir.Value) -> None:
            for d, v in zip(dims, k.delinearize(linear, [g.extents[d] for d in dims])):
                ivs[d] = v

        def stage(operand: int, tile, free: list[int], origin, size_free: int, k0,
                  guard_k: bool) -> None:
            """Operand's TILE_K x 64 tile at (k0, origin) into shared memory, consecutive
            threads along its contiguous dimension; outside the operand: zeros."""
            inner = g.innermost_dim(operand)
            k_fastest = inner is not None and inner in p.k
            zero = k.zero_of(types[operand])
            for r in range(TILE_K * TILE_M // (THREADS * THREADS)):
                if k_fastest:
                    kk = arith.remui(tid, k.c(TILE_K))
                    ff = arith.addi(arith.divui(tid, k.c(TILE_K)), k.c(r * 16))
                else:
                    ff = arith.remui(tid, k.c(TILE_M))
                    kk = arith.addi(arith.divui(tid, k.c(TILE_M)), k.c(r * 4))
                f, kx = arith.addi(origin, ff), arith.addi(k0, kk)
                inside = arith.cmpi(arith.CmpIPredicate.ult, f, k.c(size_free))
                if guard_k:
                    inside = arith.andi(inside, arith.cmpi(arith.CmpIPredicate.ult, kx,
                                                           k.c(size_k)))
                branch = scf.IfOp(inside, [types[operand]], has_else=True)
                with ir.InsertionPoint(branch.then_block):
                    ivs = list(base)
                    place(ivs, free, f)
                    place(ivs, p.k, kx)
                    scf.YieldOp([memref.load(g.ins[operand], k.indices(g.maps[operand],
                                                                        ivs))])
                with ir.InsertionPoint(branch.else_block):
                    scf.YieldOp([zero])
                memref.store(branch.results[0], tile, [kk, ff])

        def product(a_value, b_value, acc):
            mapping = dict(constants)
            mapping[args[p.a]], mapping[args[b]] = a_value, b_value
            k.clone_body_ops(body.element_ops, mapping, None)
            mapping[body.acc] = acc
            clone_ops(body.combine_ops, mapping, ir.InsertionPoint.current)
            _contract([mapping[o.results[0]].owner for o in body.element_ops
                       + body.combine_ops if len(o.results) == 1])
            return mapping[body.result]

        def step(accs: list, k0, steps: int, guard_k: bool) -> list:
            """One TILE_K slice of K: stage both tiles, `steps` rank-1 updates."""
            stage(p.a, a_tile, p.m, m0, size_m, k0, guard_k)
            stage(b, b_tile, p.n, n0, size_n, k0, guard_k)
            gpu.barrier()
            loop = scf.ForOp(k.c(0), k.c(steps), k.c(1), accs)
            with ir.InsertionPoint(loop.body):
                kk = loop.induction_variable
                a_values = [memref.load(a_tile, [kk, arith.addi(ty, k.c(i * THREADS))])
                            for i in range(REG)]
                b_values = [memref.load(b_tile, [kk, arith.addi(tx, k.c(j * THREADS))])
                            for j in range(REG)]
                inner = list(loop.inner_iter_args)
                scf.YieldOp([product(a_values[i], b_values[j], inner[i * REG + j])
                             for i in range(REG) for j in range(REG)])
            gpu.barrier()
            return list(loop.results)

        # C's elements this thread owns, and their first values
        owned = []
        for i in range(REG):
            for j in range(REG):
                mm = arith.addi(m0, arith.addi(ty, k.c(i * THREADS)))
                nn = arith.addi(n0, arith.addi(tx, k.c(j * THREADS)))
                inside = arith.andi(arith.cmpi(arith.CmpIPredicate.ult, mm, k.c(size_m)),
                                    arith.cmpi(arith.CmpIPredicate.ult, nn, k.c(size_n)))
                ivs = list(base)
                place(ivs, p.m, mm)
                place(ivs, p.n, nn)
                owned.append((inside, k.indices(g.maps[-1], ivs)))
        zero = k.zero_of(body.acc.type)
        accs = [k.guarded_load(inside, g.outs[0], at, zero) for inside, at in owned]
        full, rest = divmod(size_k, TILE_K)
        if full:
            loop = scf.ForOp(k.c(0), k.c(full * TILE_K), k.c(TILE_K), accs)
            with ir.InsertionPoint(loop.body):
                scf.YieldOp(step(list(loop.inner_iter_args), loop.induction_variable,
                                 TILE_K, False))
            accs = list(loop.results)
        if rest:
            accs = step(accs, k.c(full * TILE_K), rest, True)
        for (inside, at), value in zip(owned, accs):
            write = scf.IfOp(inside)
            with ir.InsertionPoint(write.then_block):
                memref.store(value, g.outs[0], at)
                scf.YieldOp([])


def _contract(ops) -> None:
    """Float multiplies and adds of the rank-1 updates may become FMAs (as XLA's GPU
    kernels and cuBLAS do): one rounding instead of two, half the instructions."""
    flag = ir.Attribute.parse("#arith.fastmath<contract>")
    for op in ops:
        if op.name in ("arith.mulf", "arith.addf"):
            op.attributes["fastmath"] = flag
