"""Guards for inputs known to crash MLIR's C++ passes: each rejects one pattern with a located
KilnError naming the op and the fix, or rewrites it into a form that works, before any pass
runs; plus `copies_as_loops`, the CPU codegen fix-up for strided memref copies."""
from __future__ import annotations

from torch_mlir import ir

from ..errors import KilnError
from .ir_util import walk


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
            res.replace_all_uses_with(src)
            op.erase()
            continue
        text = _complex_bitcast_text(ir.RankedTensorType(src.type), ir.RankedTensorType(res.type))
        if text is None:
            raise KilnError(f"stablehlo.bitcast_convert from {src.type} to {res.type} is not supported",
                            location=str(op.location),
                            hint="bitcast the real and imaginary parts (stablehlo.real/imag) instead")
        with op.location:
            helper = ir.Module.parse(text)  # kept alive while its ops are cloned
        body = helper.body.operations
        with ir.InsertionPoint(op), op.location:
            mapping = {}
            for inner in body[0].regions[0].blocks[0].operations:
                inner = inner.operation
                if inner.name == "func.return":
                    res.replace_all_uses_with(mapping[inner.operands[0]])
                    break
                clone = inner.clone()
                for i, operand in enumerate(clone.operands):
                    clone.operands[i] = mapping.get(operand, src)
                mapping[inner.results[0]] = clone.results[0]
        op.erase()


def _complex_bitcast_text(src: ir.RankedTensorType, res: ir.RankedTensorType) -> str | None:
    """A function computing the complex<f64> <-> 2 x complex<f32> bitcast, or None."""
    s_el, r_el = str(src.element_type), str(res.element_type)
    if not (src.has_static_shape and res.has_static_shape):
        return None
    if s_el == "complex<f64>" and r_el == "complex<f32>":
        shape, wide_first = list(src.shape), True
    elif s_el == "complex<f32>" and r_el == "complex<f64>":
        shape, wide_first = list(res.shape), False
    else:
        return None

    def t(element: str, extra: list[int] = ()) -> str:
        dims = "x".join(str(d) for d in shape + list(extra))
        return f"tensor<{dims + 'x' if dims else ''}{element}>"

    rank = len(shape)
    lines = []
    if wide_first:  # complex<f64>[S] -> complex<f32>[S, 2]: element k holds part k's 2 halves
        lines.append(f"%mask = stablehlo.constant dense<4294967295> : {t('ui64')}")
        lines.append(f"%c32 = stablehlo.constant dense<32> : {t('ui64')}")
        for part in ("real", "imag"):
            p = part[:2]
            lines += [
                f"%{p} = stablehlo.{part} %x : ({src}) -> {t('f64')}",
                f"%{p}b = stablehlo.bitcast_convert %{p} : ({t('f64')}) -> {t('ui64')}",
                f"%{p}lo64 = stablehlo.and %{p}b, %mask : {t('ui64')}",
                f"%{p}hi64 = stablehlo.shift_right_logical %{p}b, %c32 : {t('ui64')}",
                f"%{p}lo32 = stablehlo.convert %{p}lo64 : ({t('ui64')}) -> {t('ui32')}",
                f"%{p}hi32 = stablehlo.convert %{p}hi64 : ({t('ui64')}) -> {t('ui32')}",
                f"%{p}lo = stablehlo.bitcast_convert %{p}lo32 : ({t('ui32')}) -> {t('f32')}",
                f"%{p}hi = stablehlo.bitcast_convert %{p}hi32 : ({t('ui32')}) -> {t('f32')}",
                f"%{p}c = stablehlo.complex %{p}lo, %{p}hi : {t('complex<f32>')}",
                f"%{p}r = stablehlo.reshape %{p}c : ({t('complex<f32>')}) -> {t('complex<f32>', [1])}",
            ]
        lines.append(f"%out = stablehlo.concatenate %rer, %imr, dim = {rank} : "
                     f"({t('complex<f32>', [1])}, {t('complex<f32>', [1])}) -> {res}")
    else:  # complex<f32>[S, 2] -> complex<f64>[S]
        lines.append(f"%c32 = stablehlo.constant dense<32> : {t('ui64')}")
        for k, p in enumerate(("re", "im")):
            lo, hi = [0] * rank + [k], [*shape, k + 1]
            lines += [
                f"%{p}s = stablehlo.slice %x [{', '.join(f'{a}:{b}' for a, b in zip(lo, hi))}] : "
                f"({src}) -> {t('complex<f32>', [1])}",
                f"%{p}e = stablehlo.reshape %{p}s : ({t('complex<f32>', [1])}) -> {t('complex<f32>')}",
                f"%{p}lof = stablehlo.real %{p}e : ({t('complex<f32>')}) -> {t('f32')}",
                f"%{p}hif = stablehlo.imag %{p}e : ({t('complex<f32>')}) -> {t('f32')}",
                f"%{p}lo32 = stablehlo.bitcast_convert %{p}lof : ({t('f32')}) -> {t('ui32')}",
                f"%{p}hi32 = stablehlo.bitcast_convert %{p}hif : ({t('f32')}) -> {t('ui32')}",
                f"%{p}lo = stablehlo.convert %{p}lo32 : ({t('ui32')}) -> {t('ui64')}",
                f"%{p}hi0 = stablehlo.convert %{p}hi32 : ({t('ui32')}) -> {t('ui64')}",
                f"%{p}hi = stablehlo.shift_left %{p}hi0, %c32 : {t('ui64')}",
                f"%{p}b = stablehlo.or %{p}lo, %{p}hi : {t('ui64')}",
                f"%{p} = stablehlo.bitcast_convert %{p}b : ({t('ui64')}) -> {t('f64')}",
            ]
        lines.append(f"%out = stablehlo.complex %re, %im : {res}")
    body = "\n  ".join(lines)
    return f"func.func @f(%x: {src}) -> {res} {{\n  {body}\n  return %out : {res}\n}}"


GUARDS: list = [complex_bitcasts]


def check_guards(module: ir.Module) -> None:
    for guard in GUARDS:
        guard(module)


def copies_as_loops(module: ir.Module) -> None:
    """`memref.copy` between strided views (pad and slice write through subviews) lowers to a
    call of `memrefCopy` from MLIR's C runner library, which the JIT does not load: the
    unresolved symbol made the program jump to address 0. Such copies become `linalg.copy`,
    which the codegen stage turns into plain loops. Contiguous copies stay memcpy."""
    from torch_mlir.dialects import linalg
    from .ir_util import walk

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
