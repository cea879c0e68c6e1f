"""Op builders shared by the codegen passes (blas.py, parallel.py, fastmath.py): private
functions and the external declarations they call, constants built once per function, the raw
addresses through which generated code hands memrefs to C (OpenBLAS, Kiln's runtime), and
enum attributes built without spelling them as text.

Everything here builds at the caller's insertion point with the caller's location (passes
build inside `with ir.InsertionPoint(...), op.location:`), so the functions a pass outlines
carry the location of the op they came from.
"""
from __future__ import annotations

from typing import Callable, Sequence

from torch_mlir import ir
from torch_mlir.dialects import affine, arith, func, linalg, llvm, memref


def planned(module: ir.Module, names: tuple[str, ...], plan_of: Callable) -> list:
    """(op, plan) for every op named in `names`, in walk order, where `plan_of(op)` is not
    None: what a codegen pass will rewrite, all decided before it changes anything."""
    found = []

    def visit(op):
        op = op.operation
        if op.name in names:
            plan = plan_of(op)
            if plan is not None:
                found.append((op, plan))
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    return found


def i32() -> ir.Type:
    return ir.IntegerType.get_signless(32)


def i64() -> ir.Type:
    return ir.IntegerType.get_signless(64)


def index() -> ir.Type:
    return ir.IndexType.get()


def pointer() -> ir.Type:
    """`!llvm.ptr` (opaque): how generated code passes addresses to C."""
    return llvm.PointerType.get()


def iterator_type(name: str) -> ir.Attribute:
    """`#linalg.iterator_type<name>` ("parallel" or "reduction")."""
    return ir.AttrBuilder.get("linalg.IteratorTypeEnum")(linalg.IteratorType[name], ir.Context.current)


def fastmath(flag: str) -> ir.Attribute:
    """`#arith.fastmath<flag>` (e.g. "reassoc")."""
    return ir.AttrBuilder.get("arith.Arith_FastMathAttr")(arith.FastMathFlags[flag], ir.Context.current)


def unique_symbol(symbols: ir.SymbolTable, base: str) -> str:
    """`base`, with "_" appended until no symbol of `symbols` has that name."""
    name = base
    while name in symbols:
        name += "_"
    return name


def define_private(module: ir.Module, symbols: ir.SymbolTable, name: str,
                   inputs: Sequence[ir.Type], results: Sequence[ir.Type] = ()) -> func.FuncOp:
    """A private function `name` appended to the module, with an empty entry block (the
    caller builds its body, return included).

    It gets LLVM's internal linkage: MLIR's ExecutionEngine gives every function with
    external linkage a packed-argument wrapper, into which LLVM inlines the whole body, so a
    private function would be compiled twice (measured: 15% of LLVM's time on the benchmark
    workloads); internal ones get none, and a function called once is inlined into its caller
    instead of also being kept on its own."""
    with ir.InsertionPoint(module.body):
        fn = func.FuncOp(name, ir.FunctionType.get(list(inputs), list(results)),
                         visibility="private")
    fn.operation.attributes["llvm.linkage"] = internal_linkage()
    fn.add_entry_block()
    symbols.insert(fn.operation)
    return fn


def internal_linkage() -> ir.Attribute:
    """`#llvm.linkage<internal>`, which convert-func-to-llvm gives the llvm.func of a func.func
    carrying it as `llvm.linkage` (the bindings have no builder for this attribute)."""
    return ir.Attribute.parse("#llvm.linkage<internal>")


def declare_external(module: ir.Module, symbols: ir.SymbolTable, name: str,
                     inputs: Sequence[ir.Type], results: Sequence[ir.Type] = ()) -> None:
    """A private declaration of the C function `name` at the module's end, unless the module
    already has that symbol."""
    if name in symbols:
        return
    with ir.InsertionPoint(module.body):
        fn = func.FuncOp(name, ir.FunctionType.get(list(inputs), list(results)),
                         visibility="private")
    symbols.insert(fn.operation)


