"""Emit StableHLO (MLIR text) from a parsed HLO module.

Design:
* Every HLO value is a list of *leaves*: tuples are flattened depth-first, so tuple /
  get-tuple-element are pure bookkeeping and ENTRY tuple parameters/results become several
  function arguments/results.
* Values are logical tensors.  Layouts only matter where HLO reinterprets memory (bitcast),
  which becomes transpose -> reshape -> transpose through the physical dimension order (with
  pad/slice for tiled layouts, kiln.layout.bitcast_steps); copy between layouts is the
  identity on logical values.  Entry layouts are recorded as `kiln.layout`; the `layout`
  stage (lowering/layouts.py) makes them explicit.
* Called computations become private functions (call) or regions (reduce, sort, while,
  conditional ...); fusions are inlined, their ops tagged with `kiln.fusion_kind`.
* Ops are written in MLIR's generic syntax (mechanical and unambiguous); the caller parses
  and verifies the module and returns MLIR's own pretty print.
"""
from __future__ import annotations

import math
import re

import numpy as np

from kiln.errors import KilnError
from kiln.dialects import kiln as names
from kiln.layout import Layout, Pad, Reshape, Shape, Transpose, bitcast_steps, step_shape

from .parser import (AttrReader, Instruction, Module, parse_literal, parse_replica_groups,
                     parse_tuple_literal)


def _tree_attr(shapes) -> str:
    def walk(shape):
        if not shape.is_tuple:
            return [-1]
        return [len(shape.tuple_shapes)] + [x for t in shape.tuple_shapes for x in walk(t)]
    return "array<i32: " + ", ".join(str(x) for x in (x for s in shapes for x in walk(s))) + ">"


class Val:
    __slots__ = ("name", "type")

    def __init__(self, name: str, type_: str):
        self.name, self.type = name, type_

    def __repr__(self):
        return f"{self.name}: {self.type}"


class LazyConst:
    """A constant emitted only if something uses it.  HLO's async/send/recv tuples carry
    u32 context values nobody reads; materializing them eagerly would leave dead constants
    that grow on every HLO -> StableHLO -> HLO round trip.  The op text is written into the
    slot reserved where the value was created, so dominance is preserved."""

    def __init__(self, emitter: "Emitter", text_fn, type_: str):
        self.type = type_
        self._buf = emitter.out
        self._slot = len(emitter.out)
        emitter.out.append("")
        self._text_fn = text_fn
        self._name = None
        self._emitter = emitter

    @property
    def name(self) -> str:
        if self._name is None:
            self._name = self._emitter.fresh()
            self._buf[self._slot] = f"{self._name} = " + self._text_fn()
        return self._name


def _arr(vals) -> str:
    return "array<i64" + (": " + ", ".join(str(int(v)) for v in vals) if len(vals) else "") + ">"


def _bool_arr(vals) -> str:
    return "array<i1" + (": " + ", ".join("true" if v else "false" for v in vals) if vals else "") + ">"


def _list(vals) -> str:
    return "[" + ", ".join(str(int(v)) for v in vals) + "]"


# Collectives whose groups may differ in size (XLA's verifier requires equal sizes for the
# others: their result shapes depend on the group size).
_UNEQUAL_GROUPS_OK = {"all-reduce", "all-reduce-start"}


def _i64_matrix(rows, ncols=None, pad=False) -> str:
    """A dense i64 matrix; with `pad`, rows of unequal length are padded with -1 (StableHLO's
    form for groups of unequal size, as XLA's importer writes it)."""
    rows = [list(r) for r in rows]
    if not rows:
        return "dense<> : tensor<0x0xi64>" if ncols is None else f"dense<> : tensor<0x{ncols}xi64>"
    width = max(len(r) for r in rows)
    if any(len(r) != width for r in rows):
        if not pad:
            raise KilnError("replica groups must all have the same size")
        rows = [r + [-1] * (width - len(r)) for r in rows]
    body = "[" + ", ".join("[" + ", ".join(str(v) for v in r) + "]" for r in rows) + "]"
    return f"dense<{body}> : tensor<{len(rows)}x{width}xi64>"


def _fmt_float(v: float) -> str:
    r = repr(float(v))
    if "e" in r and "." not in r.split("e")[0]:
        m, e = r.split("e")
        r = m + ".0e" + e
    elif "." not in r and "e" not in r:
        r += ".0"
    return r


def _elem_text(v, shape: Shape, dtype) -> str:
    kind = shape.etype.kind
    if kind == "pred":
        return "true" if bool(v) else "false"
    if kind in ("int", "uint"):
        return str(int(v))
    if kind == "complex":
        return f"({_elem_text_f(v.real, np.float32 if dtype == np.complex64 else np.float64)}, " \
               f"{_elem_text_f(v.imag, np.float32 if dtype == np.complex64 else np.float64)})"
    return _elem_text_f(v, dtype)


def _elem_text_f(v, dtype) -> str:
    f = float(v)
    if math.isfinite(f):
        return _fmt_float(f)
    # Non-finite floats are written as their bit pattern, which MLIR accepts for floats.
    bits = np.dtype(dtype).itemsize * 8
    u = np.array([v], dtype=dtype).view({8: np.uint8, 16: np.uint16, 32: np.uint32,
                                         64: np.uint64}[bits])[0]
    return "0x" + format(int(u), f"0{bits // 4}X")


def dense_attr(arr: np.ndarray, shape: Shape) -> str:
    t = shape.mlir_type()
    flat = arr.reshape(-1)
    if flat.size == 0:
        return f"dense<> : {t}"
    first = flat[0]
    same = bool(np.all(flat.view(np.uint8).reshape(flat.size, -1) ==
                       flat[:1].view(np.uint8).reshape(1, -1))) if flat.dtype.itemsize else False
    if same:
        return f"dense<{_elem_text(first, shape, arr.dtype)}> : {t}"
    kind = shape.etype.kind
    if (flat.size > 256 and kind in ("int", "uint", "float", "complex")
            and arr.dtype.itemsize * 8 == shape.etype.bits):
        # Large constants as MLIR's hex blob: raw little-endian element bytes.
        data = np.ascontiguousarray(flat).astype(arr.dtype.newbyteorder("<")).tobytes()
        return f'dense<"0x{data.hex().upper()}"> : {t}'
    texts = [_elem_text(v, shape, arr.dtype) for v in flat]

    def nest(offset, dims):
        if not dims:
            return texts[offset]
        step = int(np.prod(dims[1:])) if len(dims) > 1 else 1
        return "[" + ", ".join(nest(offset + i * step, dims[1:]) for i in range(dims[0])) + "]"

    return f"dense<{nest(0, list(arr.shape))}> : {t}"


# HLO opcode -> StableHLO op for ops that map one-to-one on their (flattened) operands.
# XLA attributes that say nothing about what an instruction computes (scheduling, placement,
# provenance, hints): read by nothing and accepted on every opcode.
_WITHOUT_MEANING_HERE = frozenset({
    "metadata", "sharding", "frontend_attributes", "backend_config", "statistics_viz",
    "original_value", "control-predecessors", "schedule", "scheduling_name",
})
# ...and those that do not change the values an opcode produces as Kiln runs it: aliasing
# (results are values here), the comparator XLA attaches to its TopK custom call (Kiln's
# TopK sorts by value), host-transfer and channel routing of the done halves of send/recv
# (Kiln pairs them by instruction), the shape an outfeed was declared with (its operand's).
_WITHOUT_MEANING_FOR = {
    "custom-call": frozenset({"output_to_operand_aliasing", "called_computations",
                              "custom_call_has_side_effect"}),
    "send-done": frozenset({"channel_id", "is_host_transfer"}),
    "recv-done": frozenset({"channel_id", "is_host_transfer"}),
    "outfeed": frozenset({"outfeed_shape"}),
    "domain": frozenset({"domain"}),
    "dynamic-reshape": frozenset({"inferred_dimension"}),
}

