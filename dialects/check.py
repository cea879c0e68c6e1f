"""The `check` dialect of StableHLO's interpreter tests, registered in every Kiln context.

Each op is declared once below: its operands and required attributes (checked by IRDL), the
optional attributes and type rules Python verifies (`verify_invariants`), and how it is written
in custom assembly (`FORM`). The bindings' Python-defined dialects (`torch_mlir.dialects.ext`,
lowered to IRDL) give ops the generic syntax only (and no properties), so `read_check_syntax`
turns a source's custom-form statements (and `<{...}>` properties) into the generic form of
these registered ops before MLIR parses it, and `custom_syntax` prints an op back in custom
form. lowering/checks.py consumes the ops. `check.eq` appears only as a custom-call target
(`stablehlo.custom_call @check.eq`), never as an op, so it is not declared.

Custom forms (StableHLO's CheckOps.td assembly formats):
    check.expect_eq %a, %b attr-dict : T
    check.expect_almost_eq %a, %b (, tolerance = F)? attr-dict : T
    check.expect_close %a, %b (, min_ulp_difference = N)? (, max_ulp_difference = N)? attr-dict : T, T
    check.expect_eq_const %a, ELEMENTS-ATTR attr-dict
    check.expect_almost_eq_const %a, ELEMENTS-ATTR (, tolerance = F)? attr-dict
    check.expect_serialized_eq %a, probe_id = "id" (, iter = N)? attr-dict : T
"""
# No `from __future__ import annotations`: ext reads the ops' annotations as live types.
import re
from dataclasses import dataclass
from typing import Any

from torch_mlir import ir
from torch_mlir.dialects import ext

from kiln.errors import KilnError


class CheckDialect(ext.Dialect, name="check"):
    pass


@dataclass(frozen=True)
class Form:
    """How an op is written in custom assembly: its SSA operands; for `_const` kinds the expected
    elements attribute; `, name = value` keywords (name -> the type of an untyped value); the
    operand types, one shared (`: T`) or one each (`: T, T`) or none (`_const`: the value's)."""
    operands: int
    const: bool = False
    keywords: tuple[tuple[str, str], ...] = ()
    types: str = "shared"


class _CheckOp(CheckDialect.Operation):
    """What every check verifies: tensor operands of one shape, the optional attributes' kinds,
    and for `_const` kinds an expected value typed like the operand."""
    # Class attributes, not annotations: ext reads annotations as the op's fields.
    FORM = Form(operands=0)
    OPTIONAL = {}  # optional attribute -> ir.FloatAttr / ir.IntegerAttr (ext has no optional ones)

    def verify_invariants(self) -> bool:
        # Runs before IRDL's own operand checks, so it may not assume their count.
        problem = _problem(self.operation, self.FORM, self.OPTIONAL)
        if problem:
            self.location.emit_error(f"'{self.operation.name}' op {problem}")
            return False
        return True


def _problem(op: ir.Operation, form: Form, optional: dict[str, type]) -> str | None:
    operands = list(op.operands)
    if len(operands) != form.operands or len(op.results):
        return f"takes {form.operands} tensor operand(s) and has no results"
    types = [v.type for v in operands]
    if not all(_is_a(ir.RankedTensorType, t) for t in types):
        return "takes ranked tensor operands"
    shapes = {tuple(ir.RankedTensorType(t).shape) for t in types}
    if len(shapes) != 1:
        return f"compares tensors of different shapes: {', '.join(map(str, types))}"
    if form.types == "shared" and len(set(map(str, types))) != 1:
        return f"compares tensors of different types: {', '.join(map(str, types))}"
    if form.const:
        value = attribute_text(op, "value")
        if value is None:
            return "requires attribute 'value'"
        if not value.startswith(("dense<", "dense_resource<", "sparse<")):
            return "expects 'value' to be an elements attribute"
        value_type = value.rsplit(" : ", 1)[-1]
        if value_type != str(types[0]):
            return f"expects 'value' of type {types[0]}, got {value_type}"
    for name, kind in optional.items():
        if name in op.attributes and not _is_a(kind, op.attributes[name]):
            return f"expects '{name}' to be a {kind.__name__}"
    return None


def attribute_text(op: ir.Operation, name: str) -> str | None:
    """The text of `op`'s attribute `name`. A complex elements attribute cannot be handed to
    Python (reading it raises, and NamedAttribute.attr aborts the process); its text can."""
    attributes = op.attributes
    for i in range(len(attributes)):
        named = attributes[i]
        if named.name == name:
            return str(named)[len(f"NamedAttribute({name}="):-1]
    return None


def expected_value(op: ir.Operation) -> ir.Operation:
    """A `stablehlo.constant` of a `_const` check's expected value, inserted before it, built
    from the value's text for the reason attribute_text gives."""
    value = attribute_text(op, "value")
    value_type = value.rsplit(" : ", 1)[-1]
    with op.context:
        const = ir.Operation.parse(f'"stablehlo.constant"() {{value = {value}}} : () -> '
                                   f"{value_type} {op.location}")
    ir.InsertionPoint(op).insert(const.operation)
    return const.operation


