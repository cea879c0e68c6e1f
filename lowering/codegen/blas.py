"""Library calls for matrix products and convolutions (XLA:CPU does the same: dot/conv ->
Eigen/oneDNN; a maintained BLAS here).

Chosen by measurement on the 2-core AVX-512 machine: the linalg -> loops path runs a matmul
at ~2 GFLOP/s; the OpenBLAS bundled in the numpy wheel (`scipy_cblas_sgemm64_`, the library
numpy's own `@` calls) runs 1024^3 f32 at numpy's speed. Without numpy's (or scipy's) bundled
OpenBLAS, products stay loop nests.

- `protect_contractions` (tensor level, before elementwise fusion): bf16/f16/integer products
  first become f32/f64 ones between exact conversions (products.py). Then each large pure
  f32/f64/complex contraction (a `linalg.generic` whose body is exactly `out + a * b`) moves,
  as a `linalg.contract`, into a private function of its own, so that fusion (which also
  propagates reshapes through linalg ops and then fuses producers into them) cannot merge
  elementwise work into it (so do bf16 and 8-bit products in the form products.py leaves for
  the runtime's AMX kernels); a transposing copy that is its only user is first folded into its
  output map (also for named matmul/batch_matmul), as XLA folds it into the dot's layout.
  `restore_contractions` inlines them back after fusion.
- `blas_calls` (memref level, after bufferization): every f32/f64/complex contraction with one
  M, one N and one K dimension group (after merging dims that are contiguous in every
  operand), any batch dims, static shapes and strides, where each matrix has a unit stride on
  one side, becomes loops over the batch dims around one `cblas_?gemm` call (a column-major
  result is computed as C^T = B^T A^T), or `cblas_?gemv` where M or N is 1 (matrix-vector
  products, batch-1 layers; a large f32 one calls the runtime's `kiln_sgemv` instead,
  runtime/kiln_gemv.c). Complex alpha and beta go by address. A `linalg.fill` of 0.0
  right before it on the same output becomes beta = 0. A bf16 or 8-bit product in kernel
  form, with M and N above 1, becomes the same loops around the runtime's `kiln_gemm_*`
  (runtime/kiln_gemm.c; operands by element strides, a zero fill before it as C = A B).
  `linalg.conv_2d_nhwc_hwcf` (f32/f64)
  becomes loops over (n, oh, kh, kw) around a W_out x F x C gemm on shifted input windows (no
  im2col copy), or, where the batch is longer than an output row (weight gradients), over
  (oh, ow, kh) around an N x F x (KW*C) gemm; the loops that write disjoint output rows run
  on Kiln's thread pool, each call on its own thread. (kiln-canonicalize-convolutions brings
  every other f32/f64 convolution to this op.) Anything else stays for the loop lowering,
  unchanged.
"""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith, func, linalg, llvm, memref, scf, tensor

from . import builders, products
from ...dialects import kiln as names
# Which BLAS, and the names generated code calls it by: runtime/libraries.py (loading compiled
# code needs them too, without the compiler).
from ...runtime.libraries import (_GEMM, _SET_THREADS, GEMM_POOLED, SGEMM_SMALL_F32,  # noqa: F401
                                  SGEMV_F32,
                                  Blas, amx_products, blas, blas_library, has_routine,
                                  jit_symbols, thread_control)

# Below this many multiply-adds a loop nest is as fast as a library call and keeps small
# programs (most of the conformance suite) on the plain path. Measured on the 2-core VM, per
# call: at 2^14 the call is 4-11 us ahead for every shape tried (128^2 matrix-vector 27 vs
# 21 us, 1x128x128 33 vs 21, 4x64x64 26 vs 21, 2x512x16 30 vs 23); at 2^13, 0-3 us; 16^3 even.
MIN_MACS = 1 << 14
# (convolutions, whose calls are per output row, keep the threshold they were measured with)
MIN_CONV_MACS = 1 << 15

# OpenBLAS splits every gemm above a small size across all cores. Measured on the 2-core VM:
# with the machine otherwise idle, threading pays off down to ~2^20 multiply-adds per call
# (attention's 32 gemms of 512x512x64: 42-48 ms on one thread, 29-31 ms on two); with the
# cores oversubscribed (two processes each running BLAS threads) its spinning hand-off costs
# far more (60 ms vs 230 ms). Products from this size on go through the runtime's pooled
# entry (`_pooled`: in pieces on Kiln's pool); smaller calls (e.g. a convolution's per-row
# gemms) run on the calling thread only.
PARALLEL_MACS = 1 << 20

# element size in bytes; real kinds
_BYTES = {"f32": 4, "f64": 8, "complex<f32>": 8, "complex<f64>": 16}
_REAL = ("f32", "f64")
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


# ---------------------------------------------------------------------------------------------
# tensor level

_MUL_ADD = (["arith.mulf", "arith.addf", "linalg.yield"],
            ["complex.mul", "complex.add", "linalg.yield"])


def _is_mul_add_body(op: ir.Operation) -> bool:
    block = op.regions[0].blocks[0]
    ops = list(block.operations)
    if [o.name for o in ops] not in _MUL_ADD:
        return False
    mul, add, yld = ops
    a, b, c = block.arguments
    # (ir.Value compares by what it refers to, but does not hash that way: no sets here)
    m0, m1 = mul.operands[0], mul.operands[1]
    if not ((m0 == a and m1 == b) or (m0 == b and m1 == a)):
        return False
    s0, s1 = add.operands[0], add.operands[1]
    if not ((s0 == c and s1 == mul.result) or (s0 == mul.result and s1 == c)):
        return False
    return yld.operands[0] == add.result


def _float_kind(t: ir.Type) -> str | None:
    s = str(ir.ShapedType(t).element_type)
    return s if s in _GEMM else None


_OUTLINED = names.OUTLINED_CONTRACTION