_SIMPLE = {
    "abs": "abs", "add": "add", "and": "and", "atan2": "atan2", "cbrt": "cbrt", "ceil": "ceil",
    "clamp": "clamp", "clz": "count_leading_zeros", "count-leading-zeros": "count_leading_zeros", "complex": "complex", "convert": "convert",
    "cosine": "cosine", "divide": "divide", "exponential": "exponential",
    "exponential-minus-one": "exponential_minus_one", "floor": "floor", "imag": "imag",
    "is-finite": "is_finite", "log": "log", "log-plus-one": "log_plus_one",
    "logistic": "logistic", "maximum": "maximum", "minimum": "minimum", "multiply": "multiply",
    "negate": "negate", "not": "not", "or": "or", "popcnt": "popcnt", "power": "power",
    "real": "real", "remainder": "remainder", "round-nearest-afz": "round_nearest_afz",
    "round-nearest-even": "round_nearest_even", "rsqrt": "rsqrt", "select": "select",
    "shift-left": "shift_left", "shift-right-arithmetic": "shift_right_arithmetic",
    "shift-right-logical": "shift_right_logical", "sign": "sign", "sine": "sine",
    "sqrt": "sqrt", "subtract": "subtract", "tan": "tan", "tanh": "tanh", "xor": "xor",
    "bitcast-convert": "bitcast_convert", "reshape": "reshape",
}

# Ops whose value is their first operand (numerics do not depend on layouts/annotations).
_IDENTITY = {"copy", "domain", "add-dependency", "all-reduce-done", "async-update",
             "copy-done"}

_API_VERSIONS = {"API_VERSION_UNSPECIFIED": 0, "API_VERSION_ORIGINAL": 1,
                 "API_VERSION_STATUS_RETURNING": 2, "API_VERSION_STATUS_RETURNING_UNIFIED": 3,
                 "API_VERSION_TYPED_FFI": 4}

_RNG_ALGO = {"rng_default": "DEFAULT", "rng_three_fry": "THREE_FRY", "rng_philox": "PHILOX"}


def _is_ffi_dictionary(text: str) -> bool:
    """Whether a typed-FFI call's backend_config is an attribute dictionary ("{}" or
    "{name = value, ...}"), the form XLA prints, rather than an opaque string."""
    text = text.strip()
    return text == "" or (text.startswith("{") and text.endswith("}") and
                          (text == "{}" or "=" in text))


def _mlir_str(s: str) -> str:
    out = []
    for ch in s:
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ord(ch) < 32 or ord(ch) > 126:
            for b in ch.encode("utf-8"):
                out.append(f"\\{b:02X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _symbol(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.$]", "_", name)


