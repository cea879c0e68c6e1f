"""Parser for HLO module text into a small in-memory model.

Instructions keep their attribute values as raw text (plus source position); the emitter
interprets each attribute with the typed helpers at the bottom of this file.  That keeps the
parser total over attribute forms it does not know (new XLA attributes are simply carried),
while every attribute the importer relies on is still checked, with a location, when used.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from kiln.distributed.groups import iota_groups
from kiln.errors import KilnError
from kiln.layout import Shape, parse_shape_at

from .lexer import Scanner

# Sections of newer dumps that describe source locations; their lines are skipped.
_DEBUG_SECTIONS = {"FileNames", "FunctionNames", "FileLocations", "StackFrames"}


@dataclass
class Attr:
    raw: str
    pos: int


@dataclass
class Instruction:
    name: str
    shape: Shape
    opcode: str
    operands: list[str]
    operand_shapes: list[Shape | None]
    attrs: dict[str, Attr]
    pos: int
    is_root: bool = False
    payload: str | None = None   # raw text inside constant(...) / parameter(...)
    payload_pos: int = 0
    literal: object = None       # a constant's array(s), when read from a proto, not text


@dataclass
class Computation:
    name: str
    instructions: list[Instruction] = field(default_factory=list)
    is_entry: bool = False
    pos: int = 0

    @property
    def root(self) -> Instruction:
        for ins in self.instructions:
            if ins.is_root:
                return ins
        return self.instructions[-1]

    def parameters(self) -> list[Instruction]:
        ps = [i for i in self.instructions if i.opcode == "parameter"]
        return sorted(ps, key=lambda i: int(i.payload))


@dataclass
class Module:
    name: str
    attrs: dict[str, Attr]
    computations: dict[str, Computation]
    entry: str
    scanner: Scanner

    @property
    def entry_computation(self) -> Computation:
        return self.computations[self.entry]

    def where(self, pos: int) -> str:
        return self.scanner.where(pos)


def is_hlo_text(text: str) -> bool:
    """True when `text` looks like an HLO module: `HloModule` after comments/whitespace."""
    s = Scanner(text)
    try:
        s.skip()
    except KilnError:
        return False
    return s.text.startswith("HloModule", s.pos)


class Parser:
    def __init__(self, text: str, filename: str = "<hlo>"):
        self.s = Scanner(text, filename)

    def parse_module(self) -> Module:
        s = self.s
        if not s.accept("HloModule"):
            s.error(f"expected 'HloModule' at the start of the module, got {s.describe_here()}",
                    hint="HLO text starts with 'HloModule <name>'")
        name = s.name("module name")
        attrs = {}
        # Header attributes sit on the header line: `, key=value` pairs.
        while True:
            s.skip(newlines=False)
            if not s.text.startswith(",", s.pos):
                break
            s.pos += 1
            key = s.name("module attribute name")
            s.expect("=", f"after module attribute '{key}'")
            raw, pos = s.balanced()
            attrs[key] = Attr(raw, pos)
        comps: dict[str, Computation] = {}
        entry = None
        while not s.at_end():
            word = s.peek_name()
            if word in _DEBUG_SECTIONS:
                self._skip_debug_section()
                continue
            comp = self._computation()
            if comp.name in comps:
                s.error(f"duplicate computation name '{comp.name}'", comp.pos)
            comps[comp.name] = comp
            if comp.is_entry:
                if entry is not None:
                    s.error("more than one ENTRY computation", comp.pos)
                entry = comp.name
        if not comps:
            s.error("module has no computations", hint="expected 'ENTRY name { ... }'")
        if entry is None:
            entry = list(comps)[-1]  # the printer puts the entry last when unmarked
            comps[entry].is_entry = True
        return Module(name, attrs, comps, entry, s)

    def _skip_debug_section(self):
        s = self.s
        s.name("section name")
        s.skip_line()
        while True:
            s.skip()
            if s.pos < len(s.text) and s.text[s.pos].isdigit():
                s.skip_line()
            else:
                return

    def _computation(self) -> Computation:
        s = self.s
        s.skip()
        pos = s.pos
        is_entry = s.accept("ENTRY")
        name = s.name("computation name")
        # Optional signature `(p: f32[2], ...) -> f32[2]`; the parameter instructions carry
        # the same information, so it is only skipped (balanced) here.
        if s.peek("("):
            s.balanced(stop="-{", stop_at_newline=False)
        if s.accept("->"):
            s.skip()
            _, s.pos = parse_shape_at(s.text, s.pos, s.where)
        s.expect("{", f"to open the body of computation '{name}'")
        comp = Computation(name, is_entry=is_entry, pos=pos)
        while not s.accept("}"):
            if s.at_end():
                s.error(f"unterminated computation '{name}', expected '}}'", pos)
            comp.instructions.append(self._instruction())
        # `, execution_thread="..."` may follow a computation.
        while s.peek(",") and not s.peek(",\n"):
            s.accept(",")
            s.name("computation attribute")
            s.expect("=", "after computation attribute")
            s.balanced()
        if not comp.instructions:
            s.error(f"computation '{name}' has no instructions", pos)
        names = set()
        for ins in comp.instructions:
            if ins.name in names:
                s.error(f"duplicate instruction name '{ins.name}' in '{name}'", ins.pos)
            names.add(ins.name)
        return comp

    def _instruction(self) -> Instruction:
        s = self.s
        s.skip()
        pos = s.pos
        is_root = False
        if s.peek_name() == "ROOT":
            s.pos += 4
            is_root = True
        name = s.name("instruction name")
        s.expect("=", f"after instruction name '{name}'")
        s.skip()
        shape, s.pos = parse_shape_at(s.text, s.pos, s.where)
        opcode = s.name("opcode")
        s.expect("(", f"after opcode '{opcode}'")
        operands, shapes, payload, ppos = [], [], None, 0
        if opcode in ("constant", "parameter"):
            payload, ppos = s.balanced(stop=")", stop_at_newline=False)
            if opcode == "parameter" and not re.fullmatch(r"\s*-?\d+\s*", payload):
                s.pos = ppos
                s.error(f"expected parameter(<number>), got parameter({payload.strip()})")
            s.expect(")", f"to close {opcode}(...)")
        else:
            while not s.accept(")"):
                raw, opos = s.balanced(stop=",)", stop_at_newline=False)
                raw = re.sub(r"/\*.*?\*/", "", raw).strip()
                if not raw:
                    s.error(f"expected an operand of '{name}', got {s.describe_here()}")
                oshape = None
                m = re.search(r"(\S+)$", raw)
                oname = m.group(1).lstrip("%")
                if m.start() > 0:
                    try:
                        oshape, _ = parse_shape_at(raw[:m.start()], 0)
                    except KilnError:
                        oshape = None
                if not re.fullmatch(r"[A-Za-z_][\w.\-]*", oname):
                    s.error(f"expected an operand name, got '{raw}'", opos)
                operands.append(oname)
                shapes.append(oshape)
                s.accept(",")
        attrs = {}
        while s.peek(","):
            s.accept(",")
            key = s.name("attribute name")
            s.expect("=", f"after attribute '{key}'")
            raw, apos = s.balanced()
            attrs[key] = Attr(raw, apos)
        return Instruction(name, shape, opcode, operands, shapes, attrs, pos, is_root,
                           payload, ppos)


def parse_module(text: str, filename: str = "<hlo>") -> Module:
    # The parser and the attribute readers recurse on brackets: bound them first (every
    # caller, kiln-translate included, comes through here).
    from ..untrusted import check_text_nesting
    check_text_nesting(text, filename, angle_brackets=False)
    return Parser(text, filename).parse_module()


# ----------------------------------------------------------------------------- attribute helpers

class AttrReader:
    """Typed views of an instruction's raw attributes, raising located KilnErrors."""

    def __init__(self, ins: Instruction, module: Module):
        self.ins, self.m = ins, module
        self.read: set[str] = set()  # the attributes the emitter looked at (see unread())

    def unread(self) -> list[str]:
        """Attributes of the instruction that nothing read: a misspelled or unknown attribute
        would otherwise be ignored silently and the program run with another meaning."""
        return [k for k in self.ins.attrs if k not in self.read]

    def where(self, key=None) -> str:
        a = self.ins.attrs.get(key) if key else None
        return self.m.where(a.pos if a else self.ins.pos)

    def fail(self, msg, key=None, hint=None):
        raise KilnError(f"{self.ins.opcode} '{self.ins.name}': {msg}", location=self.where(key),
                        hint=hint)

    def has(self, key) -> bool:
        self.read.add(key)
        return key in self.ins.attrs

    def raw(self, key, default=None, required=False):
        self.read.add(key)
        a = self.ins.attrs.get(key)
        if a is None:
            if required:
                self.fail(f"missing attribute '{key}='")
            return default
        return a.raw

    def ints(self, key, default=None, required=False) -> list[int] | None:
        r = self.raw(key, None, required)
        if r is None:
            return default
        body = r.strip()
        if body.startswith("{") and body.endswith("}"):
            body = body[1:-1]
        body = body.strip()
        if not body:
            return []
        try:
            return [int(x) for x in body.split(",")]
        except ValueError:
            self.fail(f"expected a list of integers like {{0,1}} for '{key}', got '{r}'", key)

    def int(self, key, default=None, required=False) -> int | None:
        r = self.raw(key, None, required)
        if r is None:
            return default
        try:
            return int(r)
        except ValueError:
            self.fail(f"expected an integer for '{key}', got '{r}'", key)

    def bool(self, key, default=False) -> bool:
        r = self.raw(key)
        if r is None:
            return default
        if r not in ("true", "false"):
            self.fail(f"expected true or false for '{key}', got '{r}'", key)
        return r == "true"

    def float(self, key, default=None) -> float | None:
        r = self.raw(key)
        if r is None:
            return default
        try:
            return float(r)
        except ValueError:
            self.fail(f"expected a number for '{key}', got '{r}'", key)

    def computation(self, key, required=True) -> str | None:
        r = self.raw(key, None, required)
        if r is None:
            return None
        name = r.strip().lstrip("%")
        if name not in self.m.computations:
            self.fail(f"unknown computation '{name}' in '{key}='", key)
        return name

    def computations(self, key) -> list[str]:
        r = self.raw(key, None, True).strip()
        if r.startswith("{"):
            r = r[1:-1]
        names = [x.strip().lstrip("%") for x in r.split(",") if x.strip()]
        for n in names:
            if n not in self.m.computations:
                self.fail(f"unknown computation '{n}' in '{key}='", key)
        return names

    def string(self, key, default=None) -> str | None:
        r = self.raw(key)
        if r is None:
            return default
        if r.startswith('"'):
            from .lexer import unescape
            return unescape(r[1:-1])
        return r

    def slices(self, key="slice"):
        r = self.raw(key, None, True)
        out = []
        for m in re.finditer(r"\[\s*(-?\d+)\s*:\s*(-?\d+)\s*(?::\s*(-?\d+)\s*)?\]", r):
            out.append((int(m.group(1)), int(m.group(2)), int(m.group(3) or 1)))
        if not out and r.strip("{} "):
            self.fail(f"expected slice={{[start:limit:stride], ...}}, got '{r}'", key)
        return out

    def padding(self, key="padding"):
        """`0_0x1_2_1` -> [(lo, hi, interior)] per dimension."""
        r = self.raw(key, None, True).strip()
        dims = []
        if not r:
            return dims
        for part in r.split("x"):
            nums = part.split("_")
            try:
                vals = [int(n) for n in nums]
            except ValueError:
                self.fail(f"expected padding like 0_0x1_2_1, got '{r}'", key)
            if len(vals) == 2:
                vals.append(0)
            if len(vals) != 3:
                self.fail(f"expected lo_hi or lo_hi_interior per dimension, got '{part}'", key)
            dims.append(tuple(vals))
        return dims

    def window(self, rank: int, key="window"):
        """`{size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=.. rhs_dilate=.. rhs_reversal=0x1}`."""
        r = self.raw(key, "{}").strip()
        if r.startswith("{"):
            r = r[1:-1]
        w = {"size": [1] * rank, "stride": [1] * rank, "pad": [(0, 0)] * rank,
             "lhs_dilate": [1] * rank, "rhs_dilate": [1] * rank, "rhs_reversal": [0] * rank}
        for item in r.split():
            if "=" not in item:
                self.fail(f"bad window item '{item}', expected key=value", key)
            k, v = item.split("=", 1)
            try:
                if k == "pad":
                    vals = [tuple(int(n) for n in p.split("_")) for p in v.split("x")]
                else:
                    vals = [int(n) for n in v.split("x")]
            except ValueError:
                self.fail(f"bad window value '{item}'", key)
            if k not in w:
                self.fail(f"unknown window field '{k}'", key,
                          hint="expected size, stride, pad, lhs_dilate, rhs_dilate, rhs_reversal")
            if len(vals) != rank:
                self.fail(f"window field '{k}' has {len(vals)} entries, expected {rank}", key)
            w[k] = vals
        return w

    def replica_groups(self, key="replica_groups") -> list[list[int]]:
        r = self.raw(key)
        if r is None:
            return []
        return parse_replica_groups(r, lambda msg: self.fail(msg, key))


