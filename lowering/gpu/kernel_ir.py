"""Builders shared by the GPU passes that write their own gpu.launch (columns.py,
transposes.py, products.py): what a linalg.generic on static buffers is made of, a launch
with shared memory, linear indices split into a generic's dimensions, and the generic's
body cloned for one element.
"""
from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir
from torch_mlir.dialects import arith, gpu, memref, scf
# the generated builder: gpu.LaunchOp's wrapper takes no memory attributions
from torch_mlir.dialects._gpu_ops_gen import LaunchOp as _LaunchOp

from ..codegen.builders import indices_of
from ..ir_util import clone_ops

# The hardware's limit on gridDim.y and gridDim.z.
MAX_GRID_YZ = 65535


def index_type() -> ir.Type:
    return ir.IndexType.get()


def c(n: int) -> ir.Value:
    """An index constant."""
    return arith.constant(index_type(), n)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass
class Generic:
    """A linalg.generic on buffers with static shapes: its operands, their indexing maps,
    iterator kinds and every dimension's extent."""
    op: ir.Operation
    n_ins: int
    operands: list
    maps: list
    reduction: list          # per dimension: whether it is a reduction dimension
    extents: list

    @property
    def ins(self) -> list:
        return self.operands[:self.n_ins]

    @property
    def outs(self) -> list:
        return self.operands[self.n_ins:]

    def innermost_dim(self, k: int) -> int | None:
        """The dimension operand k's innermost index is (None: a constant, a sum, 0-d)."""
        results = list(self.maps[k].results)
        if not results:
            return None
        e = results[-1].maybe_downcast()
        return e.position if isinstance(e, ir.AffineDimExpr) else None


def read_generic(op: ir.Operation) -> Generic | None:
    """The generic's shape, or None unless every operand is a buffer of static shape whose
    innermost dimension is contiguous and every dimension's extent is known."""
    if op.name != "linalg.generic" or op.results or "indexing_maps" not in op.attributes:
        return None
    n_ins, _ = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    operands = list(op.operands)
    maps = [ir.AffineMapAttr(m).value for m in op.attributes["indexing_maps"]]
    reduction = ["reduction" in str(a) for a in op.attributes["iterator_types"]]
    extents: list = [None] * len(reduction)
    for value, amap in zip(operands, maps):
        try:
            t = ir.MemRefType(value.type)
        except ValueError:
            return None
        if not t.has_static_shape or (t.rank and t.get_strides_and_offset()[0][-1] != 1):
            return None
        for expr, n in zip(amap.results, t.shape):
            e = expr.maybe_downcast()
            if isinstance(e, ir.AffineDimExpr):
                extents[e.position] = n
    if any(e is None or e == 0 for e in extents):
        return None
    return Generic(op, n_ins, operands, maps, reduction, extents)


def product(values) -> int:
    n = 1
    for v in values:
        n *= v
    return n


def workgroup_memref(shape: list[int], element: ir.Type) -> ir.Type:
    # the bindings have no builder for the address-space attribute
    space = ir.Attribute.parse("#gpu.address_space<workgroup>")
    return ir.MemRefType.get(shape, element, memory_space=space)


class Launch:
    """A gpu.launch of grid x block with workgroup (shared) buffers, the insertion point set
    inside its body while in use: `block_id`/`thread_id` are (x, y, z) index values,
    `shared` the workgroup buffers in order."""

    def __init__(self, grid: tuple[int, int, int], block: tuple[int, int, int],
                 shared: list[ir.Type]):
        self.op = _LaunchOp(None, [], *[c(n) for n in grid], *[c(n) for n in block],
                            workgroup_attributions=len(shared))
        self.body = self.op.regions[0].blocks.append(*([index_type()] * 12), *shared)
        args = list(self.body.arguments)
        self.block_id, self.thread_id = args[0:3], args[3:6]
        self.shared = args[12:]
        self._ip = ir.InsertionPoint(self.body)

    def __enter__(self):
        self._ip.__enter__()
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            gpu.TerminatorOp()
        self._ip.__exit__(*exc)