def protect_contractions(module: ir.Module) -> None:
    """Move each pure f32/f64 contraction into a private function of its own, as a
    `linalg.contract`, so that elementwise fusion (which also propagates reshapes through
    linalg ops and then fuses into the result) cannot touch it; `restore_contractions` puts it
    back after fusion. bf16/f16/integer products are first rewritten into f32/f64 ones between
    conversions (products.py), so that they are protected, and called, like any other."""
    if blas_library() is not None:   # (without a library, loops gain nothing from widening)
        products.widen_products(module, MIN_MACS)
    todo = []

    def visit(op):
        op = op.operation
        if op.name == "linalg.generic" and len(op.operands) == 3 and len(op.results) == 1 \
                and all(_float_kind(v.type) for v in op.operands) \
                and len({str(ir.ShapedType(v.type).element_type) for v in op.operands}) == 1 \
                and _is_mul_add_body(op) and linalg.isa_contraction_op(op) and _big_enough(op):
            todo.append(op)
        elif op.name in ("linalg.matmul", "linalg.batch_matmul") and "cast" not in op.attributes \
                and len(op.results) == 1 \
                and all(_float_kind(v.type) for v in op.operands) and _big_enough(op):
            # Protected too: upstream's reshape propagation rewrites a named product whose
            # input is a reshape into a generic (torch_xla's Linear layers take their input
            # flattened), which elementwise fusion then reaches: torch_xla's ConvNeXt computed
            # each GELU once per output column of the next product (24 s a call for 0.4).
            todo.append(op)
        elif op.name == "linalg.generic" and len(op.operands) == 3 and len(op.results) == 1 \
                and linalg.isa_contraction_op(op) and _big_enough(op) \
                and products.goes_to_kernel(op):
            todo.append(op)    # bf16 / 8-bit, for the runtime's AMX kernel
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    if not todo:
        return
    todo = [_fold_transpose(op) for op in todo]
    symbols = ir.SymbolTable(module.operation)
    for n, op in enumerate(todo):
        name = builders.unique_symbol(symbols, f"kiln_contraction_{n}")
        with op.location:
            outlined = builders.define_private(module, symbols, name,
                                               [v.type for v in op.operands], [op.results[0].type])
            outlined.operation.attributes[_OUTLINED] = ir.UnitAttr.get()
            with ir.InsertionPoint(outlined.entry_block):
                maps = None if "indexing_maps" in op.attributes else linalg.get_indexing_maps(op)
                new = _contract(op, list(outlined.entry_block.arguments), maps=maps)
                func.ReturnOp([new.results[0]])
            with ir.InsertionPoint(op):
                call = func.CallOp([op.results[0].type], ir.FlatSymbolRefAttr.get(name),
                                   list(op.operands))
        op.results[0].replace_all_uses_with(call.results[0])
        op.erase()


def _contract(op: ir.Operation, operands: list[ir.Value], name: str = "linalg.contract",
              maps: ir.Attribute | None = None) -> ir.Operation:
    """A `name` op (linalg.contract or linalg.generic) with `op`'s body and maps (or `maps`)
    over `operands` (at the insertion point); its result type is the init's."""
    attributes = {"indexing_maps": maps or op.attributes["indexing_maps"],
                  "operandSegmentSizes": ir.DenseI32ArrayAttr.get([2, 1])}
    if name == "linalg.generic":
        attributes["iterator_types"] = op.attributes["iterator_types"]
    new = ir.Operation.create(name, results=[operands[2].type], operands=operands,
                              attributes=attributes, regions=1)
    old_block = op.regions[0].blocks[0]
    block = new.regions[0].blocks.append(*[a.type for a in old_block.arguments])
    mapping = list(zip(old_block.arguments, block.arguments))
    with ir.InsertionPoint(block):
        for inner in old_block.operations:
            clone = inner.clone()
            for i, v in enumerate(clone.operands):
                for old, repl in mapping:
                    if v == old:
                        clone.operands[i] = repl
            mapping.extend(zip(inner.results, clone.results))
    return new


def _single_user(value: ir.Value):
    users = [u.owner for u in value.uses]
    return users[0] if len(users) == 1 else None


def _defining(value: ir.Value, name: str):
    owner = value.owner
    owner = getattr(owner, "operation", owner)
    return owner if isinstance(owner, ir.Operation) and owner.name == name else None


def _fold_transpose(op: ir.Operation) -> ir.Operation:
    """contraction -> transposing copy, with the contraction's init a zero fill of an empty
    tensor, becomes one contraction writing the transposed layout (XLA folds the transpose
    into the dot's output layout the same way; a 1024x4096 f32 transpose is ~40 ms here)."""
    user = _single_user(op.results[0])
    user = getattr(user, "operation", user)
    if user is None or user.name != "linalg.generic" or len(user.operands) != 2 \
            or "reduction" in str(user.attributes["iterator_types"]):
        return op
    body = list(user.regions[0].blocks[0].operations)
    block_args = list(user.regions[0].blocks[0].arguments)
    if len(body) != 1 or body[0].operands[0] != block_args[0]:
        return op
    fill = _defining(op.operands[2], "linalg.fill")
    if fill is None or _defining(fill.operands[1], "tensor.empty") is None \
            or _zero_fill_value(fill) is False:
        return op
    try:
        p_in, p_out = ([ir.AffineDimExpr(e).position for e in ir.AffineMapAttr(m).value.results]
                       for m in user.attributes["indexing_maps"])
    except ValueError:
        return op
    dims = _maps(op)
    if dims is None:
        return op
    n_dims = max(max(d) for d in dims) + 1
    maps = [ir.AffineMap.get(n_dims, 0, [ir.AffineDimExpr.get(d) for d in ds]) for ds in dims]
    c_dims = dims[2]
    if sorted(p_in) != list(range(len(p_in))) or sorted(p_out) != sorted(p_in):
        return op
    new_c = [c_dims[p_in.index(g)] for g in p_out]
    # Only where the call can still write the result: its innermost dim an M or N dim, and
    # each of the M and N groups still consecutive, in order (so they merge into one).
    m_group = [d for d in c_dims if d in dims[0] and d not in dims[1]]
    n_group = [d for d in c_dims if d in dims[1] and d not in dims[0]]
    if new_c[-1] not in m_group + n_group:
        return op
    for group in (m_group, n_group):
        at = [new_c.index(d) for d in group]
        if at and at != list(range(at[0], at[0] + len(at))):
            return op
    with op.context, user.location:
        c_map = ir.AffineMap.get(n_dims, 0, [ir.AffineDimExpr.get(d) for d in new_c])
        new_maps = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in (maps[0], maps[1], c_map)])
        y_type = ir.RankedTensorType(user.results[0].type)
        with ir.InsertionPoint(user):
            empty = tensor.EmptyOp(list(y_type.shape), y_type.element_type)
            zero = linalg.fill(fill.operands[0], outs=[empty.result])
            if op.name != "linalg.generic":  # named matmul / batch_matmul
                iterators = ["parallel"] * n_dims
                for d in set(dims[0]) & set(dims[1]) - set(dims[2]):
                    iterators[d] = "reduction"
                op.attributes["iterator_types"] = ir.ArrayAttr.get(
                    [builders.iterator_type(t) for t in iterators])
            new = _contract(op, [op.operands[0], op.operands[1], zero],
                            "linalg.generic", new_maps)
    user.results[0].replace_all_uses_with(new.results[0])
    user.erase()
    op.erase()
    return new