class Emitter:
    def __init__(self, module: Module):
        self.m = module
        self.counter = 0
        self.out: list[str] = []
        self.funcs: dict[str, str] = {}        # computation -> symbol
        self.func_text: list[str] = []
        self.fusion_kind: str | None = None
        self.cur: Instruction | None = None
        self.shape_env: dict[str, Shape] = {}
        self.computing: list[str] = []         # computations being emitted, outermost first

    # ------------------------------------------------------------------ plumbing
    def fresh(self) -> str:
        self.counter += 1
        return f"%v{self.counter}"

    def fail(self, msg: str, hint: str | None = None):
        ins = self.cur
        where = self.m.where(ins.pos) if ins else None
        if ins is not None:
            msg = f"{ins.opcode} '{ins.name}': {msg}"
        raise KilnError(msg, location=where, hint=hint)

    def op(self, name: str, operands, result_types, attrs: dict | None = None,
           regions=()) -> list[Val]:
        attrs = dict(attrs or {})
        if self.fusion_kind and not name.startswith(("func.", "stablehlo.return")):
            attrs[names.FUSION_KIND] = _mlir_str(self.fusion_kind)
        lhs, results = "", []
        if len(result_types) == 1:
            n = self.fresh()
            lhs, results = f"{n} = ", [Val(n, result_types[0])]
        elif len(result_types) > 1:
            n = self.fresh()
            lhs = f"{n}:{len(result_types)} = "
            results = [Val(f"{n}#{i}", t) for i, t in enumerate(result_types)]
        text = f'{lhs}"{name}"(' + ", ".join(v.name for v in operands) + ")"
        if regions:
            text += " (" + ", ".join(regions) + ")"
        if attrs:
            text += " {" + ", ".join(f"{k} = {v}" for k, v in attrs.items()) + "}"
        ins_t = ", ".join(v.type for v in operands)
        res_t = ", ".join(result_types)
        if len(result_types) != 1:
            res_t = f"({res_t})"
        text += f" : ({ins_t}) -> {res_t}"
        if self.cur is not None:  # diagnostics from MLIR then point at the HLO line
            line, col = self.m.scanner.line_col(self.cur.pos)
            text += f" loc({_mlir_str(self.m.scanner.filename)}:{line}:{col})"
        self.out.append(text)
        return results

    def op1(self, name, operands, result_type, attrs=None, regions=()) -> Val:
        return self.op(name, operands, [result_type], attrs, regions)[0]

    def region(self, arg_types, body) -> str:
        saved, self.out = self.out, []
        args = [Val(self.fresh(), t) for t in arg_types]
        rets = body(args)
        self.out.append('"stablehlo.return"(' + ", ".join(v.name for v in rets) + ") : ("
                        + ", ".join(v.type for v in rets) + ") -> ()")
        lines, self.out = self.out, saved
        head = ("^bb0(" + ", ".join(f"{a.name}: {a.type}" for a in args) + "):\n") if args else ""
        return "{\n" + head + "\n".join("  " + ln for ln in lines) + "\n}"

    def comp_region(self, comp: str, arg_types) -> str:
        """A region whose block arguments feed `comp`'s parameters (flattened, in order)."""
        def body(args):
            return self.emit_computation(comp, self._split_params(comp, args))
        return self.region(arg_types, body)

    def _split_params(self, comp: str, leaves: list[Val]) -> list[list[Val]]:
        params = self.m.computations[comp].parameters()
        out, i = [], 0
        for p in params:
            n = len(p.shape.leaves())
            out.append(leaves[i:i + n])
            i += n
        if i != len(leaves):
            self.fail(f"computation '{comp}' takes {i} values but is given {len(leaves)}")
        return out

    def constant(self, arr: np.ndarray, shape: Shape) -> Val:
        return self.op1("stablehlo.constant", [], shape.mlir_type(),
                        {"value": dense_attr(arr, shape)})

    def scalar_const(self, value, etype: str) -> Val:
        s = Shape(etype, [])
        return self.constant(np.array(value, dtype=s.etype.dtype), s)

    def context_const(self, etype: str):
        """Placeholder for an HLO async/channel context value (materialized on use)."""
        s = Shape(etype, [])
        t = s.mlir_type()
        attr = dense_attr(np.array(0, dtype=s.etype.dtype), s)
        return LazyConst(self, lambda: f'"stablehlo.constant"() {{value = {attr}}} : () -> {t}', t)

    # ------------------------------------------------------------------ computations
    def emit_computation(self, name: str, params: list[list[Val]]) -> list[Val]:
        comp = self.m.computations[name]
        env: dict[str, list[Val]] = {}
        saved_shapes = self.shape_env
        self.shape_env = {i.name: i.shape for i in comp.instructions}
        if name in self.computing:
            self.cur = comp.root
            self.fail(f"computation '{name}' calls itself (through "
                      + " -> ".join(self.computing[self.computing.index(name):] + [name]) + ")",
                      hint="HLO computations may not be recursive")
        try:
            ordered = _def_before_use(comp.instructions)
        except _Cycle as cycle:
            self.cur = cycle.instruction
            self.fail("instructions form a cycle: " + " -> ".join(cycle.names),
                      hint="every operand must be computed before its user")
        self.computing.append(name)
        for ins in ordered:
            saved = self.cur
            self.cur = ins
            if ins.opcode == "parameter":
                try:
                    k = int(ins.payload)
                except (TypeError, ValueError):
                    self.fail(f"expected parameter(<number>), got parameter({ins.payload})")
                if not 0 <= k < len(params):
                    self.fail(f"parameter {k} but computation '{name}' is given {len(params)}",
                              hint=f"parameter numbers run from 0 to {len(params) - 1}")
                env[ins.name] = params[k]
            else:
                for o in ins.operands:
                    if o not in env:
                        self.fail(f"unknown operand '{o}'",
                                  hint="operands must be instructions of the same computation")
                try:
                    leaves = self.emit_instruction(ins, [env[o] for o in ins.operands])
                except KilnError:
                    raise
                except Exception as e:  # an importer bug: still report where it happened
                    self.fail(f"cannot import this instruction ({type(e).__name__}: {e})",
                              hint="check its operands and attributes against the HLO "
                                   "specification; if it is valid HLO, please report it")
                want = len(ins.shape.leaves())
                if len(leaves) != want:
                    self.fail(f"internal: produced {len(leaves)} values for a shape with {want}")
                env[ins.name] = leaves
            self.cur = saved
        self.computing.pop()
        self.shape_env = saved_shapes
        return env[comp.root.name]

    def function(self, comp: str) -> str:
        """Private func.func for a called computation (emitted once)."""
        if comp in self.funcs:
            return self.funcs[comp]
        sym = _symbol(comp)
        taken = set(self.funcs.values()) | {"main"}
        base, k = sym, 0
        while sym in taken:
            k += 1
            sym = f"{base}_{k}"
        self.funcs[comp] = sym
        c = self.m.computations[comp]
        arg_types = [leaf.mlir_type() for p in c.parameters() for leaf in p.shape.leaves()]
        res_types = [leaf.mlir_type() for leaf in c.root.shape.leaves()]
        saved_out, saved_cur, saved_fk = self.out, self.cur, self.fusion_kind
        self.out, self.fusion_kind = [], None
        args = [Val(self.fresh(), t) for t in arg_types]
        rets = self.emit_computation(comp, self._split_params(comp, args))
        self.out.append("func.return " + ", ".join(v.name for v in rets)
                        + (" : " + ", ".join(v.type for v in rets) if rets else ""))
        body = self.out
        self.out, self.cur, self.fusion_kind = saved_out, saved_cur, saved_fk
        sig = ", ".join(f"{a.name}: {a.type}" for a in args)
        self.func_text.append(f"func.func private @{sym}({sig}) -> ({', '.join(res_types)}) {{\n"
                              + "\n".join("  " + ln for ln in body) + "\n}")
        return sym

    def emit_module(self) -> str:
        entry = self.m.entry_computation
        params = entry.parameters()
        layouts = self._entry_layouts()
        arg_shapes = [leaf for p in params for leaf in p.shape.leaves()]
        if layouts is not None:
            pl, rl = layouts
            if len(pl) == len(arg_shapes):
                arg_shapes = [a.with_layout(b.layout) if b.layout else a
                              for a, b in zip(arg_shapes, pl)]
        args = [Val(self.fresh(), s.mlir_type()) for s in arg_shapes]
        rets = self.emit_computation(entry.name, self._split_params(entry.name, args))
        res_shapes = entry.root.shape.leaves()
        if layouts is not None and len(layouts[1]) == len(res_shapes):
            res_shapes = [a.with_layout(b.layout) if b.layout else a
                          for a, b in zip(res_shapes, layouts[1])]
        self.out.append("func.return " + ", ".join(v.name for v in rets)
                        + (" : " + ", ".join(v.type for v in rets) if rets else ""))

        aliases = self._aliases(params, entry.root.shape)

        def lay(s: Shape, extra: str = "") -> str:
            if s.is_token:
                return f" {{{extra}}}" if extra else ""
            return f' {{{extra + ", " if extra else ""}{names.LAYOUT} = "{s.effective_layout()}"}}'

        sig = ", ".join(f"{a.name}: {a.type}"
                        + lay(s, f"tf.aliasing_output = {aliases[i]} : i32" if i in aliases else "")
                        for i, (a, s) in enumerate(zip(args, arg_shapes)))
        res = ", ".join(f"{s.mlir_type()}{lay(s)}" for s in res_shapes)
        main = (f"func.func @main({sig}) -> ({res}) {{\n"
                + "\n".join("  " + ln for ln in self.out) + "\n}")
        mattrs = [f'{names.HLO_MODULE} = {_mlir_str(self.m.name)}']
        for key in ("num_partitions", "replica_count"):
            if key in self.m.attrs:
                try:
                    count = int(self.m.attrs[key].raw)
                except ValueError:
                    continue
                mattrs.append(f"{names.HLO_CONFIG[key]} = {count} : i64")
                # ... and as the device counts the rest of Kiln reads (StableHLO's names)
                device_attr = {"num_partitions": "mhlo.num_partitions",
                               "replica_count": "mhlo.num_replicas"}[key]
                mattrs.append(f"{device_attr} = {count} : i32")
        return ("module @" + _symbol(self.m.name) + " attributes {" + ", ".join(mattrs) + "} {\n"
                + "\n".join([main] + self.func_text) + "\n}\n")

    def _aliases(self, params, result: Shape) -> dict[int, int]:
        """input_output_alias={ {out_index}: (param, {param_index}, kind), ... } as
        flattened argument -> flattened result numbers (recorded as tf.aliasing_output,
        the attribute JAX uses for donated buffers)."""
        a = self.m.attrs.get("input_output_alias")
        if a is None:
            return {}
        out = {}
        for m in re.finditer(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}", a.raw):
            opath = [int(x) for x in m.group(1).split(",") if x.strip()]
            pnum = int(m.group(2))
            ppath = [int(x) for x in m.group(3).split(",") if x.strip()]
            if pnum >= len(params):
                raise KilnError(f"input_output_alias names parameter {pnum}, the entry has "
                                f"{len(params)}", location=self.m.where(a.pos))
            base = sum(len(p.shape.leaves()) for p in params[:pnum])
            try:
                arg = base + _flat_index(params[pnum].shape, ppath)
                res = _flat_index(result, opath)
            except (IndexError, TypeError):
                raise KilnError(f"input_output_alias entry '{m.group(0)})' does not match the "
                                "entry shapes", location=self.m.where(a.pos)) from None
            out[arg] = res
        return out

    def _entry_layouts(self):
        a = self.m.attrs.get("entry_computation_layout")
        if a is None:
            return None
        raw = a.raw.strip()
        if raw.startswith("{") and raw.endswith("}"):
            raw = raw[1:-1]
        depth, split = 0, -1
        for i, c in enumerate(raw):
            depth += c in "([{"
            depth -= c in ")]}"
            if depth == 0 and raw.startswith("->", i):
                split = i
                break
        if split < 0:
            return None
        try:
            params = Shape.parse(raw[:split])
            result = Shape.parse(raw[split + 2:])
        except KilnError as e:
            raise KilnError(f"bad entry_computation_layout: {e.message}",
                            location=self.m.where(a.pos)) from None
        pleaves = [leaf for p in (params.tuple_shapes or []) for leaf in p.leaves()]
        return pleaves, result.leaves()

    # ------------------------------------------------------------------ instructions
    def emit_instruction(self, ins: Instruction, ops: list[list[Val]]) -> list[Val]:
        a = AttrReader(ins, self.m)
        out = self._emit_instruction(ins, a, ops)
        self._refuse_unread_attributes(ins, a)
        return out

    def _refuse_unread_attributes(self, ins: Instruction, a: AttrReader):
        """An attribute is either one the op's emitter reads or one of XLA's that does not
        change what the op computes (_WITHOUT_MEANING_HERE); anything else (a misspelling, an
        attribute of another opcode, one Kiln does not implement) is an error, as in XLA's own
        parser, rather than ignored: ignoring it would run the program with another meaning."""
        for key in a.unread():
            if key not in _WITHOUT_MEANING_HERE and key not in _WITHOUT_MEANING_FOR.get(ins.opcode, ()):
                a.fail(f"unexpected attribute '{key}=' for {ins.opcode}", key,
                       hint="Kiln reads the attributes XLA defines for each opcode; check the "
                            "spelling, or the opcode's attributes in the operation semantics")

    def _emit_instruction(self, ins: Instruction, a: AttrReader, ops: list[list[Val]]) -> list[Val]:
        op = ins.opcode
        rtypes = [leaf.mlir_type() for leaf in ins.shape.leaves()]
        flat = [v for o in ops for v in o]
        if op in _SIMPLE:
            return [self.op1("stablehlo." + _SIMPLE[op], flat, rtypes[0])]
        if op in _IDENTITY:
            if not ops:
                self.fail("expected an operand")
            return list(ops[0][:len(rtypes)])
        handler = getattr(self, "_op_" + op.replace("-", "_"), None)
        if handler is None:
            self.fail(f"unsupported opcode '{op}'",
                      hint="see kiln.frontend.hlo.emitter.SUPPORTED_OPCODES")
        return handler(ins, a, ops, flat, rtypes)

    def _scalar_types(self, vals):
        """tensor<AxBxT, #bounds> -> tensor<T>: the block-argument types of reducers."""
        out = []
        for v in vals:
            m = re.match(r"tensor<(?:[0-9?]+x)*(.*?)(?:,\s*#stablehlo\.bounds<.*>)?>$", v.type)
            out.append(f"tensor<{m.group(1)}>" if m else v.type)
        return out

    # -- structure
    def _op_tuple(self, ins, a, ops, flat, rtypes):
        return flat

    def _op_get_tuple_element(self, ins, a, ops, flat, rtypes):
        idx = a.int("index", required=True)
        # The operand's tuple shape tells how many leaves each element spans.
        tshape = self._shape_of_operand(ins, 0)
        if not tshape.is_tuple or not 0 <= idx < len(tshape.tuple_shapes):
            self.fail(f"index {idx} out of range for operand shape {tshape}")
        start = sum(len(s.leaves()) for s in tshape.tuple_shapes[:idx])
        n = len(tshape.tuple_shapes[idx].leaves())
        return ops[0][start:start + n]

    def _shape_of_operand(self, ins, i) -> Shape:
        if ins.operand_shapes[i] is not None:
            return ins.operand_shapes[i]
        return self.shape_env[ins.operands[i]]

    def _op_constant(self, ins, a, ops, flat, rtypes):
        if ins.literal is not None:  # read from an HLO proto: already arrays
            if ins.shape.is_tuple:
                return [self.constant(arr, leaf) for arr, leaf in zip(ins.literal, ins.shape.leaves())]
            return [self.constant(ins.literal, ins.shape)]
        where = self.m.where(ins.payload_pos)
        if ins.shape.is_tuple:  # one constant per leaf: tuples are flattened values here
            leaves = parse_tuple_literal(ins.payload or "", ins.shape, where, ins.name)
            return [self.constant(arr, leaf) for arr, leaf in zip(leaves, ins.shape.leaves())]
        arr = parse_literal(ins.payload or "", ins.shape, where, ins.name)
        return [self.constant(arr, ins.shape)]

    def _op_iota(self, ins, a, ops, flat, rtypes):
        return [self.op1("stablehlo.iota", [], rtypes[0],
                         {"iota_dimension": f"{a.int('iota_dimension', required=True)} : i64"})]

    def _op_broadcast(self, ins, a, ops, flat, rtypes):
        return [self.op1("stablehlo.broadcast_in_dim", flat[:1], rtypes[0],
                         {"broadcast_dimensions": _arr(a.ints("dimensions", []))})]

    def _op_concatenate(self, ins, a, ops, flat, rtypes):
        d = a.ints("dimensions", required=True)
        return [self.op1("stablehlo.concatenate", flat, rtypes[0], {"dimension": f"{d[0]} : i64"})]

    def _op_transpose(self, ins, a, ops, flat, rtypes):
        return [self.op1("stablehlo.transpose", flat[:1], rtypes[0],
                         {"permutation": _arr(a.ints("dimensions", required=True))})]

    def _op_reverse(self, ins, a, ops, flat, rtypes):
        return [self.op1("stablehlo.reverse", flat[:1], rtypes[0],
                         {"dimensions": _arr(a.ints("dimensions", required=True))})]

    def _op_slice(self, ins, a, ops, flat, rtypes):
        sl = a.slices()
        return [self.op1("stablehlo.slice", flat[:1], rtypes[0], {
            "start_indices": _arr([s[0] for s in sl]), "limit_indices": _arr([s[1] for s in sl]),
            "strides": _arr([s[2] for s in sl])})]

    def _op_pad(self, ins, a, ops, flat, rtypes):
        p = a.padding()
        return [self.op1("stablehlo.pad", flat[:2], rtypes[0], {
            "edge_padding_low": _arr([x[0] for x in p]), "edge_padding_high": _arr([x[1] for x in p]),
            "interior_padding": _arr([x[2] for x in p])})]

    def _op_dynamic_slice(self, ins, a, ops, flat, rtypes):
        return [self.op1("stablehlo.dynamic_slice", flat, rtypes[0],
                         {"slice_sizes": _arr(a.ints("dynamic_slice_sizes", required=True))})]

    def _op_dynamic_update_slice(self, ins, a, ops, flat, rtypes):
        return [self.op1("stablehlo.dynamic_update_slice", flat, rtypes[0])]

    def _op_bitcast(self, ins, a, ops, flat, rtypes):
        src = self._shape_of_operand(ins, 0)
        return [self.relayout(flat[0], src, ins.shape)]

    def relayout(self, v: Val, src: Shape, dst: Shape) -> Val:
        """Reinterpret `v` (logical, laid out as `src`) as `dst`: same bytes, new shape."""
        sl, dl = src.effective_layout(), dst.effective_layout()
        if (sl.tiles or dl.tiles) and (sl.tiles != dl.tiles or src.dims != dst.dims
                                       or sl.minor_to_major != dl.minor_to_major):
            return self._tiled_relayout(v, src, dst)
        x = v
        perm = sl.major_to_minor
        if perm != list(range(src.rank)):
            phys = [src.dims[k] for k in perm]
            x = self.op1("stablehlo.transpose", [x],
                         Shape(src.element_type, phys).mlir_type(), {"permutation": _arr(perm)})
        dperm = dl.major_to_minor
        dphys = [dst.dims[k] for k in dperm]
        et = src.element_type
        if [src.dims[k] for k in perm] != dphys:
            x = self.op1("stablehlo.reshape", [x], Shape(et, dphys).mlir_type())
        if dst.element_type != et:
            if src.etype.bits != dst.etype.bits:
                self.fail(f"bitcast changes element width {src} -> {dst}")
            x = self.op1("stablehlo.bitcast_convert", [x], Shape(dst.element_type, dphys).mlir_type())
        if dperm != list(range(dst.rank)):
            inv = [dperm.index(k) for k in range(dst.rank)]
            x = self.op1("stablehlo.transpose", [x], dst.mlir_type(), {"permutation": _arr(inv)})
        if x.type != dst.mlir_type():  # e.g. only the bounds of a dynamic dim differ
            x = self.op1("stablehlo.reshape", [x], dst.mlir_type())
        return x

    def _tiled_relayout(self, v: Val, src: Shape, dst: Shape) -> Val:
        """Bitcast involving tiled layouts: `src`'s physical array (pad, reshape, transpose
        per tile), flattened and read back as `dst`'s (kiln.layout.bitcast_steps). Tile
        padding `dst` reads holds no particular value; it is zero here."""
        if not (src.is_static and dst.is_static):
            self.fail(f"bitcast between tiled layouts {src} -> {dst} needs static shapes")
        if src.etype.bits != dst.etype.bits:
            self.fail(f"bitcast changes element width {src} -> {dst}")
        try:
            steps = bitcast_steps(src, dst)
        except KilnError as e:
            self.fail(e.message, e.hint)
        x, shape, et = v, tuple(src.dims), dst.element_type
        if src.element_type != et:  # same width: converting first commutes with the moves
            x = self.op1("stablehlo.bitcast_convert", [x], Shape(et, list(shape)).mlir_type())
        for step in steps:
            x, shape = self._layout_step(x, shape, et, step)
        return x

    def _layout_step(self, x: Val, shape: tuple, et: str, step) -> tuple[Val, tuple]:
        """One kiln.layout step (Transpose, Reshape, Pad, Slice) as a StableHLO op."""
        after = step_shape(shape, step)
        t = Shape(et, list(after)).mlir_type()
        if isinstance(step, Transpose):
            return self.op1("stablehlo.transpose", [x], t,
                            {"permutation": _arr(step.permutation)}), after
        if isinstance(step, Reshape):
            return self.op1("stablehlo.reshape", [x], t), after
        if isinstance(step, Pad):
            zero = self.scalar_const(0, et)
            return self.op1("stablehlo.pad", [x, zero], t, {
                "edge_padding_low": _arr([0] * len(shape)), "edge_padding_high": _arr(step.high),
                "interior_padding": _arr([0] * len(shape))}), after
        return self.op1("stablehlo.slice", [x], t, {
            "start_indices": _arr([0] * len(shape)), "limit_indices": _arr(step.limits),
            "strides": _arr([1] * len(shape))}), after

    # -- elementwise extras
    def _op_compare(self, ins, a, ops, flat, rtypes):
        d = a.raw("direction", required=True)
        if d not in ("EQ", "NE", "LT", "LE", "GT", "GE"):
            self.fail(f"bad comparison direction '{d}'", hint="expected EQ, NE, LT, LE, GT or GE")
        s = self._shape_of_operand(ins, 0)
        kind = s.etype.kind
        t = a.raw("type") or {"float": "FLOAT", "complex": "FLOAT", "int": "SIGNED"}.get(kind, "UNSIGNED")
        return [self.op1("stablehlo.compare", flat, rtypes[0], {
            "comparison_direction": f"#stablehlo<comparison_direction {d}>",
            "compare_type": f"#stablehlo<comparison_type {t}>"})]

    def _op_reduce_precision(self, ins, a, ops, flat, rtypes):
        return [self.op1("stablehlo.reduce_precision", flat, rtypes[0], {
            "exponent_bits": f"{a.int('exponent_bits', required=True)} : i32",
            "mantissa_bits": f"{a.int('mantissa_bits', required=True)} : i32"})]

    def _op_erf(self, ins, a, ops, flat, rtypes):
        # StableHLO has no erf; use the rational approximation XLA uses for f32
        # (odd degree-13 numerator over even degree-8 denominator on x clamped to [-4, 4]).
        x = flat[0]
        t = x.type
        et = ins.shape.element_type
        alpha = [-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
                 -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
                 -1.60960333262415e-02]
        beta = [-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
                -7.37332916720468e-03, -1.42647390514189e-02]

        def c(v):
            s = self.scalar_const(v, et)
            return self.op1("stablehlo.broadcast_in_dim", [s], t, {"broadcast_dimensions": _arr([])})

        lo, hi = self.scalar_const(-4.0, et), self.scalar_const(4.0, et)
        xc = self.op1("stablehlo.clamp", [lo, x, hi], t)
        x2 = self.op1("stablehlo.multiply", [xc, xc], t)

        def horner(coeffs):
            acc = c(coeffs[0])
            for k in coeffs[1:]:
                acc = self.op1("stablehlo.multiply", [acc, x2], t)
                acc = self.op1("stablehlo.add", [acc, c(k)], t)
            return acc

        p = self.op1("stablehlo.multiply", [horner(alpha), xc], t)
        q = horner(beta)
        return [self.op1("stablehlo.divide", [p, q], t)]

    def _op_stochastic_convert(self, ins, a, ops, flat, rtypes):
        return [self.op1("stablehlo.custom_call", flat, rtypes[0],
                         {"call_target_name": f'"{names.STOCHASTIC_CONVERT}"'})]

    # -- linear algebra
    def _precision(self, a):
        r = a.raw("operand_precision")
        if not r:
            return None
        names = [x.strip().upper() for x in r.strip("{} ").split(",") if x.strip()]
        names = ["DEFAULT" if n in ("DEFAULT", "") else n for n in names]
        return "[" + ", ".join(f"#stablehlo<precision {n}>" for n in names) + "]"

    def _op_dot(self, ins, a, ops, flat, rtypes):
        parts = []
        for key, name in (("lhs_batch_dims", "lhs_batching_dimensions"),
                          ("rhs_batch_dims", "rhs_batching_dimensions"),
                          ("lhs_contracting_dims", "lhs_contracting_dimensions"),
                          ("rhs_contracting_dims", "rhs_contracting_dimensions")):
            v = a.ints(key, [])
            if v:
                parts.append(f"{name} = {_list(v)}")
        attrs = {"dot_dimension_numbers": "#stablehlo.dot<" + ", ".join(parts) + ">"}
        p = self._precision(a)
        if p:
            attrs["precision_config"] = p
        return [self.op1("stablehlo.dot_general", flat[:2], rtypes[0], attrs)]

    def _op_convolution(self, ins, a, ops, flat, rtypes):
        labels = a.raw("dim_labels", required=True)
        m = re.fullmatch(r"([\w]+)_([\w]+)->([\w]+)", labels)
        if not m:
            self.fail(f"bad dim_labels '{labels}'", hint="expected e.g. b01f_01io->b01f")
        lhs, rhs, out = m.groups()
        nsp = len(lhs) - 2

        def fmt(s):
            return "[" + ", ".join(s) + "]"

        w = a.window(nsp)
        attrs = {
            "dimension_numbers": f"#stablehlo.conv<{fmt(lhs)}x{fmt(rhs)}->{fmt(out)}>",
            "feature_group_count": f"{a.int('feature_group_count', 1)} : i64",
            "batch_group_count": f"{a.int('batch_group_count', 1)} : i64",
        }
        if nsp:
            attrs["window_strides"] = _arr(w["stride"])
            pads = [list(p) + [0] * (2 - len(p)) for p in w["pad"]]
            attrs["padding"] = (f"dense<{[list(p) for p in pads]}> : tensor<{nsp}x2xi64>")
            attrs["lhs_dilation"] = _arr(w["lhs_dilate"])
            attrs["rhs_dilation"] = _arr(w["rhs_dilate"])
            if any(w["rhs_reversal"]):
                attrs["window_reversal"] = _bool_arr(w["rhs_reversal"])
        p = self._precision(a)
        if p:
            attrs["precision_config"] = p
        return [self.op1("stablehlo.convolution", flat[:2], rtypes[0], attrs)]

    def _op_cholesky(self, ins, a, ops, flat, rtypes):
        return [self.op1("stablehlo.cholesky", flat, rtypes[0],
                         {"lower": "true" if a.bool("lower") else "false"})]

    def _op_triangular_solve(self, ins, a, ops, flat, rtypes):
        opts = {}
        r = a.raw("triangular_solve_options")
        if r:  # older form: triangular_solve_options={left_side=true, ...}
            for item in re.split(r"[,\s]+", r.strip("{} ")):
                if "=" in item:
                    k, v = item.split("=")
                    opts[k] = v
        for k in ("left_side", "lower", "unit_diagonal", "transpose_a"):
            if a.has(k):
                opts[k] = a.raw(k)
        ta = opts.get("transpose_a", "NO_TRANSPOSE")
        return [self.op1("stablehlo.triangular_solve", flat, rtypes[0], {
            "left_side": opts.get("left_side", "false"), "lower": opts.get("lower", "false"),
            "unit_diagonal": opts.get("unit_diagonal", "false"),
            "transpose_a": f"#stablehlo<transpose {ta}>"})]

    def _op_fft(self, ins, a, ops, flat, rtypes):
        return [self.op1("stablehlo.fft", flat, rtypes[0], {
            "fft_type": f"#stablehlo<fft_type {a.raw('fft_type', required=True)}>",
            "fft_length": _arr(a.ints("fft_length", required=True))})]

    # -- gather / scatter
    def _op_gather(self, ins, a, ops, flat, rtypes):
        parts = []
        for key in ("offset_dims", "collapsed_slice_dims", "operand_batching_dims",
                    "start_indices_batching_dims", "start_index_map"):
            v = a.ints(key, [])
            if v:
                parts.append(f"{key} = {_list(v)}")
        parts.append(f"index_vector_dim = {a.int('index_vector_dim', required=True)}")
        return [self.op1("stablehlo.gather", flat, rtypes[0], {
            "dimension_numbers": "#stablehlo.gather<" + ", ".join(parts) + ">",
            "slice_sizes": _arr(a.ints("slice_sizes", required=True)),
            "indices_are_sorted": "true" if a.bool("indices_are_sorted") else "false"})]

    def _op_scatter(self, ins, a, ops, flat, rtypes):
        n = (len(flat) - 1) // 2
        parts = []
        for key in ("update_window_dims", "inserted_window_dims", "input_batching_dims",
                    "scatter_indices_batching_dims", "scatter_dims_to_operand_dims"):
            v = a.ints(key, [])
            if v:
                parts.append(f"{key} = {_list(v)}")
        parts.append(f"index_vector_dim = {a.int('index_vector_dim', required=True)}")
        comp = a.computation("to_apply")
        sts = self._scalar_types(flat[:n])
        region = self.comp_region(comp, sts + sts)
        return self.op("stablehlo.scatter", flat, rtypes, {
            "scatter_dimension_numbers": "#stablehlo.scatter<" + ", ".join(parts) + ">",
            "indices_are_sorted": "true" if a.bool("indices_are_sorted") else "false",
            "unique_indices": "true" if a.bool("unique_indices") else "false"}, [region])

    # -- reductions and regions
    def _op_reduce(self, ins, a, ops, flat, rtypes):
        n = len(flat) // 2
        comp = a.computation("to_apply")
        sts = self._scalar_types(flat[n:])
        region = self.comp_region(comp, sts + sts)
        return self.op("stablehlo.reduce", flat, rtypes,
                       {"dimensions": _arr(a.ints("dimensions", required=True))}, [region])

    def _op_reduce_window(self, ins, a, ops, flat, rtypes):
        n = len(flat) // 2
        rank = len(self._shape_of_operand(ins, 0).dims)
        w = a.window(rank)
        comp = a.computation("to_apply")
        sts = self._scalar_types(flat[n:])
        region = self.comp_region(comp, sts + sts)
        pads = [list(p) for p in w["pad"]]
        return self.op("stablehlo.reduce_window", flat, rtypes, {
            "window_dimensions": _arr(w["size"]), "window_strides": _arr(w["stride"]),
            "base_dilations": _arr(w["lhs_dilate"]), "window_dilations": _arr(w["rhs_dilate"]),
            "padding": f"dense<{pads}> : tensor<{rank}x2xi64>" if rank else "dense<> : tensor<0x2xi64>"},
            [region])

    def _op_select_and_scatter(self, ins, a, ops, flat, rtypes):
        rank = len(self._shape_of_operand(ins, 0).dims)
        w = a.window(rank)
        st = self._scalar_types(flat[:1])
        sel = self.comp_region(a.computation("select"), st + st)
        sst = self._scalar_types(flat[1:2])
        sca = self.comp_region(a.computation("scatter"), sst + sst)
        pads = [list(p) for p in w["pad"]]
        return self.op("stablehlo.select_and_scatter", flat, rtypes, {
            "window_dimensions": _arr(w["size"]), "window_strides": _arr(w["stride"]),
            "padding": f"dense<{pads}> : tensor<{rank}x2xi64>"}, [sel, sca])

    def _op_map(self, ins, a, ops, flat, rtypes):
        comp = a.computation("to_apply")
        region = self.comp_region(comp, self._scalar_types(flat))
        dims = a.ints("dimensions", list(range(ins.shape.rank)))
        return [self.op1("stablehlo.map", flat, rtypes[0], {"dimensions": _arr(dims)}, [region])]

    def _op_sort(self, ins, a, ops, flat, rtypes):
        comp = a.computation("to_apply")
        sts = self._scalar_types(flat)
        region = self.comp_region(comp, [t for t in sts for _ in (0, 1)])
        d = a.ints("dimensions", required=True)
        return self.op("stablehlo.sort", flat, rtypes, {
            "dimension": f"{d[0]} : i64",
            "is_stable": "true" if a.bool("is_stable") else "false"}, [region])

    def _top_k(self, x: Val, shape: Shape, k: int, largest: bool, rtypes) -> list[Val]:
        """top-k along the last dimension as a stable sort of (value, index) then a slice."""
        last = shape.rank - 1
        it = Shape("s32", list(shape.dims)).mlir_type()
        idx = self.op1("stablehlo.iota", [], it, {"iota_dimension": f"{last} : i64"})
        st = self._scalar_types([x])[0]
        kind = shape.etype.kind
        ctype = "TOTALORDER" if kind == "float" else ("SIGNED" if kind == "int" else "UNSIGNED")
        direction = "GT" if largest else "LT"

        def body(args):
            return [self.op1("stablehlo.compare", [args[0], args[1]], "tensor<i1>", {
                "comparison_direction": f"#stablehlo<comparison_direction {direction}>",
                "compare_type": f"#stablehlo<comparison_type {ctype}>"})]

        region = self.region([st, st, "tensor<i32>", "tensor<i32>"], body)
        vals, inds = self.op("stablehlo.sort", [x, idx], [x.type, it],
                             {"dimension": f"{last} : i64", "is_stable": "true"}, [region])
        lim = list(shape.dims)
        lim[last] = k
        strides = _arr([1] * shape.rank)
        zeros = _arr([0] * shape.rank)
        v = self.op1("stablehlo.slice", [vals], rtypes[0],
                     {"start_indices": zeros, "limit_indices": _arr(lim), "strides": strides})
        i = self.op1("stablehlo.slice", [inds], Shape("s32", lim).mlir_type(),
                     {"start_indices": zeros, "limit_indices": _arr(lim), "strides": strides})
        if rtypes[1] != i.type:
            i = self.op1("stablehlo.convert", [i], rtypes[1])
        return [v, i]

    def _op_topk(self, ins, a, ops, flat, rtypes):
        return self._top_k(flat[0], self._shape_of_operand(ins, 0), a.int("k", required=True),
                           a.bool("largest", True), rtypes)

    _op_top_k = _op_topk

    # -- control flow
    def _op_while(self, ins, a, ops, flat, rtypes):
        cond = a.computation("condition")
        body = a.computation("body")
        types = [v.type for v in flat]
        return self.op("stablehlo.while", flat, types, None,
                       [self.comp_region(cond, types), self.comp_region(body, types)])

    def _op_conditional(self, ins, a, ops, flat, rtypes):
        if a.has("branch_computations"):
            branches = a.computations("branch_computations")
        else:
            branches = [a.computation("true_computation"), a.computation("false_computation")]
        if len(ops) != len(branches) + 1:
            self.fail(f"{len(branches)} branches need {len(branches) + 1} operands, got {len(ops)}")
        regions = [self.region([], lambda _, b=b, i=i: self.emit_computation(b, [ops[i + 1]]))
                   for i, b in enumerate(branches)]
        pred = ops[0][0]
        if a.has("branch_computations"):
            return self.op("stablehlo.case", [pred], rtypes, None, regions)
        return self.op("stablehlo.if", [pred], rtypes, None, regions)

    def _op_call(self, ins, a, ops, flat, rtypes):
        comp = a.computation("to_apply")
        sym = self.function(comp)
        return self.op("func.call", flat, rtypes, {"callee": f"@{sym}"})

    def _op_fusion(self, ins, a, ops, flat, rtypes):
        comp = a.computation("calls")
        saved = self.fusion_kind
        self.fusion_kind = a.raw("kind", "kLoop")
        try:
            return self.emit_computation(comp, ops)
        finally:
            self.fusion_kind = saved

    def _op_async_start(self, ins, a, ops, flat, rtypes):
        comp = a.computation("calls")
        res = self.emit_computation(comp, ops)
        ctx = ins.shape.tuple_shapes[2:] if ins.shape.is_tuple else []
        extra = [self.context_const(s.element_type) for c in ctx for s in c.leaves()]
        return flat + res + extra

    def _op_async_done(self, ins, a, ops, flat, rtypes):
        src = self._shape_of_operand(ins, 0)
        start = len(src.tuple_shapes[0].leaves())
        return ops[0][start:start + len(rtypes)]

    # -- custom calls
    def _op_custom_call(self, ins, a, ops, flat, rtypes):
        target = a.string("custom_call_target")
        if target is None:
            self.fail("missing custom_call_target=")
        if target == "TopK":
            shape = self._shape_of_operand(ins, 0)
            k = ins.shape.leaves()[0].dims[-1]
            return self._top_k(flat[0], shape, k, True, rtypes)
        attrs = {"call_target_name": _mlir_str(target)}
        api = a.raw("api_version")
        api_n = _API_VERSIONS.get(api, 1) if api else 1
        attrs["api_version"] = f"{api_n} : i32"
        cfg = a.raw("backend_config")
        if cfg is not None:
            text = a.string("backend_config")
            if api_n == 4 and _is_ffi_dictionary(text):
                # Typed-FFI attributes: XLA prints them as an MLIR dictionary attribute
                # ({uplo = 76 : ui8, mode = 86 : ui8}), which is what StableHLO's api_version 4
                # calls carry, so the text passes through (checked by the MLIR parser).
                attrs["backend_config"] = text.strip() or "{}"
            elif api_n == 4:
                attrs["backend_config"] = _mlir_str(text)
                attrs["api_version"] = "1 : i32"  # string configs need a pre-FFI version
            else:
                attrs["backend_config"] = _mlir_str(text)
        if a.bool("custom_call_has_side_effect"):
            attrs["has_side_effect"] = "true"
        if a.has("called_computations"):
            syms = [self.function(c) for c in a.computations("called_computations")]
            attrs["called_computations"] = "[" + ", ".join(f"@{s}" for s in syms) + "]"
        if a.has("operand_layout_constraints"):
            r = a.raw("operand_layout_constraints").strip()[1:-1]
            lays = []
            for part in _split_top(r):
                lays.append(Shape.parse(part).effective_layout())

            def idx(l: Layout):
                n = len(l.minor_to_major)
                body = ", ".join(str(d) for d in l.minor_to_major)
                return f"dense<[{body}]> : tensor<{n}xindex>" if n else "dense<> : tensor<0xindex>"

            attrs["operand_layouts"] = "[" + ", ".join(idx(l) for l in lays) + "]"
            attrs["result_layouts"] = "[" + ", ".join(
                idx(s.effective_layout()) for s in ins.shape.leaves()) + "]"
        # Operands and results are flattened here; the custom-call lowering rebuilds the
        # seed's nested pointer arrays from these trees (depth first: -1 a buffer, k a k-tuple).
        operand_shapes = [self._shape_of_operand(ins, i) for i in range(len(ins.operands))]
        if any(s.is_tuple for s in operand_shapes):
            attrs[names.OPERAND_TREE] = _tree_attr(operand_shapes)
        if ins.shape.is_tuple:
            attrs[names.RESULT_TREE] = _tree_attr([ins.shape])
        return self.op("stablehlo.custom_call", flat, rtypes, attrs)

    # -- random numbers
    def _op_rng(self, ins, a, ops, flat, rtypes):
        dist = a.raw("distribution", "rng_uniform")
        d = {"rng_uniform": "UNIFORM", "rng_normal": "NORMAL"}.get(dist)
        if d is None:
            self.fail(f"unknown distribution '{dist}'", hint="expected rng_uniform or rng_normal")
        dims = ins.shape.dims
        shp = self.constant(np.array(dims, dtype=np.int64), Shape("s64", [len(dims)]))
        return [self.op1("stablehlo.rng", flat + [shp], rtypes[0],
                         {"rng_distribution": f"#stablehlo<rng_distribution {d}>"})]

    def _op_rng_bit_generator(self, ins, a, ops, flat, rtypes):
        algo = _RNG_ALGO.get(a.raw("algorithm", "rng_default"))
        if algo is None:
            self.fail(f"unknown algorithm '{a.raw('algorithm')}'",
                      hint="expected rng_default, rng_three_fry or rng_philox")
        return self.op("stablehlo.rng_bit_generator", flat, rtypes,
                       {"rng_algorithm": f"#stablehlo<rng_algorithm {algo}>"})

    # -- tokens, side effects, dynamic shapes
    def _op_after_all(self, ins, a, ops, flat, rtypes):
        if not flat:  # a fresh token: what XLA's own importer writes for after-all()
            return self._op_create_token(ins, a, ops, flat, rtypes)
        return [self.op1("stablehlo.after_all", flat, "!stablehlo.token")]

    def _op_create_token(self, ins, a, ops, flat, rtypes):
        if flat:
            self.fail("create-token takes no operands", hint="join tokens with after-all")
        return [self.op1("stablehlo.create_token", [], "!stablehlo.token")]

    def _op_optimization_barrier(self, ins, a, ops, flat, rtypes):
        return self.op("stablehlo.optimization_barrier", flat, [v.type for v in flat])

    _op_opt_barrier = _op_optimization_barrier

    def _op_partition_id(self, ins, a, ops, flat, rtypes):
        return [self.op1("stablehlo.partition_id", [], "tensor<ui32>")]

    def _op_replica_id(self, ins, a, ops, flat, rtypes):
        return [self.op1("stablehlo.replica_id", [], "tensor<ui32>")]

    def _op_get_dimension_size(self, ins, a, ops, flat, rtypes):
        d = a.ints("dimensions", required=True)[0]
        return [self.op1("stablehlo.get_dimension_size", flat, rtypes[0], {"dimension": f"{d} : i64"})]

    def _op_set_dimension_size(self, ins, a, ops, flat, rtypes):
        dims = a.ints("dimensions", required=True)
        if len(dims) != 1 or len(flat) != 2:
            self.fail("expected set-dimension-size(operand, size), dimensions={d}")
        if ins.shape.is_static:  # a static result shape: the size is a no-op here
            return [flat[0]]
        return [self.op1("stablehlo.set_dimension_size", flat, rtypes[0],
                         {"dimension": f"{dims[0]} : i64"})]

    def _op_dynamic_reshape(self, ins, a, ops, flat, rtypes):
        sizes = []
        for v in flat[1:]:
            sizes.append(self.op1("stablehlo.reshape", [v], v.type.replace("tensor<", "tensor<1x")))
        et = flat[1].type[len("tensor<"):-1]
        shp = self.op1("stablehlo.concatenate", sizes, f"tensor<{len(sizes)}x{et}>",
                       {"dimension": "0 : i64"})
        return [self.op1("stablehlo.dynamic_reshape", [flat[0], shp], rtypes[0])]

    def _channel(self, a, kind=1):
        cid = a.int("channel_id")
        return f"#stablehlo.channel_handle<handle = {cid if cid is not None else 0}, type = {kind}>"

    def _op_send(self, ins, a, ops, flat, rtypes):
        host = a.bool("is_host_transfer")
        tok = self.op1("stablehlo.send", flat, "!stablehlo.token", {
            "channel_handle": self._channel(a, 2 if host else 1),
            "is_host_transfer": "true" if host else "false"})
        data = flat[:-1]
        return data + [self.context_const("u32"), tok]

    def _op_send_done(self, ins, a, ops, flat, rtypes):
        return [flat[-1]]

    def _op_recv(self, ins, a, ops, flat, rtypes):
        host = a.bool("is_host_transfer")
        res = self.op("stablehlo.recv", flat, rtypes[:-2] + ["!stablehlo.token"], {
            "channel_handle": self._channel(a, 3 if host else 1),
            "is_host_transfer": "true" if host else "false"})
        return res[:-1] + [self.context_const("u32"), res[-1]]

    def _op_recv_done(self, ins, a, ops, flat, rtypes):
        return flat[:-2] + [flat[-1]]

    def _op_infeed(self, ins, a, ops, flat, rtypes):
        cfg = a.string("infeed_config", "")
        return self.op("stablehlo.infeed", flat, rtypes, {"infeed_config": _mlir_str(cfg)})

    def _op_outfeed(self, ins, a, ops, flat, rtypes):
        cfg = a.string("outfeed_config", "")
        return [self.op1("stablehlo.outfeed", flat, "!stablehlo.token",
                         {"outfeed_config": _mlir_str(cfg)})]

    def _op_copy_start(self, ins, a, ops, flat, rtypes):
        return [flat[0], flat[0]] + [self.context_const(s.element_type)
                                     for s in ins.shape.leaves()[2:]]

    # -- collectives
    def _groups(self, a):
        groups = a.replica_groups()
        if len({len(g) for g in groups}) > 1 and self.cur.opcode not in _UNEQUAL_GROUPS_OK:
            self.fail(f"replica groups of unequal sizes {groups}",
                      hint="only all-reduce accepts groups of different sizes; "
                           "the result shape of this op depends on the group size")
        return _i64_matrix(groups, pad=True)

    def _collective_attrs(self, a, groups=True):
        attrs = {}
        if groups:
            attrs["replica_groups"] = self._groups(a)
        if a.has("channel_id"):
            attrs["channel_handle"] = self._channel(a)
        if a.bool("use_global_device_ids"):
            attrs["use_global_device_ids"] = "unit"
        return attrs

    def _op_all_reduce(self, ins, a, ops, flat, rtypes):
        comp = a.computation("to_apply")
        sts = self._scalar_types(flat)
        region = self.comp_region(comp, sts[:1] * 2)
        return self.op("stablehlo.all_reduce", flat, rtypes, self._collective_attrs(a), [region])

    _op_all_reduce_start = _op_all_reduce

    def _op_reduce_scatter(self, ins, a, ops, flat, rtypes):
        comp = a.computation("to_apply")
        sts = self._scalar_types(flat)
        region = self.comp_region(comp, sts[:1] * 2)
        attrs = {"scatter_dimension": f"{a.ints('dimensions', required=True)[0]} : i64"}
        attrs.update(self._collective_attrs(a))
        return self.op("stablehlo.reduce_scatter", flat, rtypes, attrs, [region])

    def _op_all_gather(self, ins, a, ops, flat, rtypes):
        attrs = {"all_gather_dim": f"{a.ints('dimensions', required=True)[0]} : i64"}
        attrs.update(self._collective_attrs(a))
        return self.op("stablehlo.all_gather", flat, rtypes, attrs)

    def _op_all_gather_start(self, ins, a, ops, flat, rtypes):
        res_types = rtypes[len(flat):]
        attrs = {"all_gather_dim": f"{a.ints('dimensions', required=True)[0]} : i64"}
        attrs.update(self._collective_attrs(a))
        return flat + self.op("stablehlo.all_gather", flat, res_types, attrs)

    def _op_all_gather_done(self, ins, a, ops, flat, rtypes):
        return flat[len(flat) - len(rtypes):]

    def _op_all_to_all(self, ins, a, ops, flat, rtypes):
        groups = a.replica_groups()
        d = a.ints("dimensions", [])
        if not d:
            return self._tuple_all_to_all(ins, a, flat)
        if groups:
            count = len(groups[0])
        else:
            count = self._num_devices()
        attrs = {"split_dimension": f"{d[0]} : i64", "concat_dimension": f"{d[0]} : i64",
                 "split_count": f"{count} : i64"}
        attrs.update(self._all_to_all_attrs(a, count))
        return self.op("stablehlo.all_to_all", flat, rtypes, attrs)

    def _all_to_all_attrs(self, a, count):
        """_collective_attrs, with HLO's "no replica_groups" (all devices in one group) written
        as that group of `count`: StableHLO's all_to_all verifier divides by the number of
        groups, and an empty group list killed the reader with SIGFPE (issue 25)."""
        attrs = self._collective_attrs(a)
        if not a.replica_groups():
            attrs["replica_groups"] = _i64_matrix([list(range(count))])
        return attrs

    def _tuple_all_to_all(self, ins, a, flat):
        """Tuple all-to-all (no dimensions=): operand i goes to the i-th replica of the group and
        result i comes from it. The same as an array all-to-all of the operands stacked on a
        new leading dimension, then unstacked."""
        n = len(flat)
        leaf = self._shape_of_operand(ins, 0)
        if len({v.type for v in flat}) != 1 or leaf.is_tuple:
            self.fail("tuple all-to-all needs operands of one array shape")
        t = flat[0].type
        row_t = t.replace("tensor<", "tensor<1x", 1)
        all_t = t.replace("tensor<", f"tensor<{n}x", 1)
        stacked = self.op1("stablehlo.concatenate", [self.op1("stablehlo.reshape", [v], row_t) for v in flat],
                           all_t, {"dimension": "0 : i64"})
        attrs = {"split_dimension": "0 : i64", "concat_dimension": "0 : i64", "split_count": f"{n} : i64"}
        attrs.update(self._all_to_all_attrs(a, n))
        moved = self.op1("stablehlo.all_to_all", [stacked], all_t, attrs)
        dims = list(leaf.dims)
        out = []
        for i in range(n):
            piece = self.op1("stablehlo.slice", [moved], row_t, {
                "start_indices": _arr([i] + [0] * len(dims)), "limit_indices": _arr([i + 1] + dims),
                "strides": _arr([1] * (len(dims) + 1))})
            out.append(self.op1("stablehlo.reshape", [piece], t))
        return out

    def _num_devices(self):
        n = 1
        for key in ("replica_count", "num_partitions"):
            if key in self.m.attrs:
                n = max(n, int(self.m.attrs[key].raw))
        return n

    def _op_collective_permute(self, ins, a, ops, flat, rtypes):
        pairs = parse_replica_groups(a.raw("source_target_pairs", "{}"),
                                     lambda msg: self.fail(msg))
        attrs = {"source_target_pairs": _i64_matrix(pairs, 2)}
        attrs.update(self._collective_attrs(a, groups=False))
        return [self.op1("stablehlo.collective_permute", flat[:1], rtypes[0], attrs)]

    def _op_collective_permute_start(self, ins, a, ops, flat, rtypes):
        pairs = parse_replica_groups(a.raw("source_target_pairs", "{}"),
                                     lambda msg: self.fail(msg))
        attrs = {"source_target_pairs": _i64_matrix(pairs, 2)}
        attrs.update(self._collective_attrs(a, groups=False))
        r = self.op1("stablehlo.collective_permute", flat[:1], rtypes[1], attrs)
        return [flat[0], r] + [self.context_const(s.element_type) for s in ins.shape.leaves()[2:]]

    def _op_collective_permute_done(self, ins, a, ops, flat, rtypes):
        return [flat[1]]

    def _op_ragged_all_to_all(self, ins, a, ops, flat, rtypes):
        """ragged-all-to-all has no StableHLO op: it becomes the custom call JAX writes for
        lax.ragged_all_to_all (typed-FFI, groups and channel in a dictionary config)."""
        if len(flat) != 6:
            self.fail(f"expected 6 operands (input, output, input_offsets, send_sizes, "
                      f"output_offsets, recv_sizes), got {len(flat)}")
        config = [f"replica_groups = {self._groups(a)}"]
        if a.has("channel_id"):
            config.append(f"channel_id = {a.int('channel_id')} : i64")
        return [self.op1("stablehlo.custom_call", flat, rtypes[0], {
            "call_target_name": '"ragged_all_to_all"', "api_version": "4 : i32",
            "backend_config": "{" + ", ".join(config) + "}"})]

    def _op_collective_broadcast(self, ins, a, ops, flat, rtypes):
        return [self.op1("stablehlo.collective_broadcast", flat, rtypes[0], self._collective_attrs(a))]

    # -- batch norm
    def _bn_attrs(self, a):
        eps = a.float("epsilon", 0.001)
        return {"epsilon": f"{_fmt_float(np.float32(eps))} : f32",
                "feature_index": f"{a.int('feature_index', required=True)} : i64"}

    def _op_batch_norm_training(self, ins, a, ops, flat, rtypes):
        return self.op("stablehlo.batch_norm_training", flat, rtypes, self._bn_attrs(a))

    def _op_batch_norm_inference(self, ins, a, ops, flat, rtypes):
        return self.op("stablehlo.batch_norm_inference", flat, rtypes, self._bn_attrs(a))

    def _op_batch_norm_grad(self, ins, a, ops, flat, rtypes):
        return self.op("stablehlo.batch_norm_grad", flat, rtypes, self._bn_attrs(a))