def _is_a(kind: type, attr: ir.Attribute) -> bool:
    # The bindings' casting constructors are their isinstance.
    try:
        kind(attr)
        return True
    except (ValueError, TypeError):
        return False


# -- the ops: operands and required attributes are IRDL-verified; FORM is their custom syntax --
class ExpectEqOp(_CheckOp, name="expect_eq"):
    lhs: ext.Operand[ir.RankedTensorType]
    rhs: ext.Operand[ir.RankedTensorType]
    FORM = Form(operands=2)


class ExpectAlmostEqOp(_CheckOp, name="expect_almost_eq"):
    lhs: ext.Operand[ir.RankedTensorType]
    rhs: ext.Operand[ir.RankedTensorType]
    FORM = Form(operands=2, keywords=(("tolerance", "f64"),))
    OPTIONAL = {"tolerance": ir.FloatAttr}


class ExpectCloseOp(_CheckOp, name="expect_close"):
    actual: ext.Operand[ir.RankedTensorType]
    expected: ext.Operand[ir.RankedTensorType]
    FORM = Form(operands=2, keywords=(("min_ulp_difference", "i64"), ("max_ulp_difference", "i64")),
                types="each")
    OPTIONAL = {"min_ulp_difference": ir.IntegerAttr, "max_ulp_difference": ir.IntegerAttr}


# An elements attribute has no IRDL base name the bindings can state (ir.DenseElementsAttr has
# no `attr_name`), so `value` is declared as any attribute and _problem checks its kind and type.
class ExpectEqConstOp(_CheckOp, name="expect_eq_const"):
    lhs: ext.Operand[ir.RankedTensorType]
    value: Any
    FORM = Form(operands=1, const=True, types="none")


class ExpectAlmostEqConstOp(_CheckOp, name="expect_almost_eq_const"):
    lhs: ext.Operand[ir.RankedTensorType]
    value: Any
    FORM = Form(operands=1, const=True, keywords=(("tolerance", "f64"),), types="none")
    OPTIONAL = {"tolerance": ir.FloatAttr}


class ExpectSerializedEqOp(_CheckOp, name="expect_serialized_eq"):
    expected: ext.Operand[ir.RankedTensorType]
    probe_id: ir.StringAttr
    FORM = Form(operands=1, keywords=(("probe_id", ""), ("iter", "i32")))
    OPTIONAL = {"iter": ir.IntegerAttr}


OPS = {cls.OPERATION_NAME: cls for cls in CheckDialect.operations}


def load(ctx: ir.Context) -> None:
    with ctx, ir.Location.unknown():
        CheckDialect.load()


# -- custom syntax ---------------------------------------------------------------------------
_START = re.compile(r"^([ \t]*)check\.([a-z_]+)(?=[ \t])", re.M)
_VALUE = re.compile(r"%[\w$.#-]+")
_KEYWORD = re.compile(r"[ \t]*,?[ \t]*([a-z_]+)[ \t]*=[ \t]*")
_OPEN, _CLOSE = "<[({", ">])}"


_GENERIC_WITH_PROPERTIES = re.compile(r'"check\.[a-z_]+"\([^()]*\)\s*<(?=\{)')


def has_check_syntax(text: str) -> bool:
    """Whether `text` needs read_check_syntax before MLIR can parse it."""
    return _START.search(text) is not None or _GENERIC_WITH_PROPERTIES.search(text) is not None


def read_check_syntax(text: str, filename: str) -> str:
    """`text` with its check ops in the generic form the registered dialect parses."""
    return _properties_as_attributes(read_custom_syntax(text, filename), filename)


def _properties_as_attributes(text: str, filename: str) -> str:
    """StableHLO's generic test data writes a check's attributes as properties
    (`"check.expect_eq_const"(%0) <{value = ...}>`); ext's ops (extensible dialects) have no
    properties, so they become the op's attributes (`{value = ...}`), on the same lines."""
    out, last = [], 0
    for m in _GENERIC_WITH_PROPERTIES.finditer(text):
        cursor = _Cursor(text, m.end(), filename)
        attrs = cursor.balanced(">")
        cursor.expect(">")
        out.append(text[last:m.end() - 1] + attrs)
        last = cursor.pos
    out.append(text[last:])
    return "".join(out)


def read_custom_syntax(text: str, filename: str) -> str:
    """`text` with every custom-form check statement in generic form. A statement spanning
    several lines keeps its newlines (as trailing blank lines), so later line numbers and the
    ops' own positions (`loc("-":line:col)`, as parsing from memory records) stay right."""
    out, last = [], 0
    for m in _START.finditer(text):
        if m.start() < last:
            continue  # inside a statement already rewritten
        indent, kind = m.group(1), m.group(2)
        line, col = text.count("\n", 0, m.start()) + 1, len(indent) + 1
        cursor = _Cursor(text, m.end(), f"{filename}:{line}:{col}")
        generic = _read_statement(kind, cursor) + f' loc("-":{line}:{col})'
        out.append(text[last:m.start()] + indent + generic + "\n" * text.count("\n", m.start(), cursor.pos))
        last = cursor.pos
    out.append(text[last:])
    return "".join(out)


