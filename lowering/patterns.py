"""Kiln's lowerings as rewrite patterns.

A lowering is a function `lower(op)` that builds the replacement just before `op` with the
bindings' op builders (inside `with ir.InsertionPoint(op), op.location:`) and hands `op`'s
uses over with `replace_op(op, values)`; it returns False when it leaves the op alone.

`pattern_pass({"stablehlo.sort": lower_sort, ...})` makes one pass of such functions: a
RewritePatternSet, each function a pattern on its root op, applied by MLIR's walk-based
driver (`walk_and_apply_patterns`), which visits every op once and folds nothing, so the
output is exactly what the lowerings build. While a pattern runs, `replace_op` goes through
the driver's PatternRewriter; called outside one, it replaces the op directly.

MLIR's C++ is built without exceptions, so an exception must not unwind through the driver:
a pattern that raises is recorded, reports "no match", and the exception (a located
KilnError, usually) is raised again once the driver returns.
"""
from __future__ import annotations

from typing import Callable, Sequence

from torch_mlir import ir
from torch_mlir.rewrite import RewritePatternSet, walk_and_apply_patterns

Lowering = Callable[[ir.Operation], "bool | None"]

_rewriters: list = []  # the PatternRewriter of each pattern being applied, innermost last


def replace_op(op: ir.Operation, values: Sequence[ir.Value]) -> None:
    """Make `values` (built before `op`) stand for op's results, and erase op."""
    if _rewriters:
        _rewriters[-1].replace_op(op, list(values))
        return
    for result, value in zip(op.results, values):
        result.replace_all_uses_with(value)
    op.erase()


def pattern_pass(lowerings: dict[str, Lowering]) -> Callable[[ir.Module], None]:
    """A pass applying `lowerings` ({root op name: lowering}) as rewrite patterns."""

    def run(module: ir.Module) -> None:
        failures: list[BaseException] = []
        with module.context:
            patterns = RewritePatternSet()
            for root, lower in lowerings.items():
                patterns.add(root, _as_pattern(lower, failures))
            walk_and_apply_patterns(module.operation, patterns.freeze())
        if failures:
            raise failures[0]

    run.__doc__ = "Apply, as rewrite patterns: " + ", ".join(
        f"{root} -> {fn.__name__}" for root, fn in lowerings.items())
    run.applies_to = frozenset(lowerings)  # nothing to do without a root (registry.py)
    return run


def _as_pattern(lower: Lowering, failures: list[BaseException]):
    def pattern(op, rewriter) -> bool:
        """The driver's protocol: a falsy return means matched and rewritten."""
        if failures:
            return True  # the pass has failed: leave the rest alone
        _rewriters.append(rewriter)
        try:
            return lower(op.operation) is False
        except BaseException as exc:  # noqa: BLE001 - re-raised after the driver returns
            failures.append(exc)
            return True
        finally:
            _rewriters.pop()

    return pattern
