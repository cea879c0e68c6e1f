"""Types by allowlist: the types a value of an input program may have (issue 25).

An XLA program computes on tensors of XLA's element types, tokens and tuples. MLIR's parser
accepts any type wherever an op's definition does not restrict it: a function's block
arguments, `func.call` results, `stablehlo.optimization_barrier`, the regions of while/if/case.
A program that carried an `!llvm.ptr`, a `memref` (a pointer, sizes and strides the lowered
code trusts), an `index` or a vector would reach passes written for XLA's types, which assume
them. check_input (trust.py) therefore checks the type of every value (op results and block
arguments) against this list, before anything else reads the program:

  ranked tensors (static, dynamic `?`, or bounded: `#stablehlo.bounds` / `#mhlo.type_extensions`
  encodings only) of
    i1, i2/ui2, i4/ui4, i8/ui8, i16/ui16, i32/ui32, i64/ui64 (signless or unsigned);
    f16, bf16, f32, f64 and StableHLO's 8/6/4-bit floats; complex<f32>, complex<f64>;
    StableHLO's quantized element types (`!quant.uniform`, per tensor or per axis);
  `!stablehlo.token`, `!mhlo.token`; `tuple<...>` of these.

Anything else is a located KilnError naming the value and its type.
"""
from __future__ import annotations

from torch_mlir import ir

from ..errors import KilnError

_INTEGER_WIDTHS = frozenset({2, 4, 8, 16, 32, 64})
_FLOATS = frozenset({
    "f16", "bf16", "f32", "f64", "f8E4M3FN", "f8E5M2", "f8E4M3FNUZ", "f8E5M2FNUZ",
    "f8E4M3B11FNUZ", "f8E4M3", "f8E3M4", "f6E2M3FN", "f6E3M2FN", "f4E2M1FN", "f8E8M0FNU"})
_COMPLEX = frozenset({"complex<f32>", "complex<f64>"})
# StableHLO's quantized element types (per-tensor and per-axis uniform quantization).
_QUANTIZED_PREFIX = "!quant.uniform<"
_TOKENS = frozenset({"!stablehlo.token", "!mhlo.token"})
_BOUND_ENCODINGS = ("#stablehlo.bounds<", "#mhlo.type_extensions<")


def _element_allowed(element: ir.Type) -> bool:
    if isinstance(element, ir.IntegerType):
        integer = ir.IntegerType(element)
        if integer.is_signed:
            return False   # `si32`: StableHLO's integers are signless or unsigned
        return integer.width in _INTEGER_WIDTHS or (integer.width == 1 and integer.is_signless)
    spelled = str(element)
    return spelled in _FLOATS or spelled in _COMPLEX or spelled.startswith(_QUANTIZED_PREFIX)


def type_allowed(vtype: ir.Type) -> bool:
    """Whether a value of an XLA program can have type `vtype` (see the module doc)."""
    if isinstance(vtype, ir.RankedTensorType):
        tensor = ir.RankedTensorType(vtype)
        encoding = tensor.encoding
        if encoding is not None and not str(encoding).startswith(_BOUND_ENCODINGS):
            return False
        return _element_allowed(tensor.element_type)
    if isinstance(vtype, ir.TupleType):
        tuple_type = ir.TupleType(vtype)
        return all(type_allowed(tuple_type.get_type(i)) for i in range(tuple_type.num_types))
    return str(vtype) in _TOKENS


class TypeChecker:
    """Checks the values of the ops of one program; a type is judged once per program."""

    def __init__(self):
        self._verdicts: dict[ir.Type, bool] = {}

    def _allowed(self, vtype: ir.Type) -> bool:
        verdict = self._verdicts.get(vtype)
        if verdict is None:
            verdict = self._verdicts[vtype] = type_allowed(vtype)
        return verdict

    def check(self, op: ir.Operation) -> None:
        """The types of `op`'s results and of its regions' block arguments."""
        for i, result in enumerate(op.results):
            if not self._allowed(result.type):
                self._refuse(op, f"result {i} of '{op.name}'", result.type)
        for region in op.regions:
            for block in region.blocks:
                for i, argument in enumerate(block.arguments):
                    if not self._allowed(argument.type):
                        what = (f"argument {i} of @{_symbol(op)}" if op.name == "func.func"
                                else f"block argument {i} of '{op.name}'")
                        self._refuse(op, what, argument.type)

    @staticmethod
    def _refuse(op: ir.Operation, what: str, vtype: ir.Type) -> None:
        raise KilnError(f"{what} has type {vtype}, which an XLA program cannot hold",
                        location=str(op.location),
                        hint="values of an input program are tensors of XLA's element types "
                             "(integers, floats, complex, quantized), tokens or tuples of them "
                             "(see docs/guides/trust.md)")


def _symbol(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value