def _read_statement(kind: str, cur: "_Cursor") -> str:
    op = OPS.get(f"check.{kind}")
    if op is None:
        cur.fail(f"unknown op 'check.{kind}'", hint="the check dialect has " +
                 ", ".join(sorted(OPS)))
    form: Form = op.FORM
    operands = [cur.value()]
    for _ in range(form.operands - 1):
        cur.expect(",")
        operands.append(cur.value())
    attrs: dict[str, str] = {}
    types: list[str] = []
    if form.const:
        cur.expect(",")
        value = cur.balanced(":")
        cur.expect(":")
        types = [cur.balanced(",{\n")]
        attrs["value"] = f"{value} : {types[0]}"
    keywords = dict(form.keywords)
    while (found := _KEYWORD.match(cur.text, cur.pos)) and found.group(1) in keywords:
        cur.pos = found.end()
        attrs[found.group(1)] = _typed(cur.balanced(",{:\n"), keywords[found.group(1)])
    if cur.peek("{"):
        attrs.update(_attr_dict(cur.balanced("\n")))
    if form.types != "none":
        cur.expect(":")
        types = _split_top(cur.balanced("\n"))
        if form.types == "shared" and len(types) == 1:
            types = types * form.operands
    if len(types) != form.operands:
        cur.fail(f"check.{kind} expects {form.operands} operand type(s), got {len(types)}")
    attr_text = ", ".join(f"{k} = {v}" for k, v in attrs.items())
    return (f'"check.{kind}"({", ".join(operands)})' + (f" {{{attr_text}}}" if attr_text else "")
            + f" : ({', '.join(types)}) -> ()")


def _typed(value: str, default_type: str) -> str:
    untyped = ":" not in value and not value.startswith('"') and default_type
    return f"{value} : {default_type}" if untyped else value


def _attr_dict(text: str) -> dict[str, str]:
    out = {}
    for item in _split_top(text.strip()[1:-1]):
        name, _, value = item.partition("=")
        out[name.strip()] = value.strip()
    return out


def _split_top(text: str) -> list[str]:
    """`text` split at commas outside brackets."""
    parts, depth, current = [], 0, ""
    for c in text:
        depth += (c in _OPEN) - (c in _CLOSE)
        if c == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += c
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


class _Cursor:
    """A position in one statement that skips nested brackets and quoted strings."""

    def __init__(self, text: str, pos: int, where: str):
        self.text, self.pos, self.where = text, pos, where

    def peek(self, s: str) -> bool:
        # Same line only: a statement's punctuation never starts the next line.
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1
        return self.text.startswith(s, self.pos)

    def expect(self, s: str) -> None:
        if not self.peek(s):
            self.fail(f"expected '{s}'")
        self.pos += len(s)

    def _skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t\r\n":
            self.pos += 1

    def value(self) -> str:
        self._skip_space()
        m = _VALUE.match(self.text, self.pos)
        if not m:
            self.fail("expected an SSA value")
        self.pos = m.end()
        return m.group(0)

    def balanced(self, stop: str) -> str:
        """The text up to the first `stop` character outside brackets and strings."""
        self._skip_space()
        text, start, depth, i = self.text, self.pos, 0, self.pos
        while i < len(text):
            c = text[i]
            if c == '"':
                end = text.find('"', i + 1)
                i = len(text) if end < 0 else end + 1
                continue
            if depth == 0 and (c in stop or text.startswith("//", i)):  # a trailing comment ends it
                break
            if c in _OPEN:
                depth += 1
            elif c in _CLOSE and not (c == ">" and text[i - 1] == "-"):  # `->` closes nothing
                depth -= 1
            i += 1
        self.pos = i
        return text[start:i].strip()

    def fail(self, message: str, hint: str | None = None):
        raise KilnError(f"cannot read check op: {message}", location=self.where,
                        hint=hint or "expected the check dialect's syntax, e.g. "
                                     "`check.expect_eq_const %x, dense<1> : tensor<i32>`")


def custom_syntax(op: ir.Operation) -> str:
    """`op` (a check op) in its custom form, the inverse of read_custom_syntax."""
    op = op.operation
    form: Form = OPS[op.name].FORM
    operands = [v.get_name() for v in op.operands]
    text = f"{op.name} {', '.join(operands)}"
    if form.const:
        text += f", {attribute_text(op, 'value')}"
    written = {"value"} if form.const else set()
    for name, default_type in form.keywords:
        if name in op.attributes:
            value = attribute_text(op, name)
            if default_type and value.endswith(f" : {default_type}"):
                value = value[:-len(f" : {default_type}")]
            text += f", {name} = {value}"
            written.add(name)
    names = [op.attributes[i].name for i in range(len(op.attributes))]
    rest = {n: attribute_text(op, n) for n in names if n not in written}
    if rest:
        text += " {" + ", ".join(f"{k} = {v}" for k, v in rest.items()) + "}"
    types = [str(v.type) for v in op.operands]
    if form.types == "shared":
        text += f" : {types[0]}"
    elif form.types == "each":
        text += f" : {', '.join(types)}"
    return text