def _zero_constant(value: ir.Value, any_sign: bool = True) -> bool:
    """Whether `value` is a float or complex constant zero (+0.0 only, unless `any_sign`)."""
    owner = value.owner
    owner = getattr(owner, "operation", owner)
    if not isinstance(owner, ir.Operation) or \
            owner.name not in ("arith.constant", "complex.constant"):
        return False
    attr = owner.attributes["value"]
    parts = list(ir.ArrayAttr(attr)) if owner.name == "complex.constant" else [attr]
    try:
        return all(ir.FloatAttr(p).value == 0.0
                   and (any_sign or not str(p).lstrip().startswith("-")) for p in parts)
    except ValueError:
        return False


def _zero_integer(value: ir.Value) -> bool:
    """Whether `value` is an integer constant 0."""
    owner = _defining(value, "arith.constant")
    try:
        return owner is not None and ir.IntegerAttr(owner.attributes["value"]).value == 0
    except ValueError:
        return False


def _zero_fill_value(fill: ir.Operation) -> bool:
    # (integer fills: the products products.py leaves for the runtime's kernels)
    return _zero_constant(fill.operands[0]) or _zero_integer(fill.operands[0])


def restore_contractions(module: ir.Module) -> None:
    """Inline the functions `protect_contractions` made back into their (single) call sites."""
    funcs = {}
    for op in module.body.operations:
        op = op.operation
        if op.name == "func.func" and _OUTLINED in op.attributes:
            funcs[ir.StringAttr(op.attributes["sym_name"]).value] = op
    if not funcs:
        return
    calls = []

    def visit(op):
        op = op.operation
        if op.name == "func.call" and ir.FlatSymbolRefAttr(op.attributes["callee"]).value in funcs:
            calls.append(op)
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    for call in calls:
        outlined = funcs[ir.FlatSymbolRefAttr(call.attributes["callee"]).value]
        contract = next(o.operation for o in outlined.regions[0].blocks[0].operations
                        if o.operation.name == "linalg.contract")
        with ir.InsertionPoint(call), call.location:
            new = _contract(contract, list(call.operands))
        call.results[0].replace_all_uses_with(new.results[0])
        call.erase()
    for outlined in funcs.values():
        outlined.erase()


def _big_enough(op: ir.Operation) -> bool:
    macs = 1
    for v in op.operands:
        for d in ir.ShapedType(v.type).shape:
            if d < 0:
                return False
    maps = _maps(op)
    extent = {}
    for v, dims in zip(op.operands, maps or []):
        extent.update(zip(dims, ir.ShapedType(v.type).shape))
    for n in extent.values():
        macs *= n
    return maps is not None and macs >= MIN_MACS


# ---------------------------------------------------------------------------------------------
# memref level

# Named products the call takes besides generics and linalg.contract (their maps are the
# named op's own).
_NAMED = ("linalg.matmul", "linalg.batch_matmul", "linalg.matvec", "linalg.vecmat",
          "linalg.batch_matvec", "linalg.batch_vecmat")


def _maps(op: ir.Operation) -> list[list[int]] | None:
    """Each operand's dims, as positions in the op's iteration space (None unless each map
    is a projection)."""
    if "indexing_maps" in op.attributes:
        maps = list(op.attributes["indexing_maps"])
    elif op.name in _NAMED:
        maps = list(linalg.get_indexing_maps(op))
    else:
        return None
    try:
        return [[ir.AffineDimExpr(e).position for e in ir.AffineMapAttr(m).value.results]
                for m in maps]
    except ValueError:
        return None


class _Operand:
    def __init__(self, value: ir.Value, dims: list[int]):
        t = ir.MemRefType(value.type)
        self.value, self.type = value, t
        self.dims = dims
        strides, _ = t.get_strides_and_offset()
        self.stride = {d: s for d, s in zip(dims, strides)}
        self.size = {d: n for d, n in zip(dims, t.shape)}
        dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
        self.static = all(s != dynamic for s in strides) and t.has_static_shape


def _merge(group: list[int], operands: list[_Operand], extent: dict[int, int]):
    """Fold a dim group into one (extent, {operand: stride}) if its dims are nested
    contiguously, in the same order, in every operand; else None."""
    present = [o for o in operands if all(d in o.stride for d in group)]
    if not group:
        return 1, {id(o): 0 for o in present}
    # order: as the first operand lays them out (outer to inner)
    order = sorted(group, key=lambda d: -present[0].stride[d] if extent[d] > 1 else 0)
    live = [d for d in order if extent[d] > 1]
    total = 1
    for d in group:
        total *= extent[d]
    strides = {}
    for o in present:
        if not live:
            strides[id(o)] = 1
            continue
        for outer, inner in zip(live, live[1:]):
            if o.stride[outer] != o.stride[inner] * extent[inner]:
                return None
        strides[id(o)] = o.stride[live[-1]]
    return total, strides


