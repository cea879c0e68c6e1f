"""Loops for the GPU: what runs before `convert-parallel-loops-to-gpu` maps loops to blocks
and threads.

`scf-parallel-loop-tiling` tiles a parallel loop's first dimension by the block size and
`gpu-map-parallel-loops` maps that dimension to blockIdx.x/threadIdx.x. Consecutive threads
of a warp should touch consecutive addresses, so the generic's dimension that indexes the
output's last (contiguous) dimension is made the first one (`kiln-gpu-order-dimensions`).

A linalg op with no parallel dimension (a full reduction, a 0-d fill) becomes plain loops or
stores in the host function. On a GPU every buffer lives in device memory, so such work
must run in a kernel too: large full reductions are split into per-thread partials first
(`kiln-gpu-split-reductions`, two kernels: partials, then their combination), and what is
left becomes a one-thread kernel (`kiln-gpu-serial-kernels`). Scalar code a launch reads
from the host is copied into it (`kiln-gpu-sink-scalars`), and libm calls the shared
legalize stage made become math ops again, which kernels lower to libdevice
(`kiln-gpu-libm-calls-as-math`).

Row reductions, and the phases of a split full reduction, become block reductions (warp
shuffles and shared memory) in reductions.py; column reductions tiled blocks in columns.py;
contractions (matmuls, convolutions) shared-memory tiled kernels in products.py; and
transposes 32x32 tiles through shared memory in transposes.py. What those leave (short
columns, several accumulators, thin transposes, matrix-vector products) runs here, one
thread per output element, a reduction's neighbouring threads reading neighbouring
addresses. Not yet: loops whose trip count or predicate the device computes (`scf.while`
on the host).
"""
from __future__ import annotations


from torch_mlir import ir
from torch_mlir.dialects import arith, scf

from ...errors import KilnError
from ..codegen import reductions
from ..codegen.loop_order import permute

# Full reductions of at least this many elements get a parallel phase of this many partials.
SPLIT_MIN_ELEMENTS = 4096
SPLIT_CHUNKS = 1024
_GPU_SPLIT = reductions.SplitSizes(chunks=SPLIT_CHUNKS, min_elements=SPLIT_MIN_ELEMENTS)

# Host-side ops that touch no element of a buffer: everything else outside a parallel loop
# is work that must become a kernel.
HOST_OPS = frozenset({
    "arith.constant", "memref.alloc", "memref.alloca", "memref.get_global", "memref.dealloc",
    "memref.copy", "memref.collapse_shape", "memref.expand_shape", "memref.cast",
    "memref.reinterpret_cast", "memref.subview", "memref.view", "scf.parallel",
    "func.return",
})


def order_dimensions(module: ir.Module) -> None:
    """Make each linalg.generic's dimension that indexes its first output's innermost
    dimension the outermost one (then the next-innermost, ...); reductions stay innermost."""
    def visit(op):
        op = op.operation
        if op.name == "linalg.generic":
            order = _thread_order(op)
            if order is not None:
                permute(op, order)
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)


def _thread_order(op: ir.Operation) -> list[int] | None:
    iterators = [str(a) for a in op.attributes["iterator_types"]]
    parallel = [d for d, it in enumerate(iterators) if "parallel" in it]
    reduction = [d for d, it in enumerate(iterators) if "parallel" not in it]
    maps = [ir.AffineMapAttr(m).value for m in op.attributes["indexing_maps"]]
    out_map = maps[-1] if len(maps) >= 1 else None
    first = []
    for expr in reversed(list(out_map.results) if out_map else []):
        try:
            d = ir.AffineDimExpr(expr).position
        except ValueError:
            continue
        if d in parallel and d not in first:
            first.append(d)
    order = first + [d for d in parallel if d not in first] + reduction
    return None if order == list(range(len(iterators))) else order


def split_reductions(module: ir.Module) -> None:
    """Full reductions -> SPLIT_CHUNKS partials (a parallel dimension: one thread each, from
    the combiner's identity) and one combination of them into the output (a small serial
    kernel): the two phases of a reduction to a scalar."""
    reductions.split_reductions(module, _GPU_SPLIT)


