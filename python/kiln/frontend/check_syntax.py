"""The check dialect's custom syntax (StableHLO's interpreter tests) rewritten to generic form.

The bundled bindings have no `check` dialect, so `check.expect_eq_const %x, dense<1> :
tensor<i32>` does not parse; Kiln's context allows unregistered dialects, so the generic
form `"check.expect_eq_const"(%x) {value = dense<1> : tensor<i32>} : (tensor<i32>) -> ()`
does, and passes/checks.py outlines it like any other check. A `_const` check's expected
value becomes a `stablehlo.constant` on the same line, compared by the non-const check. The rewrite is textual and
keeps every statement on its first line, so locations of later ops stay right.

Forms (StableHLO's CheckOps.td assembly formats):
    check.expect_eq %a, %b attr-dict : T
    check.expect_almost_eq %a, %b (, tolerance = F)? attr-dict : T
    check.expect_close %a, %b (, min_ulp_difference = N)? (, max_ulp_difference = N)? attr-dict : T, T
    check.expect_eq_const %a, ELEMENTS-ATTR attr-dict
    check.expect_almost_eq_const %a, ELEMENTS-ATTR (, tolerance = F)? attr-dict
    check.expect_serialized_eq %a, probe_id = "id" (, iter = N)? attr-dict : T
"""
from __future__ import annotations

import re

from ..errors import KilnError

_START = re.compile(r"^([ \t]*)check\.(expect_[a-z_]+)\s", re.M)
_VALUE = re.compile(r"%[\w$.#-]+")
_OPEN, _CLOSE = "<[({", ">])}"
# Default attribute types, as the dialect declares them.
_ATTR_TYPES = {"tolerance": "f64", "max_ulp_difference": "i64", "min_ulp_difference": "i64",
               "iter": "i32"}


def has_custom_checks(text: str) -> bool:
    return _START.search(text) is not None


class _Scanner:
    """A cursor over one statement that understands nested brackets and quoted strings."""

    def __init__(self, text: str, pos: int, where: str):
        self.text, self.pos, self.where = text, pos, where

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t\r\n":
            self.pos += 1

    def peek(self, s: str) -> bool:
        # Same line only: a statement's punctuation never starts the next line.
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1
        return self.text.startswith(s, self.pos)

    def expect(self, s: str) -> None:
        if not self.peek(s):
            self.fail(f"expected '{s}'")
        self.pos += len(s)

    def value(self) -> str:
        self.skip_ws()
        m = _VALUE.match(self.text, self.pos)
        if not m:
            self.fail("expected an SSA value")
        self.pos = m.end()
        return m.group(0)

    def balanced(self, stop: str) -> str:
        """Text up to (not including) the first `stop` character outside brackets/strings;
        `stop` may include '\n'."""
        self.skip_ws()
        start, depth, i = self.pos, 0, self.pos
        text = self.text
        while i < len(text):
            c = text[i]
            if c == '"':
                i = text.index('"', i + 1) + 1 if '"' in text[i + 1:] else len(text)
                continue
            if depth == 0 and c in stop:
                break
            if c in _OPEN:
                depth += 1
            elif c in _CLOSE and not (c == ">" and i > 0 and text[i - 1] == "-"):
                depth -= 1
            i += 1
        self.pos = i
        return text[start:i].strip()

    def fail(self, message: str):
        raise KilnError(f"cannot read check op: {message}", location=self.where,
                        hint="expected the check dialect's syntax, e.g. "
                             "`check.expect_eq_const %x, dense<1> : tensor<i32>`")


def _attr_dict(sc: _Scanner) -> dict[str, str]:
    if not sc.peek("{"):
        return {}
    inner = sc.balanced("\n")
    body = inner[1:-1]
    out = {}
    for item in _split_top(body):
        name, _, val = item.partition("=")
        out[name.strip()] = val.strip()
    return out


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for c in text:
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += c
    if cur.strip():
        parts.append(cur)
    return [p for p in (x.strip() for x in parts) if p]


def _typed(name: str, value: str) -> str:
    return value if ":" in value or value.startswith('"') else f"{value} : {_ATTR_TYPES.get(name, 'i64')}"


