"""Bounds on what inlining may build, checked before MLIR's inliner runs.

The inliner copies a callee's body into every caller, into every function, before symbol-dce
drops the private ones. Functions that call each other twice per level grow the program as
2^levels, and a chain of N functions, each calling the next, makes N^2/2 operations: a 30-level
doubling and a 20,000-deep chain took a compile worker to 4.2 GB and 8.9 GB. So the size every
function reaches once inlined is computed from the call graph first, and a program past the
limit is refused at the function that makes it so, with a located error.
"""
from __future__ import annotations

import re

from torch_mlir import ir

from .. import environment
from .. import pipeline
from ..errors import KilnError

# Operations the inliner may build, summed over every function (KILN_MAX_INLINED_OPS, by
# default 2^21: kiln/environment.py): far past a large model (the biggest conformance
# programs hold tens of thousands), far below what exhausts memory (a few hundred bytes
# each). A program may in any case grow to MIN_GROWTH times its own size.
MIN_GROWTH = 8
# Calls nested deeper than this are no program's structure (and Kiln's walks stay shallow).
MAX_CALL_DEPTH = 1024

def max_inlined_ops() -> int:
    raw = environment.get("KILN_MAX_INLINED_OPS")
    try:
        return max(1, int(raw))
    except ValueError:
        raise KilnError(f"KILN_MAX_INLINED_OPS={raw!r} is not a number",
                        hint="set it to the most operations inlining may build") from None


def check_inlining_growth(module: ir.Module, filename: str) -> None:
    """Refuse `module` if inlining its calls would nest calls deeper than MAX_CALL_DEPTH or
    build more operations than max_inlined_ops() (or MIN_GROWTH times its own, if more)."""
    funcs = [op.operation for op in module.body.operations if op.operation.name == "func.func"]
    if len(funcs) < 2:
        return  # nothing to inline: the common case after the first inlining
    own: dict[str, int] = {}
    calls: dict[str, list[str]] = {}
    where: dict[str, ir.Location] = {}
    for func in funcs:
        name = ir.StringAttr(func.attributes["sym_name"]).value
        count, callees = _scan(func)
        own[name], calls[name], where[name] = count, callees, func.location
    limit = max(max_inlined_ops(), MIN_GROWTH * sum(own.values()))
    size, depth = _inlined_sizes(own, calls, limit)
    too_deep = [n for n in own if depth[n] > MAX_CALL_DEPTH]
    if too_deep:  # named where the chain crosses the bound
        name = min(too_deep, key=lambda n: depth[n])
        raise KilnError(f"@{name} starts a chain of calls {depth[name]} deep; Kiln inlines at "
                        f"most {MAX_CALL_DEPTH} levels", location=_located(where[name], filename),
                        hint="no XLA program nests calls this deep; the input is malformed or "
                             "hostile")
    total = sum(size.values())
    if total > limit:
        # Name the smallest function that alone is past the limit, else the largest one.
        over = [n for n in own if size[n] > limit]
        culprit = min(over, key=lambda n: size[n]) if over else max(own, key=lambda n: size[n])
        raise KilnError(f"inlining the program's calls would build more than {limit} "
                        f"operations (@{culprit} alone grows from {own[culprit]} to "
                        f"{_count(size[culprit], limit)})",
                        location=_located(where[culprit], filename),
                        hint="its functions call each other many times over, so inlining "
                             "multiplies their bodies; raise KILN_MAX_INLINED_OPS if the "
                             "program is really this large")


def _scan(func: ir.Operation) -> tuple[int, list[str]]:
    """(operations in `func`, the functions each of its call sites names, with repeats), read
    from its text: printing is C++, a Python walk over every operation was 20 us each. The
    pretty form prints one operation a line (regions' closing braces too: a slight
    overcount); large constants are elided, as inlining shares their data rather than copying
    it."""
    text = func.get_asm(large_elements_limit=16, use_local_scope=True)
    callees = []
    for m in _CALL_SITE.finditer(text):
        named = m.group(1) or m.group(2) or ""
        callees.extend(_unquote(name) for name in _SYMBOL.findall(named))
    return text.count("\n") + 1, callees


# `call @f(`, `callee = @f`, `decomposition = @f`, `called_computations = [@f, @g]`.
_SYMBOL = re.compile(r'@(?:"(?:[^"\\]|\\.)*"|[\w$.-]+)')
_CALL_SITE = re.compile(r'(?:\bcall\s+|\b(?:callee|decomposition)\s*=\s*)(@(?:"(?:[^"\\]|\\.)*"'
                        r'|[\w$.-]+))|\bcalled_computations\s*=\s*\[([^\]]*)\]')


def _unquote(symbol: str) -> str:
    name = symbol[1:]
    if name.startswith('"'):
        return name[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
    return name


def _inlined_sizes(own: dict[str, int], calls: dict[str, list[str]], limit: int
                   ) -> tuple[dict[str, int], dict[str, int]]:
    """Each function's size with every call inlined (saturating far past `limit`) and the
    depth of its deepest call chain, callees first and without recursion. A recursive call
    (a cycle) is never inlined: it counts as one operation, its chain as ended."""
    size: dict[str, int] = {}
    depth: dict[str, int] = {}
    cap = limit << 32  # exact well past the limit, so the first function past it can be named
    for root in own:
        if root in size:
            continue
        stack, on_path = [(root, 0)], {root}
        while stack:
            name, i = stack[-1]
            targets = calls[name]
            if i < len(targets):
                stack[-1] = (name, i + 1)
                callee = targets[i]
                if callee in own and callee not in size and callee not in on_path:
                    stack.append((callee, 0))
                    on_path.add(callee)
                continue
            stack.pop()
            on_path.discard(name)
            grown, deepest = own[name], 0
            for callee in targets:
                if callee in size:
                    grown += size[callee]
                    deepest = max(deepest, depth[callee] + 1)
            size[name], depth[name] = min(grown, cap), deepest
    return size, depth


def _count(size: int, limit: int) -> str:
    return f"more than {limit << 32}" if size >= limit << 32 else str(size)


def _located(location: ir.Location, filename: str) -> str:
    from ..diagnostics import format_location
    return format_location(location, filename)


# Every pipeline that holds MLIR's inliner checks first (kiln.pipeline.run_steps).
pipeline.BEFORE_INLINING.append(check_inlining_growth)