def parse_replica_groups(r: str, fail) -> list[list[int]]:
    r = r.strip()
    try:
        iota = iota_groups(r)  # [groups,size]<=[reshape dims]T(perm)
    except KilnError as exc:  # more device ids than Kiln runs, or a mismatch: located here
        fail(f"{exc.message} ({exc.hint})")
    if iota is not None:
        return iota
    if r.startswith("mesh"):
        return mesh_groups(r, fail)
    if not (r.startswith("{") and r.endswith("}")):
        fail(f"expected replica groups like {{{{0,1}},{{2,3}}}}, [2,2]<=[4] or "
             f"mesh['x'=2,'y'=2] {{'y'}}, got '{r}'")
    # The whole text must be groups of device numbers: anything else ({{-2,1}}, {{0,a}}) is
    # an error, not a group that silently vanishes.
    if not _EXPLICIT_GROUPS.fullmatch(r):
        fail(f"replica groups must be lists of device numbers (non-negative integers) like "
             f"{{{{0,1}},{{2,3}}}}, got '{r}'")
    groups = re.findall(r"\{([\d,\s]*)\}", r[1:-1])
    return [[int(x) for x in g.split(",") if x.strip()] for g in groups]


_EXPLICIT_GROUPS = re.compile(r"\{\s*(\{[\d\s]*(,[\d\s]*)*\}\s*(,\s*\{[\d\s]*(,[\d\s]*)*\}\s*)*)?\}")