def _matrix(rows: int, cols: int, s_row: int, s_col: int):
    """(transposed?, leading dimension) for a row-major BLAS view of a rows x cols matrix with
    these element strides, or None if neither orientation fits."""
    if (s_col == 1 or cols == 1) and (rows == 1 or s_row >= max(1, cols)):
        return False, s_row if rows > 1 else max(1, cols)
    if (s_row == 1 or rows == 1) and (cols == 1 or s_col >= max(1, rows)):
        return True, s_col if cols > 1 else max(1, rows)
    return None


def _gemm_kind(op: ir.Operation) -> str | None:
    """The element type BLAS would compute in, if every operand is a memref of one type
    that has a gemm (none otherwise)."""
    try:
        kinds = {str(ir.MemRefType(v.type).element_type) for v in op.operands}
    except ValueError:
        return None
    kind = kinds.pop() if len(kinds) == 1 else None
    return kind if kind is not None and has_routine(kind) else None


def _plan(op: ir.Operation):
    """Everything the call needs, or None if this contraction stays a loop nest."""
    if op.name not in (*_NAMED, "linalg.contract", "linalg.generic"):
        return None
    if len(op.operands) != 3 or len(op.results) != 0:
        return None
    kind = _gemm_kind(op) or _kernel_kind(op)
    if kind is None:
        return None
    if op.name == "linalg.generic" and isinstance(kind, str) and not _is_mul_add_body(op):
        return None
    if op.name in _NAMED and "cast" in op.attributes:
        return None
    if not linalg.isa_contraction_op(op):
        return None
    maps = _maps(op)
    dims = linalg.infer_contraction_dimensions(op)
    if maps is None or dims is None:
        return None
    a, b, c = (_Operand(v, m) for v, m in zip(op.operands, maps))
    if not all(o.static for o in (a, b, c)):
        return None
    extent = {**a.size, **b.size, **c.size}
    batch, gm, gn, gk = (list(x) for x in (dims.batch, dims.m, dims.n, dims.k))
    if not gk:
        return None
    macs = 1
    for n in extent.values():
        macs *= n
    if macs < MIN_MACS:
        return None
    mm, nn, kk = _merge(gm, [a, c], extent), _merge(gn, [b, c], extent), _merge(gk, [a, b], extent)
    if mm is None or nn is None or kk is None:
        return None
    (M, sm), (N, sn), (K, sk) = mm, nn, kk
    # C must be row-major in the BLAS view; if it is column-major, compute C^T = B^T A^T.
    c_fit = _matrix(M, N, sm.get(id(c), 0), sn.get(id(c), 0))
    a_rows, b_rows = (sm.get(id(a), 0), sk.get(id(a), 0)), (sk.get(id(b), 0), sn.get(id(b), 0))
    if c_fit is not None and not c_fit[0]:
        first, second = (a, M, K, *a_rows), (b, K, N, *b_rows)
        ldc = c_fit[1]
    else:
        c_fit = _matrix(N, M, sn.get(id(c), 0), sm.get(id(c), 0))
        if c_fit is None or c_fit[0]:
            return None
        first, second = (b, N, K, b_rows[1], b_rows[0]), (a, K, M, a_rows[1], a_rows[0])
        M, N = N, M
        ldc = c_fit[1]
    fa, fb = _matrix(*first[1:]), _matrix(*second[1:])
    if fa is None or fb is None:
        return None
    if isinstance(kind, products.KernelProduct):
        if M == 1 or N == 1:
            return None   # matrix-vector products stay loops (products.py)
        if first[0] is b:   # C^T = B^T A^T: the kernel's A is the op's second operand
            kind = products.KernelProduct(kind.symbol, kind.b_unsigned, kind.a_unsigned)
    return {
        "operands": [a, b, c],
        "kind": kind, "M": M, "N": N, "K": K, "ldc": ldc,
        "A": (first[0], *fa), "B": (second[0], *fb), "C": c,
        "batch": [(extent[d], {id(o): o.stride[d] for o in (a, b, c)}) for d in batch
                  if extent[d] > 1],
    }


def _kernel_kind(op: ir.Operation) -> products.KernelProduct | None:
    """The runtime kernel for a bf16 / 8-bit product in kernel form (products.py), where the
    kernels run on AMX here."""
    if op.name not in ("linalg.generic", "linalg.contract") \
            or not all(isinstance(v.type, ir.MemRefType) for v in op.operands):
        return None
    kernel = products.kernel_product(op)
    return kernel if kernel is not None and amx_products() else None


