"""`Executable.verify` (`kiln run --verify`, `kiln.compile(..., verify=True)`): Kiln's answer
against the StableHLO reference interpreter's, down to the first operation that differs.

A silent wrong answer is the worst kind of compiler bug; this turns one into a bug report.
The program is taken after Kiln's `optimize` stage (one function, calls inlined, checks
outlined), every intermediate value of its body is made an extra result, and that program
runs both natively and in the interpreter on the same inputs. Walking the body in order,
the first operation whose value differs is the one whose lowering is wrong (its operands
agreed). Values are graded like the conformance runner grades results against the
interpreter: a few ULPs or a relative tolerance by width, integers exactly.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from torch_mlir import ir

from ..context import make_context
from ..diagnostics import format_location
from ..errors import KilnError

# Set by lowerings and read back by the driver: meaningless (and refused) in a new input.
_INTERNAL_ATTRIBUTES = ("kiln.checks", "kiln.user_results", "kiln.result_sources")


@dataclass
class Difference:
    op: str                 # the first operation whose value differs
    location: str           # where it is in the input
    result: int             # which of its results
    detail: str             # how they differ (count, worst element)
    kiln: np.ndarray
    reference: np.ndarray

    def __str__(self) -> str:
        shown = lambda a: np.array2string(np.asarray(a), threshold=20, edgeitems=3)  # noqa: E731
        return (f"{self.location}: '{self.op}' (result {self.result}) is the first operation "
                f"whose value differs from the reference interpreter: {self.detail}\n"
                f"  kiln:      {shown(self.kiln)}\n  reference: {shown(self.reference)}")


@dataclass
class VerifyReport:
    compared: int                         # values compared (results and intermediates)
    difference: Difference | None = None
    outputs_differ: list[int] = field(default_factory=list)  # results that differ

    @property
    def ok(self) -> bool:
        return self.difference is None and not self.outputs_differ

    def __str__(self) -> str:
        if self.ok:
            return f"verify: {self.compared} values match the reference interpreter"
        if self.difference is not None:
            return "verify: " + str(self.difference)
        return (f"verify: results {self.outputs_differ} differ from the reference interpreter, "
                f"but no intermediate value does")


def verify_executable(exe, arrays: list[np.ndarray]) -> VerifyReport:
    """Run `exe` (an Executable) on the flat `arrays` through Kiln and through the reference
    interpreter, and name the first operation whose value differs."""
    from .. import reference
    from ..lowering.ir_util import find_entry, function_type, symbol_name
    optimized = exe.ir("optimize", arg_shapes=[a.shape for a in arrays], locations=True)
    # After the `layout` stage, parameters with a non-default layout take physical arrays.
    arrays = exe.layouts.physical_arguments(arrays)
    with make_context() as ctx:
        module = ir.Module.parse(optimized)
        func = find_entry(module, exe.entry)
        for name in _INTERNAL_ATTRIBUTES:
            if name in func.attributes:
                del func.attributes[name]
        user_results = len(function_type(func).results)
        producers = _expose_intermediates(func)
        arg_types = [str(t) for t in function_type(func).inputs]
        text = str(module)
        entry_name = symbol_name(func)
        try:
            expected = reference.evaluate(text, arrays, arg_types, entry_name)
        except KilnError as exc:
            raise KilnError(f"cannot verify: {exc.message}", location=exe.filename,
                            hint="the reference interpreter runs StableHLO only (no custom "
                                 "calls)") from None
        instrumented = type(exe)(module, exe.target, entry_name,
                                 f"{exe.filename} (instrumented for verify)")
        got = instrumented.flat(*arrays)
        report = _compare(got, expected, user_results, producers, exe.filename)
    del ctx
    return report


def _expose_intermediates(func: ir.Operation) -> list[tuple[ir.Operation, int]]:
    """Make every tensor value computed at the top level of `func`'s body an extra result
    (after the original ones); returns the op and result index behind each extra result."""
    from ..lowering.ir_util import body_block, set_results
    block = body_block(func)
    ret = block.operations[len(block.operations) - 1].operation
    values, producers = list(ret.operands), []
    for op in list(block.operations)[:-1]:
        op = op.operation
        if op.name == "stablehlo.constant":
            continue  # a constant cannot be lowered wrongly in a way its users would not show
        for i, result in enumerate(op.results):
            if isinstance(result.type, ir.RankedTensorType):
                values.append(result)
                producers.append((op, i))
    set_results(func, values)
    return producers


def _compare(got, expected, user_results: int, producers, filename: str) -> VerifyReport:
    from ..runtime import checks
    outcomes = [checks.evaluate({"kind": "reference", "loc": str(i)}, [g, e])
                for i, (g, e) in enumerate(zip(got, expected))]
    report = VerifyReport(len(outcomes), None,
                          [i for i, o in enumerate(outcomes[:user_results]) if not o.passed])
    for (op, index), outcome, g, e in zip(producers, outcomes[user_results:],
                                           got[user_results:], expected[user_results:]):
        if not outcome.passed:
            report.difference = Difference(op.name, format_location(op.location, filename),
                                           index, outcome.detail, g, e)
            break
    return report