_MESH = re.compile(r"mesh\s*\[(?P<axes>[^\]]*)\]\s*\{(?P<chosen>[^}]*)\}")
_MESH_AXIS = re.compile(r"'(?P<name>[^']+)'\s*=\s*(?P<size>\d+)")


def mesh_groups(r: str, fail) -> list[list[int]]:
    """XLA's mesh form `mesh['a'=2,'b'=4] {'b'}` (JAX's sharded programs print it): devices
    are iota(a*b) laid out on the named axes; each group varies along the chosen axes (in
    the order listed) with the other axes fixed, so `{'b'}` gives {{0,1,2,3},{4,5,6,7}}."""
    m = _MESH.fullmatch(r.strip())
    if m is None:
        fail(f"expected mesh replica groups like mesh['x'=2,'y'=2] {{'y'}}, got '{r}'")
    axes = {}
    for part in m.group("axes").split(","):
        a = _MESH_AXIS.fullmatch(part.strip())
        if a is None:
            fail(f"mesh axis '{part.strip()}' is not of the form 'name'=size (sub-axes and "
                 f"explicit device orders are not supported), in '{r}'")
        if a.group("name") in axes:
            fail(f"mesh axis '{a.group('name')}' appears twice in '{r}'")
        axes[a.group("name")] = int(a.group("size"))
    chosen = [c.strip().strip("'") for c in m.group("chosen").split(",") if c.strip()]
    unknown = [c for c in chosen if c not in axes]
    if unknown or len(set(chosen)) != len(chosen):
        fail(f"mesh groups name axes {chosen}; the mesh has {list(axes)}")
    names = list(axes)
    from kiln.distributed.groups import max_devices
    if math.prod(axes.values()) > max_devices():
        fail(f"mesh '{r}' has {math.prod(axes.values())} devices; Kiln runs at most "
             f"{max_devices()} (KILN_MAX_DEVICES)")
    ids = np.arange(int(np.prod(list(axes.values())))).reshape(list(axes.values()) or [1])
    fixed = [i for i, n in enumerate(names) if n not in chosen]
    varying = [names.index(c) for c in chosen]
    size = int(np.prod([axes[c] for c in chosen])) if chosen else 1
    return ids.transpose(fixed + varying).reshape(-1, size).tolist() if names else [[0]]