def _conv_plan(op: ir.Operation):
    """linalg.conv_2d_nhwc_hwcf as loops around gemms on shifted input windows (no im2col
    copy): strides and dilations become pointer offsets and leading dimensions.

    out[n, oh, ow, :] += in[n, oh*sh + kh*dh, ow*sw + kw*dw, :] @ filter[kh, kw]. Where the
    kernel is not dilated along W (and the input's (W, C) and the filter's (KW, C) are each
    one contiguous run), a whole kernel row is one contraction over K = KW*C, where the A
    rows do not overlap (BLAS checks lda >= K). The gemm's M dimension is the output row (ow, loops over n, oh, kh) or, where that
    is shorter than the batch (a weight gradient: a 3x3 "output" of a 56x56 "window"), the
    batch (n, loops over oh, ow, kh): whichever makes fewer, larger calls."""
    if op.name != "linalg.conv_2d_nhwc_hwcf" or len(op.operands) != 3:
        return None
    kind = _gemm_kind(op)
    if kind not in _REAL:
        return None
    x, f, o = (_Operand(v, list(range(4))) for v in op.operands)
    if not all(v.static for v in (x, f, o)):
        return None
    sh, sw = (int(v) for v in ir.DenseIntElementsAttr(op.attributes["strides"])) \
        if "strides" in op.attributes else (1, 1)
    dh, dw = (int(v) for v in ir.DenseIntElementsAttr(op.attributes["dilations"])) \
        if "dilations" in op.attributes else (1, 1)
    n, oh, ow, fo = o.type.shape
    kh, kw, c, _ = f.type.shape
    si, sf, so = ([v.stride[d] for d in range(4)] for v in (x, f, o))
    if si[3] != 1 or sf[3] != 1 or so[3] != 1 or n * oh * ow * fo * kh * kw * c < MIN_CONV_MACS:
        return None
    by_row = ow >= n   # M = ow (rows of one output line) or M = n (one pixel of each image)
    m = ow if by_row else n
    lda = sw * si[2] if by_row else si[0]
    # One K group over (kw, c) where both operands lay it out as one contiguous run and the
    # A rows do not overlap (BLAS rejects lda < K: a stride-1 row of windows cannot merge).
    merged = kw > 1 and dw * si[2] == c and sf[1] == c * sf[2] and (m == 1 or lda >= kw * c)
    k, k_loops = (kw * c, []) if merged else \
        (c, [(kw, {id(x): dw * si[2], id(f): sf[1], id(o): 0})])
    if m * fo * k < 4096:
        return None
    ldb, ldc = sf[2], so[2] if by_row else so[0]
    if (m > 1 and lda < k) or (k > 1 and ldb < fo) or (m > 1 and ldc < fo):
        return None
    if by_row:
        outer = [(n, {id(x): si[0], id(f): 0, id(o): so[0]}),
                 (oh, {id(x): sh * si[1], id(f): 0, id(o): so[1]})]
    else:
        outer = [(oh, {id(x): sh * si[1], id(f): 0, id(o): so[1]}),
                 (ow, {id(x): sw * si[2], id(f): 0, id(o): so[2]})]
    loops = [*outer, (kh, {id(x): dh * si[1], id(f): sf[0], id(o): 0}), *k_loops]
    return {"operands": [x, f, o], "kind": kind, "M": m, "N": fo, "K": k,
            # the outer loops write disjoint output rows: they may run on all cores
            "parallel": sum(1 for e, _ in outer if e > 1),
            "ldc": max(ldc, max(1, fo)) if m > 1 else max(1, fo),
            "A": (x, False, lda if m > 1 else max(1, k)),
            "B": (f, False, ldb if k > 1 else max(1, fo)),
            "C": o, "batch": [(e, st) for e, st in loops if e > 1], "accumulates": True}


def _build_parallel_conv_function(module: ir.Module, symbols: ir.SymbolTable, plan, name: str,
                                  beta: float, one_thread: bool) -> None:
    """Like `_build_gemm_function`, for a convolution plan whose leading `parallel` loops
    write disjoint parts of the output: their iterations, as one flat range, are split across
    Kiln's thread pool (`kiln_parallel_for`), each chunk running its gemms on its own thread
    (OpenBLAS's own threads on per-row calls cost more than they give: measured 241 ms
    against 28 ms for a weight gradient's 504 gemms of 64x64x448 on the loaded 2-core VM).
    `name(operands...)` stores the three base addresses in a context array for
    `name_body(ctx, begin, end)`."""
    from .parallel import _PARALLEL_FOR, _body_type   # (the runtime's parallel-for ABI)
    lib = blas()
    et = plan["kind"]
    size = _BYTES[et]
    (a, _, _), (b, _, _), c = plan["A"], plan["B"], plan["C"]
    order, roles = plan["operands"], (a, b, c)
    parallel, rest = plan["batch"][:plan["parallel"]], plan["batch"][plan["parallel"]:]
    extent = 1
    for e, _ in parallel:
        extent *= e
    i64 = builders.i64()
    builders.declare_external(module, symbols, _PARALLEL_FOR, [_body_type(), builders.pointer(), i64])
    body_name = builders.unique_symbol(symbols, name + "_body")

    # the body: chunk [begin, end) of the flattened parallel loops
    body = builders.define_private(module, symbols, body_name, [builders.pointer(), i64, i64])
    entry = body.entry_block
    ctx, begin, end = entry.arguments
    const = builders.Constants(entry)
    with ir.InsertionPoint(entry):
        ret = func.ReturnOp([])
    with ir.InsertionPoint(ret):
        base = {}
        for i, o in enumerate(roles):
            slot = llvm.GEPOp(builders.pointer(), ctx, [], [i], i64, llvm.GEPNoWrapFlags.none)
            base[id(o)] = arith.index_cast(builders.index(), llvm.LoadOp(i64, slot.result).result)
        alpha, beta_value = _scalars(et, beta, const)
        if one_thread:   # (the setting is per thread: each chunk sets its own)
            threads = func.CallOp([builders.i32()], ir.FlatSymbolRefAttr.get(_SET_THREADS),
                                  [const(1, builders.i32())]).result
        outer = scf.ForOp(arith.index_cast(builders.index(), begin),
                          arith.index_cast(builders.index(), end), const(1))
        with ir.InsertionPoint(outer.body):
            yield_ = scf.YieldOp([])
        if one_thread:
            func.CallOp([builders.i32()], ir.FlatSymbolRefAttr.get(_SET_THREADS), [threads])
    inner = ir.InsertionPoint(yield_)
    with inner:
        flat = outer.induction_variable
        for k, (e, strides) in enumerate(parallel):   # mixed radix: the last loop innermost
            below = 1
            for e2, _ in parallel[k + 1:]:
                below *= e2
            iv = arith.remui(arith.divui(flat, const(below)), const(e))
            for o in roles:
                base[id(o)] = arith.addi(base[id(o)], arith.muli(iv, const(strides[id(o)] * size)))
    inner = _batch_loops(rest, inner, base, {id(o): size for o in roles}, const)
    enum = lambda v: const(v, builders.i32())  # noqa: E731 - CBLAS enums are C ints
    n = lambda v: const(v, _blasint(lib))  # noqa: E731 - sizes are blasint
    with inner:
        pointers = [builders.as_pointer(base[id(o)]) for o in roles]
        func.CallOp([], ir.FlatSymbolRefAttr.get(lib.gemm(et, "gemm")),
                    _call_arguments(plan, "gemm", pointers, alpha, beta_value, enum, n))

    # the entry: base addresses -> ctx, then the parallel loop
    fn = builders.define_private(module, symbols, name, [o.type for o in order])
    entry = fn.entry_block
    arg = {id(o): v for o, v in zip(order, entry.arguments)}
    const = builders.Constants(entry)
    with ir.InsertionPoint(entry):
        ret = func.ReturnOp([])
    with ir.InsertionPoint(ret):
        context = memref.AllocaOp(ir.MemRefType.get([3], i64), [], []).result
        for i, o in enumerate(roles):
            address = builders.element_address(arg[id(o)], size, const)
            memref.StoreOp(arith.index_cast(i64, address), context, [const(i)])
        ctx = builders.as_pointer(memref.ExtractAlignedPointerAsIndexOp(context).result)
        callee = func.ConstantOp(_body_type(), ir.FlatSymbolRefAttr.get(body_name)).result
        func.CallOp([], ir.FlatSymbolRefAttr.get(_PARALLEL_FOR), [callee, ctx, const(extent, i64)])