def delinearize(linear: ir.Value, extents: list[int]) -> list[ir.Value]:
    """Indices (row-major over `extents`) of a linear index."""
    out, rest = [], linear
    for i, n in enumerate(reversed(extents)):
        if i == len(extents) - 1:
            out.insert(0, rest)
        else:
            out.insert(0, arith.remui(rest, c(n)))
            rest = arith.divui(rest, c(n))
    return out


def indices(amap: ir.AffineMap, ivs: list) -> list[ir.Value]:
    """builders.indices_of, with dimensions the map does not read (None) given as 0:
    affine.apply takes every dimension as an operand."""
    zero = None
    full = []
    for v in ivs:
        if v is None:
            zero = zero or c(0)
            v = zero
        full.append(v)
    return indices_of(amap, full)


def guarded_load(condition: ir.Value, buffer: ir.Value, indices: list[ir.Value],
                 zero: ir.Value) -> ir.Value:
    """buffer[indices] where `condition` holds, else `zero` (no out-of-bounds read)."""
    branch = scf.IfOp(condition, [zero.type], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        scf.YieldOp([memref.load(buffer, indices)])
    with ir.InsertionPoint(branch.else_block):
        scf.YieldOp([zero])
    return branch.results[0]


def zero_of(t: ir.Type) -> ir.Value:
    """A zero of scalar type t (a value nothing reads: lanes with no element)."""
    for kind, attr in ((ir.FloatType, ir.FloatAttr), (ir.IntegerType, ir.IntegerAttr)):
        try:
            kind(t)
        except ValueError:
            continue
        return arith.constant(t, attr.get(t, 0))
    raise ValueError(f"no zero of {t}")


def scalar_kind(t: ir.Type) -> bool:
    """Types the kernels here keep in shared memory and registers: ints and floats of 8 to
    64 bits (i1 and complex values stay with the simple loops)."""
    for kind in (ir.IntegerType, ir.FloatType):
        try:
            return kind(t).width in (8, 16, 32, 64)
        except ValueError:
            pass
    return False


def clone_body(g: Generic, mapping: dict, ivs: list[ir.Value] | None) -> list[ir.Value]:
    """The generic's body at the insertion point with `mapping` (block argument -> value);
    linalg.index reads `ivs`. Returns the yielded values."""
    block = g.op.regions[0].blocks[0]
    ops = [o.operation for o in block.operations]
    mapping = dict(mapping)
    clone_body_ops(ops[:-1], mapping, ivs)
    return [mapping.get(v, v) for v in ops[-1].operands]


def clone_body_ops(ops: list[ir.Operation], mapping: dict, ivs: list | None) -> None:
    """Clone a generic's body ops at the insertion point (into `mapping`), linalg.index
    reading `ivs`."""
    for inner in ops:
        if inner.name == "linalg.index":
            mapping[inner.results[0]] = ivs[ir.IntegerAttr(inner.attributes["dim"]).value]
        else:
            clone_ops([inner], mapping, ir.InsertionPoint.current)


def body_uses(g: Generic, k: int) -> bool:
    """Whether the body reads block argument k (an output's initial value, say)."""
    arg = g.op.regions[0].blocks[0].arguments[k]
    return any(True for _ in arg.uses)


def rewrite_generics(module: ir.Module, plan, emit) -> int:
    """For each linalg.generic `plan` accepts (a non-None plan), `emit(plan)` at its place,
    then erase it. Returns how many were rewritten."""
    todo = []

    def visit(op):
        op = op.operation
        if op.name == "linalg.generic":
            found = plan(op)
            if found is not None:
                todo.append((op, found))
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    for op, found in todo:
        with ir.InsertionPoint(op), op.location:
            emit(found)
        op.erase()
    return len(todo)
