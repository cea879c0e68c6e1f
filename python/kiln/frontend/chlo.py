"""CHLO inputs (`chlo.erf_inv`, `chlo.top_k`, `chlo.lgamma`...), converted through jaxlib.

The bundled MLIR bindings register no `chlo` dialect, so such text does not even parse; their
C++ `chlo-legalize-to-stablehlo` only ever sees CHLO ops that other C++ passes create. jaxlib
bundles the dialect and the same decompositions XLA itself applies, so Kiln parses the text
with jaxlib's MLIR, legalizes CHLO there, and hands the pure StableHLO module over as a
StableHLO portable artifact (versioned VHLO bytecode, which keeps locations), the form
two different builds of StableHLO exchange safely.
"""
from __future__ import annotations

import re

from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo

from ..errors import KilnError
from ..lowering.trust import INPUT_DIALECTS
from . import mlir as mlir_frontend

# An op (not an attribute such as `mhlo.num_replicas`) of the dialect: pretty `chlo.erf %x`
# / `%0 = chlo.erf` or generic `"chlo.erf"(`.
_CHLO_OP = re.compile(r'(?:^\s*|=\s*)"?chlo\.[a-z_0-9]+\b', re.M)

INSTALL_HINT = "install JAX (`pip install jax`), whose jaxlib bundles the CHLO/MHLO dialects"


def has_chlo(text: str) -> bool:
    return _CHLO_OP.search(text) is not None


def _jaxlib(what: str):
    """jaxlib's MLIR (ir, passmanager, stablehlo module, context factory) or a clear error."""
    try:
        from jax._src.interpreters import mlir as jax_mlir
        from jax._src.lib.mlir import ir as jir, passmanager as jpm
        from jaxlib.mlir._mlir_libs import _mlirHlo, _stablehlo as jst
    except ImportError as exc:
        raise KilnError(f"{what} programs need jaxlib's MLIR, which cannot be imported ({exc})",
                        hint=INSTALL_HINT) from None
    jst.register_stablehlo_passes()
    _mlirHlo.register_mhlo_passes()
    return jax_mlir, jir, jpm, jst


def _jax_error(exc, filename: str, what: str, source: str) -> KilnError:
    """jaxlib's MLIRError as a located KilnError (its diagnostics have the same shape)."""
    from ..diagnostics import format_location, _op_at
    diags = list(getattr(exc, "error_diagnostics", []))
    if not diags:
        return KilnError(f"{what}: {str(exc).splitlines()[0]}", location=filename)
    first = diags[0]
    location = format_location(str(first.location), filename)
    op = _op_at(source, location)
    message = first.message if op is None or op in first.message else f"'{op}': {first.message}"
    return KilnError(f"{what}: {message}", location=location,
                     hint="; ".join(n.message for n in first.notes)[:300] or None)


def convert_through_jaxlib(text: str, ctx: ir.Context, filename: str, what: str,
                           pipeline: str, prepare=None) -> ir.Module:
    """Parse `text` with jaxlib, run `pipeline` there, and return the result as a module of
    Kiln's `ctx` by way of a portable artifact."""
    jax_mlir, jir, jpm, jst = _jaxlib(what)
    jctx = jax_mlir.make_ir_context()
    # Kiln's check ops are unknown to jaxlib: its context parses unregistered ops, and any
    # beyond the dialects an input may hold is refused before a pass of jaxlib's sees it.
    jctx.allow_unregistered_dialects = True
    with jctx:
        try:
            module = jir.Module.parse(text)
        except jir.MLIRError as exc:
            raise _jax_error(exc, filename, "cannot parse MLIR", text) from None
        foreign = next((op for op in _walk(module.operation)
                        if op.name.split(".")[0] not in INPUT_DIALECTS), None)
        if foreign is not None:
            from ..diagnostics import format_location
            raise KilnError(f"'{foreign.name}' is not allowed in an input program",
                            location=format_location(str(foreign.location), filename),
                            hint="programs may hold only " + ", ".join(sorted(INPUT_DIALECTS - {"builtin"}))
                                 + " ops (see docs/guides/trust.md)")
        if prepare is not None:
            prepare(module, jir)
        try:
            jpm.PassManager.parse(pipeline).run(module.operation)
        except jir.MLIRError as exc:
            raise _jax_error(exc, filename, f"cannot legalize {what} to StableHLO", text) from None
        left = sorted({op.name for op in _walk(module.operation) if op.name.split(".")[0] in ("chlo", "mhlo")})
        if left:
            raise KilnError(f"{what} op(s) {', '.join(left)} have no StableHLO equivalent",
                            location=filename, hint="express them in StableHLO")
        target = jst.get_smaller_version(jst.get_current_version(), _stablehlo.get_current_version())
        try:
            artifact = jst.serialize_portable_artifact(module, target, allow_other_dialects=True)
        except Exception as exc:  # jaxlib raises a plain error for unserializable IR
            raise KilnError(f"cannot serialize the legalized {what} program: {str(exc).splitlines()[0]}",
                            location=filename) from None
    return mlir_frontend.parse_bytecode(bytes(artifact), ctx, filename)