def pure_scalar(op: ir.Operation) -> bool:
    """Index/scalar arithmetic with no memory effect (it may stay on the host or be cloned
    into a kernel by outlining)."""
    return op.name.startswith(("arith.", "affine.apply", "math.", "complex.")) \
        and op.name != "arith.constant" and not op.regions


def wrap_serial(run: list[ir.Operation]) -> None:
    for op in run:
        for result in op.results:
            for use in result.uses:
                if not nested_in(use.owner, run):
                    raise _escaping(op)
    first = run[0]
    with ir.InsertionPoint(first), first.location:
        index = ir.IndexType.get()
        zero = arith.constant(index, 0)
        one = arith.constant(index, 1)
        loop = scf.ParallelOp([], [zero], [one], [one], [])
        body = loop.regions[0].blocks.append(index)
        with ir.InsertionPoint(body):
            terminator = scf.ReduceOp([], 0)
    for op in run:
        op.move_before(terminator.operation)


def nested_in(owner, run) -> bool:
    op = owner.operation if hasattr(owner, "operation") else owner
    while op is not None:
        if any(op == r for r in run):
            return True
        parent = op.parent
        op = parent.operation if parent is not None and parent.name != "func.func" else None
    return False


def _escaping(op: ir.Operation):
    return KilnError(f"'{op.name}' computes a value the host needs (the GPU target keeps "
                     "every buffer in device memory)", location=str(op.location),
                     hint="host control flow on device values (while/if on a computed "
                          "predicate) is not supported by the GPU target yet")


# libm functions the shared `legalize` stage calls for accuracy (kiln-accurate-libm-calls):
# on the GPU libdevice's own functions are accurate, and a kernel cannot call the host's libm.
_LIBM_AS_MATH = {"log1p": "math.log1p", "log1pf": "math.log1p",
                 "expm1": "math.expm1", "expm1f": "math.expm1"}


def libm_calls_as_math(module: ir.Module) -> None:
    """func.call @log1pf(x) (and expm1, f64 forms) -> math.log1p(x): convert-gpu-to-nvvm
    turns the math op into libdevice's __nv_log1pf."""
    calls = []

    def visit(op):
        op = op.operation
        if op.name == "func.call" and len(op.operands) == 1 and len(op.results) == 1:
            callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
            if callee in _LIBM_AS_MATH:
                calls.append((op, _LIBM_AS_MATH[callee]))
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    for op, name in calls:
        with ir.InsertionPoint(op), op.location:
            new = ir.Operation.create(name, results=[op.results[0].type],
                                      operands=[op.operands[0]])
        op.results[0].replace_all_uses_with(new.results[0])
        op.erase()


def sink_scalars(module: ir.Module) -> None:
    """Scalar code a gpu.launch body reads from outside (a comparison of two complex
    constants, say) is copied into the body: the launch then captures only buffers and
    constants, which outlining turns into kernel arguments the plan knows."""
    launches = []

    def visit(op):
        if op.operation.name == "gpu.launch":
            launches.append(op.operation)
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    for launch in launches:
        body = launch.regions[0].blocks[0]
        copies: dict = {}
        first = body.operations[0]

        def copy(value):
            if value in copies:
                return copies[value]
            owner = value.owner
            if isinstance(owner, ir.Block) or not pure_scalar(owner.operation):
                return None
            operands = []
            for v in owner.operands:
                inner = copy(v)
                operands.append(v if inner is None else inner)
            with ir.InsertionPoint(first):
                clone = owner.operation.clone()
            for i, v in enumerate(operands):
                clone.operands[i] = v
            for old, new in zip(owner.results, clone.results):
                copies[old] = new
            return copies[value]

        for op in _nested_ops(launch):
            for i, value in enumerate(op.operands):
                if _defined_outside(value, launch):
                    new = copy(value)
                    if new is not None:
                        op.operands[i] = new


def _nested_ops(op: ir.Operation) -> list[ir.Operation]:
    found = []
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                found.append(inner.operation)
                found.extend(_nested_ops(inner.operation))
    return found


def _defined_outside(value, launch: ir.Operation) -> bool:
    owner = value.owner
    op = owner.owner if isinstance(owner, ir.Block) else owner.operation
    while op is not None:
        if op == launch:
            return False
        op = op.parent.operation if op.parent is not None else None
    return True