def _flat_index(shape: Shape, path: list[int]) -> int:
    """Index of the leaf at tuple `path` among `shape`'s flattened leaves."""
    idx = 0
    for k in path:
        idx += sum(len(s.leaves()) for s in shape.tuple_shapes[:k])
        shape = shape.tuple_shapes[k]
    if shape.is_tuple:
        raise IndexError("alias of a whole tuple")
    return idx


def _def_before_use(instructions):
    """Instructions in an order where operands come first.  Printed HLO already is in
    that order; the parser accepts any order, so hand-written text may not be.  A cycle
    (`a = add(p, b)`, `b = add(p, a)`) has no such order: it raises _Cycle naming it."""
    by_name = {i.name: i for i in instructions}
    done, on_path, order = set(), set(), []
    for root in instructions:
        if root.name in done:
            continue
        stack = [(root, False)]
        while stack:
            ins, expanded = stack.pop()
            if expanded:
                on_path.discard(ins.name)
                done.add(ins.name)
                order.append(ins)
                continue
            if ins.name in done:
                continue
            on_path.add(ins.name)
            stack.append((ins, True))
            for o in reversed(ins.operands):
                dep = by_name.get(o)
                if dep is None or dep.name in done:
                    continue
                if dep.name in on_path:
                    path = [i.name for i, expanded in stack if expanded and i.name in on_path]
                    raise _Cycle(dep, path[path.index(dep.name):] + [dep.name])
                stack.append((dep, False))
    return order


class _Cycle(Exception):
    def __init__(self, instruction, names):
        self.instruction, self.names = instruction, names


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for c in text:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


SUPPORTED_OPCODES = sorted(
    set(_SIMPLE) | _IDENTITY
    | {n[4:].replace("_", "-") for n in dir(Emitter) if n.startswith("_op_")}
    | {"parameter"})