# f32 products in a loop body (a scan's step), with at most this many rows, a B of at most
# SMALL_B elements in row-major order, and enough work for OpenBLAS to thread them
# (PARALLEL_MACS) go to the runtime's `kiln_sgemm_small` (runtime/kiln_sgemm_small.c), which
# reads B in place instead of packing it and runs such a step on the calling thread. OpenBLAS
# hands half of it to a spinning thread: as fast on an idle machine (rnn_scan's 200 steps of
# 32 x 256 @ 256 x 256: 12.6 ms through OpenBLAS, 14 ms here), 12x slower whenever the cores
# have other work (200-290 ms against 17 ms on the loaded 2-core VM). Smaller products run on
# one thread in OpenBLAS as before, and so do products outside loops, called once. 0 turns the
# route off.
SMALL_M = 64
SMALL_B = 1 << 18


def _routine(plan) -> str:
    """"gemv" where one side of the product is a vector (OpenBLAS's gemm with n = 1 runs at
    half gemv's speed or less: a 4096^2 matrix-vector product 5.9 ms against 2.4 ms),
    "small" for an f32 product with few rows (SMALL_M), else "gemm"."""
    if (plan["M"] == 1 or plan["N"] == 1) and not plan.get("accumulates") \
            and has_routine(plan["kind"], "gemv"):
        return "gemv"
    (_, tb, _) = plan["B"]
    if plan.get("in_loop") and plan["kind"] == "f32" and plan["M"] <= SMALL_M and not tb \
            and plan["K"] * plan["N"] <= SMALL_B \
            and plan["M"] * plan["N"] * plan["K"] >= PARALLEL_MACS \
            and not plan.get("accumulates") and not plan.get("parallel"):
        return "small"
    return "gemm"


def _call_arguments(plan, routine: str, pointers, alpha, beta, enum, n) -> list[ir.Value]:
    """The arguments of `cblas_?gemm` / `cblas_?gemv` for the plan's row-major
    C (M x N) = op(A) (M x K) op(B) (K x N)."""
    (_, ta, lda), (_, tb, ldb) = plan["A"], plan["B"]
    pa, pb, pc = pointers
    M, N, K = plan["M"], plan["N"], plan["K"]
    if routine == "small":
        # kiln_sgemm_small(M, N, K, A, a_row, a_col, B, ldb, C, ldc, accumulate): element
        # strides, B and C row-major; beta is 0 or 1
        a_row, a_col = (1, lda) if ta else (lda, 1)
        return [n(M), n(N), n(K), pa, n(a_row), n(a_col), pb, n(ldb), pc, n(plan["ldc"]),
                enum(0 if _zero_constant(beta, any_sign=False) else 1)]
    if routine == "gemm":
        return [enum(_ROW_MAJOR), enum(_TRANS if ta else _NO_TRANS),
                enum(_TRANS if tb else _NO_TRANS), n(M), n(N), n(K), alpha, pa, n(lda), pb,
                n(ldb), beta, pc, n(plan["ldc"])]
    if N == 1:
        # y (stride ldc) = op(A) x, x the column of B (stride ldb); gemv takes the stored
        # matrix's own rows and columns
        rows, cols = (K, M) if ta else (M, K)
        return [enum(_ROW_MAJOR), enum(_TRANS if ta else _NO_TRANS), n(rows), n(cols), alpha,
                pa, n(lda), pb, n(ldb), beta, pc, n(plan["ldc"])]
    # M == 1: y = x op(B), i.e. op(B)^T x, x the row of A (unit stride unless A is stored
    # transposed), y a row of C (unit stride)
    rows, cols = (N, K) if tb else (K, N)
    return [enum(_ROW_MAJOR), enum(_NO_TRANS if tb else _TRANS), n(rows), n(cols), alpha, pb,
            n(ldb), pa, n(lda if ta else 1), beta, pc, n(1)]


def _batch_loops(batch, at: ir.InsertionPoint, base: dict, sizes: dict, const) -> ir.InsertionPoint:
    """One scf.for per (extent, strides) of `batch`, nested at `at`; each iteration moves the
    base addresses in `base` (by operand id, updated in place, in its order) on by that
    dimension's element strides times `sizes`. Returns the point inside the innermost loop."""
    inner = at
    for extent, strides in batch:
        with inner:
            loop = scf.ForOp(const(0), const(extent), const(1))
        with ir.InsertionPoint(loop.body):
            yield_ = scf.YieldOp([])
        inner = ir.InsertionPoint(yield_)
        with inner:
            for key in base:
                step = arith.muli(loop.induction_variable, const(strides[key] * sizes[key]))
                base[key] = arith.addi(base[key], step)
    return inner