# CHLO ops computed in f32 for bf16/f16 operands, as XLA's CPU backend does (it normalizes
# narrow floats to f32 around elementwise math): the decompositions evaluated in bf16 are
# several ULPs off XLA's results. Bit-exact ops (next_after) and non-elementwise ones keep
# their type.
_KEEP_NARROW = {"chlo.next_after", "chlo.top_k", "chlo.constant", "chlo.constant_like",
                "chlo.ragged_dot", "chlo.is_inf", "chlo.is_neg_inf", "chlo.is_pos_inf"}
_NARROW = ("bf16", "f16")


def _narrow_float(jir, t) -> bool:
    try:
        ranked = jir.RankedTensorType(t)
    except ValueError:
        return False
    return str(ranked.element_type) in _NARROW


def upcast_narrow_floats(module, jir) -> None:
    """Wrap each elementwise CHLO op on bf16/f16 tensors in converts to and from f32."""
    f32 = jir.F32Type.get()
    for op in list(_walk(module.operation)):
        if not op.name.startswith("chlo.") or op.name in _KEEP_NARROW or op.regions:
            continue
        values = list(op.operands) + list(op.results)
        if not values or not all(_narrow_float(jir, v.type) for v in values):
            continue
        with jir.InsertionPoint(op), op.location:
            wide = [jir.Operation.create(
                "stablehlo.convert", results=[_with_f32(jir, v.type, f32)], operands=[v]).result
                for v in op.operands]
            new = jir.Operation.create(op.name, results=[_with_f32(jir, r.type, f32) for r in op.results],
                                       operands=wide,
                                       attributes={a.name: a.attr for a in op.attributes})
            for old, result in zip(op.results, new.results):
                back = jir.Operation.create("stablehlo.convert", results=[old.type], operands=[result])
                old.replace_all_uses_with(back.result)
        op.erase()


def reverse_scans(module, jir) -> None:
    """jaxlib's `chlo-legalize-to-stablehlo` ignores `chlo.scan`'s `is_reverse` and would
    silently scan forwards. A reverse scan is the forward scan of the reversed inputs with its
    per-position outputs reversed back (the carries are the same), so Kiln rewrites it that
    way first."""
    for op in list(_walk(module.operation)):
        if op.name != "chlo.scan" or "is_reverse" not in op.attributes:
            continue
        scan = op.opview
        reverse = jir.BoolAttr(op.attributes["is_reverse"]).value
        del op.attributes["is_reverse"]
        if not reverse:
            continue
        dims = jir.DenseI64ArrayAttr.get([jir.IntegerAttr(scan.dimension).value])
        n_inputs, n_inits = len(scan.inputs), len(scan.inits)
        with jir.InsertionPoint(op), op.location:
            for i in range(n_inputs):
                value = op.operands[i]
                rev = jir.Operation.create("stablehlo.reverse", results=[value.type],
                                           operands=[value], attributes={"dimensions": dims})
                op.operands[i] = rev.result
        # Outputs come first, then one carry per init.
        outputs = list(op.results)[:len(op.results) - n_inits]
        reversed_back = []
        point = op
        for result in outputs:
            with jir.InsertionPoint.after(point), op.location:
                rev = jir.Operation.create("stablehlo.reverse", results=[result.type],
                                           operands=[result], attributes={"dimensions": dims})
            reversed_back.append(rev)
            point = rev
        for result, rev in zip(outputs, reversed_back):
            result.replace_all_uses_except(rev.result, rev)


def prepare_chlo(module, jir) -> None:
    reverse_scans(module, jir)
    upcast_narrow_floats(module, jir)


def _with_f32(jir, t, f32):
    ranked = jir.RankedTensorType(t)
    return jir.RankedTensorType.get(ranked.shape, f32)


def _walk(op):
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                yield child.operation
                yield from _walk(child.operation)


def chlo_to_stablehlo(text: str, ctx: ir.Context, filename: str) -> ir.Module:
    return convert_through_jaxlib(text, ctx, filename, "CHLO",
                                  "builtin.module(func.func(chlo-legalize-to-stablehlo))",
                                  prepare=prepare_chlo)