# ----------------------------------------------------------------------------- literals

_LIT_TOKEN = re.compile(r"\s*(-?nan\(0x[0-9a-fA-F]+\)|[(){},]|[^\s,(){}]+)")


def _split_top_level(text: str) -> list[str]:
    """`a, {b, c}, (d, e)` -> ['a', '{b, c}', '(d, e)']: commas outside any bracket."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    if tail:
        parts.append(tail)
    return parts


def parse_tuple_literal(text: str, shape: Shape, where: str, name: str = "constant") -> list[np.ndarray]:
    """A tuple constant `((e0), e1, ...)` as its leaves' arrays, depth first (the order the
    importer flattens tuples in)."""
    body = text.strip()
    if not (body.startswith("(") and body.endswith(")")):
        raise KilnError(f"tuple-shaped constant '{name}' must be written as (element, ...)",
                        location=where, hint=f"its shape is {shape}")
    elements = _split_top_level(body[1:-1])
    if len(elements) != len(shape.tuple_shapes):
        raise KilnError(f"tuple-shaped constant '{name}' has {len(elements)} elements, its shape "
                        f"{shape} has {len(shape.tuple_shapes)}", location=where)
    leaves: list[np.ndarray] = []
    for element, element_shape in zip(elements, shape.tuple_shapes):
        if element_shape.is_tuple:
            leaves.extend(parse_tuple_literal(element, element_shape, where, name))
        else:
            leaves.append(parse_literal(element, element_shape, where, name))
    return leaves


def parse_literal(text: str, shape: Shape, where: str, name: str = "constant") -> np.ndarray:
    """Values of `constant(...)` as a numpy array of the shape's dtype.

    Accepts scalars, nested `{...}` lists (row-major; nesting is only grouping), complex
    `(re, im)` pairs, true/false, nan/-nan/inf/-inf (also `nan(0x..)` payload forms) and
    hex integers.  The printer's elided form `{...}` is rejected: its values are unknown."""
    if shape.is_tuple:
        raise KilnError(f"tuple-shaped constant '{name}' needs parse_tuple_literal", location=where)
    if "..." in text:
        raise KilnError(f"constant '{name}' has elided contents ({{...}}); its values are not "
                        "in the text", location=where,
                        hint="dump the HLO with large constants printed "
                             "(HloPrintOptions print_large_constants=true)")
    et = shape.etype
    toks = [t for t in _LIT_TOKEN.findall(text) if t]
    values = []
    i = 0

    def scalar(tok: str):
        low = tok.lower()
        if et.kind == "pred":
            if low in ("true", "1"):
                return True
            if low in ("false", "0"):
                return False
            raise ValueError(tok)
        if et.kind in ("int", "uint"):
            return int(tok, 0)
        if low.lstrip("+-").startswith("nan"):
            return -float("nan") if low.startswith("-") else float("nan")
        if low.lstrip("+-") in ("inf", "infinity"):
            return float(low.replace("infinity", "inf"))
        if low.lstrip("+-").startswith("0x"):
            return float.fromhex(tok)
        return float(tok)

    try:
        while i < len(toks):
            t = toks[i]
            if t in "{},":
                i += 1
            elif t == "(":
                if et.kind != "complex":
                    raise ValueError("'(' in a non-complex literal")
                re_, im_ = scalar(toks[i + 1]), scalar(toks[i + 3])
                if toks[i + 2] != "," or toks[i + 4] != ")":
                    raise ValueError("complex literal must be (re, im)")
                values.append(complex(re_, im_))
                i += 5
            else:
                values.append(scalar(t))
                i += 1
    except (ValueError, IndexError) as e:
        raise KilnError(f"bad literal for constant '{name}' of type {shape.element_type}: {e}",
                        location=where) from None
    n = shape.num_elements()
    if len(values) != n:
        raise KilnError(f"constant '{name}' has {len(values)} values, shape {shape} needs {n}",
                        location=where)
    dtype = et.dtype
    if dtype is None:
        raise KilnError(f"constants of type {shape.element_type} are not supported",
                        location=where)
    with np.errstate(all="ignore"):
        if et.kind == "uint" or et.kind == "int":
            arr = np.array(values, dtype=object).astype(np.int64 if et.kind == "int" or et.bits < 64
                                                         else np.uint64)
            arr = arr.astype(dtype)
        else:
            arr = np.array(values).astype(dtype)
    return arr.reshape(shape.dims)