def _scalars(et: str, beta: float, const) -> tuple[ir.Value, ir.Value]:
    """alpha = 1 and beta as the routine takes them: by value for real types, by address for
    complex ones (at the insertion point, before any loop)."""
    if et in _REAL:
        return const(1.0, _element(et)), const(beta, _element(et))
    part = _element("f32" if et == "complex<f32>" else "f64")
    values = memref.AllocaOp(ir.MemRefType.get([4], part), [], []).result
    for i, v in enumerate((1.0, 0.0, beta, 0.0)):   # alpha (re, im), beta (re, im)
        memref.StoreOp(const(v, part), values, [const(i)])
    base = builders.element_address(values, _BYTES[et] // 2, const)
    return (builders.as_pointer(base),
            builders.as_pointer(arith.addi(base, const(_BYTES[et]))))


def _build_gemm_function(module: ir.Module, symbols: ir.SymbolTable, plan, name: str,
                         beta: float, one_thread: bool = False) -> None:
    """A private function `name` doing the contraction with `cblas_?gemm` (or `?gemv`) calls
    (on the calling thread only if `one_thread`), taking the op's operands in the op's order
    (BLAS's A and B may be swapped). Built at the module's end, with the current location."""
    et = plan["kind"]
    size = _BYTES[et]
    (a, _, _), (b, _, _), c = plan["A"], plan["B"], plan["C"]
    order = plan["operands"]
    fn = builders.define_private(module, symbols, name, [o.type for o in order])
    entry = fn.entry_block
    arg = {id(o): v for o, v in zip(order, entry.arguments)}
    const = builders.Constants(entry)   # hoisted to the top, in the order of first use
    with ir.InsertionPoint(entry):
        ret = func.ReturnOp([])
    with ir.InsertionPoint(ret):
        base = {id(o): builders.element_address(arg[id(o)], size, const) for o in (a, b, c)}
        alpha, beta_value = _scalars(et, beta, const)
        if one_thread:
            threads = func.CallOp([builders.i32()], ir.FlatSymbolRefAttr.get(_SET_THREADS),
                                  [const(1, builders.i32())]).result
    # one loop per batch dim, each iteration moving the three base addresses on
    inner = _batch_loops(plan["batch"], ir.InsertionPoint(ret), base,
                         {id(o): size for o in (a, b, c)}, const)
    enum = lambda v: const(v, builders.i32())  # noqa: E731 - CBLAS enums are C ints
    routine = _routine(plan)
    callee, size_type = _callee(plan, routine)
    n = lambda v: const(v, size_type)  # noqa: E731 - sizes are blasint (or the kernel's i64)
    with inner:
        pointers = [builders.as_pointer(base[id(o)]) for o in (a, b, c)]
        func.CallOp([], ir.FlatSymbolRefAttr.get(callee),
                    _call_arguments(plan, routine, pointers, alpha, beta_value, enum, n))
    if one_thread:
        with ir.InsertionPoint(ret):
            func.CallOp([builders.i32()], ir.FlatSymbolRefAttr.get(_SET_THREADS), [threads])


def _element(et: str) -> ir.Type:
    return ir.F32Type.get() if et == "f32" else ir.F64Type.get()


def _callee(plan, routine: str) -> tuple[str, ir.Type]:
    """The function a plan's `routine` call goes to, and the type it takes sizes in: a large
    f32 matrix-vector product goes to the runtime's `kiln_sgemv` (runtime/kiln_gemv.c: the
    same interface, int64 sizes), a large real gemm to the runtime's pooled entry (`_pooled`),
    everything else to the library. (The matrix is streamed once,
    which takes both cores; OpenBLAS's spinning hand-off between them loses 2-4x whenever
    anything else is runnable, the runtime's pool sleeps instead. Below PARALLEL_MACS both run
    on one thread and the library's kernel is as fast.)"""
    if routine == "gemv" and plan["kind"] == "f32" \
            and plan["M"] * plan["N"] * plan["K"] >= PARALLEL_MACS:
        return SGEMV_F32, builders.i64()
    if routine == "small":
        return SGEMM_SMALL_F32, builders.i64()
    if _pooled(plan, routine):
        return GEMM_POOLED[plan["kind"]], builders.i64()
    lib = blas()
    return lib.gemm(plan["kind"], routine), _blasint(lib)


def _pooled(plan, routine: str) -> bool:
    """Whether a product goes through the runtime's `kiln_?gemm_pooled`
    (runtime/kiln_gemm_pooled.c): every real gemm large enough for threads to pay
    (PARALLEL_MACS), where the library's thread count can be held at 1. It runs the product
    in pieces on Kiln's pool, each on the library's one-thread kernel, instead of on the
    library's spinning threads (only the largest on an idle machine go there): a flax
    transformer's training step on the 2-core VM 12.5 -> 8.2 ms alone, 24.1 -> 15.5 ms
    beside a busy process."""
    return routine == "gemm" and plan["kind"] in _REAL and thread_control() \
        and not plan.get("accumulates") and not plan.get("parallel") \
        and plan["M"] * plan["N"] * plan["K"] >= PARALLEL_MACS


def _blasint(lib: Blas) -> ir.Type:
    return builders.i32() if lib.int_type == "i32" else builders.i64()


def _gemm_signature(et: str, size_type: ir.Type, routine: str = "gemm") -> list[ir.Type]:
    """cblas_?gemm(order, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) or
    cblas_?gemv(order, trans, M, N, alpha, A, lda, x, incx, beta, y, incy); complex alpha and
    beta are passed by address. ("small": kiln_sgemm_small's, see `_call_arguments`.)"""
    n, i32, ptr = size_type, builders.i32(), builders.pointer()
    e = _element(et) if et in _REAL else ptr
    if routine == "small":
        return [n, n, n, ptr, n, n, ptr, n, ptr, n, i32]
    if routine == "gemv":
        return [i32, i32, n, n, e, ptr, n, ptr, n, e, ptr, n]
    return [i32, i32, i32, n, n, n, e, ptr, n, ptr, n, e, ptr, n]


def _in_loop(op: ir.Operation) -> bool:
    """Whether `op` runs in a loop body (called again on every iteration)."""
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        if parent.name in ("scf.while", "scf.for", "scf.forall", "scf.parallel"):
            return True
        parent = parent.parent
    return False


def _zero_fill_before(op: ir.Operation, out: ir.Value):
    """The `linalg.fill` of +0.0 into `out` immediately before `op`, if there is one."""
    block_ops = list(op.block.operations)
    i = next(i for i, o in enumerate(block_ops) if o.operation == op)
    if i == 0:
        return None
    prev = block_ops[i - 1].operation
    if prev.name != "linalg.fill" or prev.operands[1] != out:
        return None
    return prev if _zero_constant(prev.operands[0], any_sign=False) else None


def blas_calls(module: ir.Module) -> None:
    if blas_library() is None:
        return
    todo = builders.planned(
        module, (*_NAMED, "linalg.contract", "linalg.generic", "linalg.conv_2d_nhwc_hwcf"),
        lambda op: _conv_plan(op) if op.name.startswith("linalg.conv") else _plan(op))
    if not todo:
        return
    symbols = ir.SymbolTable(module.operation)
    for n, (op, plan) in enumerate(todo):
        if isinstance(plan["kind"], products.KernelProduct):
            _kernel_call(module, symbols, op, plan, n)
            continue
        plan["in_loop"] = _in_loop(op)
        # a convolution accumulates over the window: its zero fill must stay
        fill = None if plan.get("accumulates") else _zero_fill_before(op, plan["C"].value)
        name = builders.unique_symbol(symbols, f"kiln_gemm_{n}")
        et = plan["kind"]
        one_thread = thread_control() and _routine(plan) != "small" \
            and (plan["M"] * plan["N"] * plan["K"] < PARALLEL_MACS
                 or plan.get("accumulates", False))
        with op.location:
            build = _build_parallel_conv_function if plan.get("parallel") \
                else _build_gemm_function
            build(module, symbols, plan, name, 0.0 if fill is not None else 1.0, one_thread)
            routine = _routine(plan)
            callee, size_type = _callee(plan, routine)
            builders.declare_external(module, symbols, callee,
                                      _gemm_signature(et, size_type, routine))
            if one_thread:
                builders.declare_external(module, symbols, _SET_THREADS, [builders.i32()],
                                          [builders.i32()])
            with ir.InsertionPoint(op):
                func.CallOp([], ir.FlatSymbolRefAttr.get(name), list(op.operands))
        op.erase()
        if fill is not None:
            fill.erase()


# ---------------------------------------------------------------------------------------------
# the runtime's bf16 / 8-bit kernels (runtime/kiln_gemm.c)

_KERNEL_ACCUMULATE, _KERNEL_A_UNSIGNED, _KERNEL_B_UNSIGNED = 1, 2, 4   # kiln_gemm.h's flags
_KERNEL_BYTES = {"bf16": 2, "i8": 1, "f32": 4, "i32": 4}


def _kernel_signature() -> list[ir.Type]:
    """kiln_gemm_*(M, N, K, A, a_row, a_col, B, b_row, b_col, C, ldc, flags): strides in
    elements, C row-major."""
    i64, ptr = builders.i64(), builders.pointer()
    return [i64, i64, i64, ptr, i64, i64, ptr, i64, i64, ptr, i64, builders.i32()]


def _zero_int_fill_before(op: ir.Operation, out: ir.Value):
    """The `linalg.fill` of 0 (integer) or +0.0 into `out` immediately before `op`."""
    block_ops = list(op.block.operations)
    i = next(i for i, o in enumerate(block_ops) if o.operation == op)
    prev = block_ops[i - 1].operation if i else None
    if prev is None or prev.name != "linalg.fill" or prev.operands[1] != out:
        return None
    zero = _zero_constant(prev.operands[0], any_sign=False) or _zero_integer(prev.operands[0])
    return prev if zero else None


def _kernel_call(module: ir.Module, symbols: ir.SymbolTable, op: ir.Operation, plan,
                 n: int) -> None:
    """Replace `op` by a call of a private function that loops over the batch dims around
    one kernel call (as `_build_gemm_function` does for BLAS)."""
    kernel: products.KernelProduct = plan["kind"]
    fill = _zero_int_fill_before(op, plan["C"].value)
    name = builders.unique_symbol(symbols, f"kiln_gemm_{n}")
    (a, ta, lda), (b, tb, ldb), c = plan["A"], plan["B"], plan["C"]
    flags = (0 if fill is not None else _KERNEL_ACCUMULATE) \
        | (_KERNEL_A_UNSIGNED if kernel.a_unsigned else 0) \
        | (_KERNEL_B_UNSIGNED if kernel.b_unsigned else 0)
    with op.location:
        order = plan["operands"]
        fn = builders.define_private(module, symbols, name, [o.type for o in order])
        entry = fn.entry_block
        arg = {id(o): v for o, v in zip(order, entry.arguments)}
        const = builders.Constants(entry)
        size = {id(o): _KERNEL_BYTES[str(ir.MemRefType(o.type).element_type)] for o in (a, b, c)}
        with ir.InsertionPoint(entry):
            ret = func.ReturnOp([])
        with ir.InsertionPoint(ret):
            base = {id(o): builders.element_address(arg[id(o)], size[id(o)], const)
                    for o in (a, b, c)}
        inner = _batch_loops(plan["batch"], ir.InsertionPoint(ret), base, size, const)
        i64 = lambda v: const(v, builders.i64())  # noqa: E731
        # (transposed, ld) -> element strides of rows and columns
        a_row, a_col = (1, lda) if ta else (lda, 1)
        b_row, b_col = (1, ldb) if tb else (ldb, 1)
        with inner:
            pa, pb, pc = (builders.as_pointer(base[id(o)]) for o in (a, b, c))
            func.CallOp([], ir.FlatSymbolRefAttr.get(kernel.symbol),
                        [i64(plan["M"]), i64(plan["N"]), i64(plan["K"]), pa, i64(a_row),
                         i64(a_col), pb, i64(b_row), i64(b_col), pc, i64(plan["ldc"]),
                         const(flags, builders.i32())])
        builders.declare_external(module, symbols, kernel.symbol, _kernel_signature())
        with ir.InsertionPoint(op):
            func.CallOp([], ir.FlatSymbolRefAttr.get(name), list(op.operands))
    op.erase()
    if fill is not None:
        fill.erase()
