"""Guards for inputs known to crash MLIR's C++ passes: each rejects one pattern with a located
KilnError naming the op and the fix, or rewrites it into a form that works, before any pass
runs; plus `copies_as_loops`, the CPU codegen fix-up for strided memref copies."""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import linalg

from ..errors import KilnError
from .ir_util import walk
from .legalize.hlo_builder import HloBuilder, replace_op, tensor_of


def _is_complex(t: ir.Type) -> bool:
    return isinstance(ir.ShapedType(t).element_type, ir.ComplexType)


def complex_bitcasts(module: ir.Module) -> None:
    """Upstream's bitcast_convert lowering crashes on complex elements (it emits an
    arith.bitcast, which has no complex form). A bitcast to the same type is the identity
    and is dropped; complex<f64> <-> 2 x complex<f32> is rebuilt from integer bit operations
    on the parts (little-endian, as XLA's CPU backend lays them out); the verifier rejects
    complex <-> real bitcasts before this runs."""
    for op in list(walk(module.operation)):
        if op.name != "stablehlo.bitcast_convert":
            continue
        src, res = op.operands[0], op.results[0]
        if not (_is_complex(src.type) or _is_complex(res.type)):
            continue
        if src.type == res.type:
            replace_op(op, [src])
            continue
        split = _complex_split(src.type, res.type)
        if split is None:
            raise KilnError(f"stablehlo.bitcast_convert from {src.type} to {res.type} is not supported",
                            location=str(op.location),
                            hint="bitcast the real and imaginary parts (stablehlo.real/imag) instead")
        shape, wide_first = split
        with ir.InsertionPoint(op), op.location:
            h = HloBuilder()
            out = _split_parts(h, src, shape) if wide_first else _join_parts(h, src, shape)
        replace_op(op, [out])


def _complex_split(src: ir.Type, res: ir.Type) -> tuple[list[int], bool] | None:
    """(S, True) for complex<f64>[S] -> complex<f32>[S, 2], (S, False) for the reverse, else
    None (other complex bitcasts, dynamic shapes)."""
    src, res = ir.RankedTensorType(src), ir.RankedTensorType(res)
    if not (src.has_static_shape and res.has_static_shape):
        return None
    s_el, r_el = str(src.element_type), str(res.element_type)
    if s_el == "complex<f64>" and r_el == "complex<f32>":
        return list(src.shape), True
    if s_el == "complex<f32>" and r_el == "complex<f64>":
        return list(res.shape), False
    return None


def _splat(h: HloBuilder, value: int, shape: list[int], etype: str) -> ir.Value:
    t = tensor_of(shape, etype)
    return h.op("stablehlo.constant", [], shape, etype, value=ir.DenseElementsAttr.get_splat(
        t, ir.IntegerAttr.get(t.element_type, value)))


def _split_parts(h: HloBuilder, x: ir.Value, shape: list[int]) -> ir.Value:
    """complex<f64>[S] -> complex<f32>[S, 2]: element k holds part k's low and high halves."""
    mask = _splat(h, 0xFFFFFFFF, shape, "ui64")
    c32 = _splat(h, 32, shape, "ui64")
    halves = []
    for part in (h.real, h.imag):
        bits = h.unary("bitcast_convert", part(x), "ui64")
        lo64, hi64 = h.binary("and", bits, mask), h.binary("shift_right_logical", bits, c32)
        lo32, hi32 = h.convert(lo64, "ui32"), h.convert(hi64, "ui32")
        lo, hi = h.unary("bitcast_convert", lo32, "f32"), h.unary("bitcast_convert", hi32, "f32")
        halves.append(h.reshape(h.complex(lo, hi), [*shape, 1]))
    return h.concatenate(halves, len(shape))


def _join_parts(h: HloBuilder, x: ir.Value, shape: list[int]) -> ir.Value:
    """complex<f32>[S, 2] -> complex<f64>[S]: part k from element k's two halves."""
    c32 = _splat(h, 32, shape, "ui64")
    parts = []
    for k in range(2):
        pair = h.reshape(h.slice(x, [0] * len(shape) + [k], [*shape, k + 1]), shape)
        lo_f, hi_f = h.real(pair), h.imag(pair)
        lo32, hi32 = h.unary("bitcast_convert", lo_f, "ui32"), h.unary("bitcast_convert", hi_f, "ui32")
        lo, hi = h.convert(lo32, "ui64"), h.binary("shift_left", h.convert(hi32, "ui64"), c32)
        parts.append(h.unary("bitcast_convert", h.binary("or", lo, hi), "f64"))
    return h.complex(*parts)


GUARDS: list = [complex_bitcasts]


def check_guards(module: ir.Module) -> None:
    for guard in GUARDS:
        guard(module)


def copies_as_loops(module: ir.Module) -> None:
    """`memref.copy` between strided views (pad and slice write through subviews) lowers to a
    call of `memrefCopy` from MLIR's C runner library, which the JIT does not load: the
    unresolved symbol made the program jump to address 0. Such copies become `linalg.copy`,
    which the codegen stage turns into plain loops. Contiguous copies stay memcpy."""
    def identity(t) -> bool:
        layout = ir.MemRefType(t).layout
        # An identity map prints as `(d0, d1) -> (d0, d1)`; anything else (strided<...>) is not.
        return isinstance(layout, ir.AffineMapAttr) and layout.value == ir.AffineMap.get_identity(
            layout.value.n_dims)

    for func in module.body.operations:
        for op in list(walk(func.operation)):
            if op.name != "memref.copy":
                continue
            src, dst = op.operands
            if identity(src.type) and identity(dst.type):
                continue
            with ir.InsertionPoint(op), op.location:
                linalg.copy(src, outs=[dst])
            op.erase()