def _rewrite_one(text: str, m: re.Match, where: str, loc: str = "") -> tuple[str, int]:
    """(generic form, end offset) of the statement starting at `m`."""
    kind = m.group(2)
    if kind == "expect_serialized_eq":
        raise KilnError("check.expect_serialized_eq compares the files the reference "
                        "interpreter's `interpreter.probe` writes; Kiln compiled code writes none",
                        location=where, hint="check the probed value with check.expect_eq_const")
    sc = _Scanner(text, m.end(), where)
    operands = [sc.value()]
    attrs: dict[str, str] = {}
    types: list[str]
    if kind.endswith("_const"):
        sc.expect(",")
        value = sc.balanced(":")
        sc.expect(":")
        vtype = sc.balanced(",{\n")
        attrs["value"] = f"{value} : {vtype}"
        types = [vtype]
    comma_taken = False
    if not kind.endswith("_const"):
        while sc.peek(","):
            sc.expect(",")
            sc.skip_ws()
            if sc.text[sc.pos] != "%":
                comma_taken = True
                break
            operands.append(sc.value())
    # Named trailing attributes: `, tolerance = 0.1`, `, max_ulp_difference = 3`, `, probe_id = "x"`.
    named = re.compile(r"\s*([a-z_]+)\s*=\s*" if comma_taken else r"\s*,\s*([a-z_]+)\s*=\s*")
    while (found := named.match(sc.text, sc.pos)):
        sc.pos = found.end()
        attrs[found.group(1)] = sc.balanced(",{:\n")
        named = re.compile(r"\s*,\s*([a-z_]+)\s*=\s*")
    for k, v in _attr_dict(sc).items():
        attrs[k] = v
    if not kind.endswith("_const"):
        sc.expect(":")
        types = _split_top(sc.balanced("\n"))
        if len(types) == 1:
            types = types * len(operands)
    prefix = ""
    if kind.endswith("_const"):
        # The expected value becomes a stablehlo.constant compared with the non-const check:
        # the bindings cannot hand every elements attribute (complex ones) to Python, the
        # constant op takes them all. It shares the statement's line, keeping locations.
        expected = f"%kiln_expected_{_rewrite_one.counter}"
        _rewrite_one.counter += 1
        prefix = f"{expected} = stablehlo.constant {attrs.pop('value')}{loc} "
        operands.append(expected)
        types = types * 2
        kind = kind[:-len("_const")]
    attrs = {k: _typed(k, v) for k, v in attrs.items()}
    attr_text = ", ".join(f"{k} = {v}" for k, v in attrs.items())
    generic = (prefix + f'"check.{kind}"({", ".join(operands)})'
               + (f" {{{attr_text}}}" if attr_text else "")
               + f" : ({', '.join(types)}) -> (){loc}")
    return generic, sc.pos


_rewrite_one.counter = 0


def rewrite(text: str, filename: str) -> str:
    """`text` with every custom-syntax check op in generic form. Newlines inside a statement
    are kept (as trailing blank lines) so every later line number is unchanged."""
    out, last = [], 0
    for m in _START.finditer(text):
        if m.start() < last:
            continue
        line = text.count("\n", 0, m.start()) + 1
        where = f"{filename}:{line}:{len(m.group(1)) + 1}"
        # The ops keep the statement's own position (text parsed from memory is file "-").
        loc = f' loc("-":{line}:{len(m.group(1)) + 1})'
        generic, end = _rewrite_one(text, m, where, loc)
        out.append(text[last:m.start()] + m.group(1) + generic + "\n" * text.count("\n", m.start(), end))
        last = end
    out.append(text[last:])
    return "".join(out)


# The generic form JAX-era testdata uses for constant checks. The bindings cannot hand a
# complex elements attribute to Python, so the expected value becomes a stablehlo.constant in
# the text itself (same line, locations of later ops unchanged), compared by the plain check.
_GENERIC_CONST = re.compile(
    r'"check\.(expect_eq|expect_almost_eq)_const"\((%[\w$.#-]+)\)\s*<\{value\s*=\s*'
    r'(dense<.*?>\s*:\s*(tensor<(?:[^<>\n]|<[^<>\n]*>)*>))(?P<rest>[^}\n]*)\}>\s*:\s*\(([^)\n]*)\)\s*->\s*\(\)')


def has_generic_const_checks(text: str) -> bool:
    return '"check.expect_' in text and "_const\"" in text


def rewrite_generic_consts(text: str) -> str:
    counter = iter(range(1 << 30))

    def replace(m: re.Match) -> str:
        kind, operand, value, value_type, rest, operand_type = m.group(1, 2, 3, 4, 5, 6)
        name = f"%kiln_expected_{next(counter)}"
        attrs = rest.strip().lstrip(",").strip()
        attr_text = f" {{{attrs}}}" if attrs else ""
        return (f"{name} = stablehlo.constant {value} "
                f'"check.{kind}"({operand}, {name}){attr_text} : ({operand_type}, {value_type}) -> ()')

    return _GENERIC_CONST.sub(replace, text)