class Constants:
    """Constants of a function body, each (value, type) built once, in one group at the top of
    `block` (or just after the op `after`) so that everything built later, loops included, can
    use them. `make(value, type)` builds one (default: arith.constant). The group keeps the
    order of first use; `newest_first` puts each new one ahead of the others instead."""

    def __init__(self, block: ir.Block, make: Callable[[object, ir.Type], ir.Value] | None = None,
                 newest_first: bool = False, after: ir.Operation | None = None):
        self._block, self._make = block, make or _arith_constant
        self._newest_first = newest_first
        self._values: dict[tuple[object, str], ir.Value] = {}
        self._last = after

    def __call__(self, value, type_: ir.Type | None = None) -> ir.Value:
        type_ = type_ or index()
        key = (value, str(type_))
        if key not in self._values:
            if self._last is None or self._newest_first:
                ip = ir.InsertionPoint.at_block_begin(self._block)
            else:
                ip = ir.InsertionPoint.after(self._last)
            with ip:
                result = self._make(value, type_)
            self._last = result.owner.operation
            self._values[key] = result
        return self._values[key]


def _arith_constant(value, type_: ir.Type) -> ir.Value:
    if isinstance(type_, ir.FloatType):
        return arith.ConstantOp(type_, ir.FloatAttr.get(type_, float(value))).result
    return arith.ConstantOp(type_, ir.IntegerAttr.get(type_, int(value))).result


def llvm_constant(value: int, type_: ir.Type) -> ir.Value:
    """`llvm.mlir.constant(value)` (for `Constants(make=llvm_constant)`)."""
    return llvm.mlir_constant(ir.IntegerAttr.get(type_, int(value)))


def element_address(value: ir.Value, element_bytes: int, constant: Constants) -> ir.Value:
    """The address (as an index) of the first element `value` (a memref) views: its buffer's
    aligned pointer plus its offset in bytes."""
    aligned = memref.ExtractAlignedPointerAsIndexOp(value).result
    offset = memref.ExtractStridedMetadataOp(value).results[1]
    offset_bytes = arith.muli(offset, constant(element_bytes))
    return arith.addi(aligned, offset_bytes)


def as_pointer(address: ir.Value) -> ir.Value:
    """An index-typed address as `!llvm.ptr`."""
    return llvm.IntToPtrOp(pointer(), arith.index_cast(i64(), address)).result


def uses_dim(expr: ir.AffineExpr, d: int) -> bool:
    """Whether affine expression `expr` reads loop dimension `d`."""
    expr = expr.maybe_downcast()
    if isinstance(expr, ir.AffineDimExpr):
        return expr.position == d
    if isinstance(expr, ir.AffineBinaryExpr):
        return uses_dim(expr.lhs, d) or uses_dim(expr.rhs, d)
    return False


def indices_of(amap: ir.AffineMap, ivs: list[ir.Value]) -> list[ir.Value]:
    """The memref indices `amap` gives for loop indices `ivs` (a dimension as it is, any other
    expression through `affine.apply`)."""
    out = []
    for expr in amap.results:
        e = expr.maybe_downcast()
        if isinstance(e, ir.AffineDimExpr):
            out.append(ivs[e.position])
        else:
            single = ir.AffineMap.get(len(ivs), 0, [expr])
            out.append(affine.AffineApplyOp(single, ivs).result)
    return out


def is_inside(owner, op: ir.Operation) -> bool:
    """Whether `owner` (an operation, or None) is `op` or nested in it."""
    while owner is not None:
        if owner == op:
            return True
        owner = owner.parent
    return False


def has_row_major_strides(t: ir.MemRefType) -> bool:
    """Whether `t`'s elements lie row-major from offset 0 (whatever form its layout takes)."""
    strides, offset = t.get_strides_and_offset()
    expected, step = [], 1
    for n in reversed(t.shape):
        expected.insert(0, step)
        step *= n
    return offset == 0 and list(strides) == expected


def partial_block(size: int, iv: ir.Value, upper: ir.Value) -> ir.Value:
    """min(size, upper - iv): the extent of the block starting at `iv` of a loop stepping by
    `size` to `upper`, the last one possibly smaller."""
    s0, d0 = ir.AffineExpr.get_symbol(0), ir.AffineExpr.get_dim(0)
    rest = ir.AffineMap.get(1, 1, [ir.AffineExpr.get_constant(size),
                                   ir.AffineExpr.get_add(
                                       s0, ir.AffineExpr.get_mul(d0, ir.AffineExpr.get_constant(-1)))])
    return affine.AffineMinOp(rest, [iv, upper]).result
