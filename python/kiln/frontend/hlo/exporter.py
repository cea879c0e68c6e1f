"""Export StableHLO (MLIR text) back to HLO module text.

Covers the ops the importer produces, so HLO -> StableHLO -> HLO -> StableHLO reaches a
fixed point.  Structure mapping (the inverse of the importer's):
* func.func @main -> ENTRY; other functions -> computations called with `call`.
* Multi-result ops -> a tuple-shaped instruction plus get-tuple-element per result.
* Regions -> computations: reducers take scalar parameters; while cond/body take one tuple
  parameter; if/case branches take a tuple of the outer values they capture.
* Attributes are read from their printed MLIR form, which is stable and documented.
"""
from __future__ import annotations

import math
import re

import numpy as np

from kiln.errors import KilnError
from kiln.dialects import kiln as names
from kiln.layout import ELEMENT_TYPES, MLIR_TO_HLO, Layout

from .emitter import _SIMPLE

# The importer's one-to-one table read backwards (its last spelling of an opcode wins, e.g.
# count-leading-zeros over clz), so the two directions cannot drift apart.
_ELEMENTWISE = {stablehlo: hlo for hlo, stablehlo in _SIMPLE.items()}
_ELEMENTWISE["optimization_barrier"] = "opt-barrier"


def _fail(msg, hint=None):
    raise KilnError(msg, location="stablehlo-to-hlo", hint=hint)


# ----------------------------------------------------------------------------- types

_TENSOR = re.compile(r"tensor<((?:[0-9?]+x)*)([^,>]+(?:<[^>]*>)?)(?:,\s*#stablehlo\.bounds<([^>]*)>)?>")


def hlo_shape(type_str: str, layout: str | None = None) -> str:
    t = str(type_str)
    if t == "!stablehlo.token":
        return "token[]"
    m = _TENSOR.fullmatch(t)
    if not m:
        _fail(f"cannot export type {t}", hint="only ranked tensors and tokens have HLO shapes")
    dims = [d for d in m.group(1).split("x") if d]
    et = MLIR_TO_HLO.get(m.group(2).strip())
    if et is None:
        _fail(f"element type {m.group(2)} has no HLO equivalent")
    bounds = [b.strip() for b in m.group(3).split(",")] if m.group(3) else [None] * len(dims)
    out = []
    for d, b in zip(dims, bounds):
        if d == "?":
            out.append(f"<={b}" if b not in (None, "?") else "?")
        else:
            out.append(d)
    if not dims or et == "token":
        return f"{et}[]"
    lay = layout if layout is not None else str(Layout.default(len(dims)))
    return f"{et}[{','.join(out)}]{lay}"


def _tuple_shape(shapes) -> str:
    return "(" + ", ".join(shapes) + ")"


# ----------------------------------------------------------------------------- attributes

def _ints(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"-?\d+", text)]


def _array(attr) -> list[int]:
    s = str(attr)
    body = s.split(":", 1)[1] if ":" in s else ""
    return _ints(body)


def _enum(attr) -> str:
    return re.search(r"(\w+)>\s*$", str(attr)).group(1)


def _struct(attr) -> dict[str, list[int]]:
    s = str(attr)
    out = {}
    for k, v in re.findall(r"(\w+)\s*=\s*(\[[^\]]*\]|-?\d+)", s):
        out[k] = _ints(v)
    return out


def _replica_groups_text(attr) -> str:
    """replica_groups={...}; the -1 entries that pad groups of unequal size are dropped."""
    groups = [[v for v in g if v >= 0] for g in _dense_ints(attr)]
    return "replica_groups={" + ",".join("{" + _csv(g) + "}" for g in groups) + "}"


def _dense_ints(attr) -> list[list[int]]:
    """dense<[[0, 1], [2, 3]]> : tensor<2x2xi64> (or a splat) -> nested python lists."""
    s = str(attr)
    m = re.match(r"dense<(.*)>\s*:\s*tensor<([0-9x]*)x?i64>", s)
    if not m:
        _fail(f"expected an i64 matrix attribute, got {s}")
    body, dims = m.group(1), [int(d) for d in m.group(2).split("x") if d]
    if body == "":
        return []
    if not body.startswith("["):  # splat
        return (np.full(dims, int(body))).tolist()
    return eval(body, {"__builtins__": {}})  # digits, commas and brackets only


def _str_attr(attr) -> str:
    s = str(attr)
    if s.startswith('"'):
        return _mlir_unescape(s[1:-1])
    return s


def _mlir_unescape(s: str) -> str:
    # MLIR prints non-printable bytes and quotes as \XX hex escapes.
    out = bytearray()
    i = 0
    while i < len(s):
        if s[i] == "\\" and i + 2 < len(s) + 1 and re.fullmatch(r"[0-9A-Fa-f]{2}", s[i + 1:i + 3]):
            out.append(int(s[i + 1:i + 3], 16))
            i += 3
        elif s[i] == "\\" and i + 1 < len(s):
            out += {"n": b"\n", "t": b"\t", '"': b'"', "\\": b"\\"}.get(s[i + 1], s[i + 1].encode())
            i += 2
        else:
            out += s[i].encode()
            i += 1
    return out.decode("utf-8", "replace")


def _hlo_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


# ----------------------------------------------------------------------------- literals

def _literal(attr, type_str: str) -> str:
    """HLO literal text for a dense elements attribute."""
    s = str(attr)
    m = re.match(r"dense<(.*)>\s*:\s*(tensor<.*>)$", s, re.S)
    if not m:
        _fail(f"cannot export constant {s[:60]}")
    body = m.group(1).strip()
    tm = _TENSOR.fullmatch(m.group(2))
    dims = [int(d) for d in tm.group(1).split("x") if d]
    et = ELEMENT_TYPES[MLIR_TO_HLO[tm.group(2).strip()]]
    n = int(np.prod(dims)) if dims else 1
    if body.startswith('"0x'):
        raw = bytes.fromhex(body[3:-1])
        if et.kind == "pred":
            vals = [bool(b) for b in raw]
        else:
            vals = list(np.frombuffer(raw, dtype=et.dtype))
        vals = [_fmt_value(v, et) for v in vals]
    else:
        toks = re.findall(r"\(\s*[^()]*\)|[^\s\[\],]+", body)
        vals = [_fmt_token(t, et) for t in toks]
    if len(vals) == 1 and n != 1:
        vals = vals * n
    if len(vals) != n:
        _fail(f"constant has {len(vals)} values for {n} elements")
    if not dims:
        return vals[0] if vals else "{}"

    def nest(off, ds):
        if len(ds) == 1:
            return "{" + ", ".join(vals[off:off + ds[0]]) + "}"
        step = int(np.prod(ds[1:]))
        return "{ " + ", ".join(nest(off + i * step, ds[1:]) for i in range(ds[0])) + " }"

    return nest(0, dims)


def _fmt_value(v, et) -> str:
    if et.kind == "pred":
        return "true" if v else "false"
    if et.kind in ("int", "uint"):
        return str(int(v))
    if et.kind == "complex":
        return f"({_fmt_float(v.real)}, {_fmt_float(v.imag)})"
    return _fmt_float(float(v))


def _fmt_float(f: float) -> str:
    if math.isnan(f):
        return "-nan" if math.copysign(1, f) < 0 else "nan"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    return repr(float(f))


def _fmt_token(tok: str, et) -> str:
    if tok.startswith("("):
        re_, im = [x.strip() for x in tok[1:-1].split(",")]
        return f"({_fmt_token(re_, _FLOAT_OF[et.hlo])}, {_fmt_token(im, _FLOAT_OF[et.hlo])})"
    if et.kind == "pred":
        return "true" if tok in ("true", "1") else "false"
    if et.kind in ("int", "uint"):
        return str(int(tok, 0))
    if tok.lower().startswith(("0x", "-0x")):
        bits = int(tok, 16)
        width = et.dtype.itemsize
        u = np.array([bits], dtype={1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[width])
        return _fmt_float(float(u.view(et.dtype)[0]))
    return _fmt_float(float(tok))


_FLOAT_OF = {"c64": ELEMENT_TYPES["f32"], "c128": ELEMENT_TYPES["f64"]}


# ----------------------------------------------------------------------------- exporter

class _Comp:
    def __init__(self, name: str):
        self.name = name
        self.lines: list[str] = []
        self.params: list[tuple[str, str]] = []
        self.root: tuple[str, str] | None = None


class Exporter:
    def __init__(self, module):
        self.module = module
        self.comps: list[str] = []
        self.used_names: set[str] = set()
        self.func_comp: dict[str, str] = {}
        self.funcs = {}
        self.counter = 0
        self.aliases: dict[int, int] = {}   # entry argument -> result (tf.aliasing_output)
        self.entry_results = 0

    def unique(self, base: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_.\-]", "_", base)
        name, k = base, 0
        while name in self.used_names:
            k += 1
            name = f"{base}.{k}"
        self.used_names.add(name)
        return name

    # -- module
    def run(self) -> str:
        from torch_mlir import ir  # noqa: F401

        name = "module"
        attrs = self.module.operation.attributes
        if "sym_name" in attrs:
            name = str(attrs["sym_name"]).strip('"')
        if names.HLO_MODULE in attrs:
            name = _str_attr(attrs[names.HLO_MODULE])
        for op in self.module.body.operations:
            if op.operation.name == "func.func":
                self.funcs[str(op.attributes["sym_name"]).strip('"')] = op
        if "main" not in self.funcs:
            _fail("module has no func.func @main", hint="the entry function must be named main")
        entry_text, sig = self.export_func("main", entry=True)
        header = f"HloModule {name}, entry_computation_layout={{{sig}}}"
        if self.aliases:
            nres = self.entry_results
            items = [f"{{{r}}}: ({a}, {{}}, may-alias)" if nres > 1 else f"{{}}: ({a}, {{}}, may-alias)"
                     for a, r in sorted(self.aliases.items(), key=lambda x: x[1])]
            header += ", input_output_alias={ " + ", ".join(items) + " }"
        for key in ("num_partitions", "replica_count"):
            if names.HLO_CONFIG[key] in attrs:
                header += f", {key}={_ints(str(attrs[names.HLO_CONFIG[key]]))[0]}"
        return header + "\n\n" + "\n\n".join(self.comps + [entry_text]) + "\n"

    def export_func(self, fname: str, entry=False):
        if not entry and fname in self.func_comp:
            return self.func_comp[fname]
        func = self.funcs.get(fname)
        if func is None:
            _fail(f"call to unknown function @{fname}")
        cname = "main" if entry else self.unique(fname)
        if entry:
            self.used_names.add("main")
        else:
            self.func_comp[fname] = cname
        block = func.regions[0].blocks[0]
        # Instructions carry default layouts (HLO before layout assignment); the layouts the
        # caller asked for (kiln.layout) go to entry_computation_layout only.
        arg_layouts = _arg_layouts(func, "arg_attrs", len(block.arguments))
        comp = _Comp(cname)
        env = {}
        entry_params = []
        for i, arg in enumerate(block.arguments):
            shape = hlo_shape(arg.type)
            pname = self.unique(f"Arg_{i}")
            comp.lines.append(f"  %{pname} = {shape} parameter({i})")
            comp.params.append((pname, shape))
            entry_params.append(hlo_shape(arg.type, arg_layouts[i]))
            env[arg] = (pname, shape)
        rets = self.export_block(block, comp, env)
        if entry:
            self.aliases = _aliasing(func, len(block.arguments))
            self.entry_results = len(rets)
        res_layouts = _arg_layouts(func, "res_attrs", len(rets))
        entry_results = [_with_layout(s, res_layouts[i]) if res_layouts[i] else s
                         for i, (_, s) in enumerate(rets)]
        self.finish(comp, rets)
        text = self.comp_text(comp, entry)
        if entry:
            result = entry_results[0] if len(rets) == 1 else _tuple_shape(entry_results)
            return text, "(" + ", ".join(entry_params) + ")->" + result
        self.comps.append(text)
        return cname

    def finish(self, comp: _Comp, rets, force_tuple=False):
        if len(rets) == 1 and not force_tuple:
            name, shape = rets[0]
            # The root must be an instruction of this computation; parameters qualify too.
            comp.root = (name, shape)
            for i, ln in enumerate(comp.lines):
                if ln.startswith(f"  %{name} = "):
                    comp.lines[i] = "  ROOT " + ln[2:]
                    return
        tname = self.unique("tuple")
        shape = _tuple_shape([s for _, s in rets])
        comp.lines.append(f"  ROOT %{tname} = {shape} tuple("
                          + ", ".join(f"%{n}" for n, _ in rets) + ")")
        comp.root = (tname, shape)

    def comp_text(self, comp: _Comp, entry=False) -> str:
        sig = ", ".join(f"{n}: {s}" for n, s in comp.params)
        head = ("ENTRY " if entry else "") + f"%{comp.name} ({sig}) -> {comp.root[1]}"
        return head + " {\n" + "\n".join(comp.lines) + "\n}"

    def region_comp(self, region, base: str, tuple_param=False, tuple_root=False,
                    captures=()) -> str:
        """A computation from a region.  Block arguments become parameters (or elements of
        one tuple parameter); captured outer values become elements of a tuple parameter."""
        comp = _Comp(self.unique(base))
        block = region.blocks[0]
        env = {}
        args = list(block.arguments)
        if tuple_param or captures:
            vals = args if tuple_param else list(captures)
            shapes = [hlo_shape(v.type) for v in vals]
            pshape = _tuple_shape(shapes)
            pname = self.unique("param")
            comp.lines.append(f"  %{pname} = {pshape} parameter(0)")
            comp.params.append((pname, pshape))
            for i, (v, s) in enumerate(zip(vals, shapes)):
                g = self.unique("get-tuple-element")
                comp.lines.append(f"  %{g} = {s} get-tuple-element(%{pname}), index={i}")
                env[v] = (g, s)
        else:
            for i, arg in enumerate(args):
                s = hlo_shape(arg.type)
                pname = self.unique(f"Arg_{i}")
                comp.lines.append(f"  %{pname} = {s} parameter({i})")
                comp.params.append((pname, s))
                env[arg] = (pname, s)
        rets = self.export_block(block, comp, env)
        self.finish(comp, rets, force_tuple=tuple_root)
        self.comps.append(self.comp_text(comp))
        return comp.name

    def export_block(self, block, comp: _Comp, env: dict):
        skip = _shape_builders(block)
        for op in block.operations:
            name = op.operation.name
            if name in ("func.return", "stablehlo.return"):
                return [self._get(env, v) for v in op.operands]
            if op.results and op.results[0] in skip:
                continue
            self.export_op(op, comp, env)
        _fail("block without a terminator")

    def _get(self, env, v):
        try:
            return env[v]
        except KeyError:
            _fail("value used inside a region is defined outside it",
                  hint="only if/case branches may capture outer values")

    # -- ops
    def emit(self, comp: _Comp, opcode: str, shape: str, operands, attrs=(), base=None) -> str:
        name = self.unique(base or opcode)
        text = f"  %{name} = {shape} {opcode}(" + ", ".join(f"%{n}" for n, _ in operands) + ")"
        if attrs:
            text += ", " + ", ".join(attrs)
        comp.lines.append(text)
        return name

    def bind_results(self, op, comp, env, name, shapes):
        results = list(op.results)
        if len(results) == 1:
            env[results[0]] = (name, shapes[0])
            return
        for i, r in enumerate(results):
            g = self.emit(comp, "get-tuple-element", shapes[i], [(name, None)], [f"index={i}"])
            env[r] = (g, shapes[i])

    def export_op(self, op, comp: _Comp, env: dict):
        full = op.operation.name
        dialect, _, short = full.partition(".")
        operands = list(op.operands)
        if full == "stablehlo.rng":
            operands = operands[:2]
        if full == "stablehlo.dynamic_reshape" and operands[1] not in env:
            ops = [self._get(env, operands[0]), (None, "")]  # shape chain was skipped
        else:
            ops = [self._get(env, v) for v in operands]
        rshapes = [hlo_shape(r.type) for r in op.results]
        rshape = rshapes[0] if len(rshapes) == 1 else _tuple_shape(rshapes)
        at = op.operation.attributes

        def a(key):
            return at[key] if key in at else None

        attrs: list[str] = []
        opcode = None
        if full == "func.call":
            callee = str(a("callee")).lstrip("@")
            cname = self.export_func(callee)
            name = self.emit(comp, "call", rshape, ops, [f"to_apply=%{cname}"])
            return self.bind_results(op, comp, env, name, rshapes)
        if dialect != "stablehlo":
            _fail(f"cannot export op {full}")
        if short in _ELEMENTWISE:
            opcode = _ELEMENTWISE[short]
            if short == "optimization_barrier":
                t = self.emit(comp, "tuple", _tuple_shape([s for _, s in ops]), ops)
                name = self.emit(comp, "opt-barrier", _tuple_shape(rshapes), [(t, None)])
                for i, r in enumerate(op.results):
                    g = self.emit(comp, "get-tuple-element", rshapes[i], [(name, None)], [f"index={i}"])
                    env[r] = (g, rshapes[i])
                return
        elif short == "constant":
            uses = [(u.owner.name, u.operand_number) for u in op.results[0].uses]
            if uses and all(u == ("stablehlo.rng", 2) for u in uses):
                return  # the shape operand of rng is implied by the HLO result shape
            try:
                value = a("value")
            except TypeError:  # complex attributes have no Python class; use the print
                value = re.search(r"dense<.*>\s*:\s*tensor<[^>]*>+", str(op)).group(0)
            name = self.emit(comp, "constant", rshape, [], base="constant")
            lit = _literal(value, str(op.results[0].type))
            comp.lines[-1] = comp.lines[-1].replace("constant()", f"constant({lit})")
            env[op.results[0]] = (name, rshape)
            return
        elif short == "compare":
            opcode = "compare"
            attrs = [f"direction={_enum(a('comparison_direction'))}"]
            if a("compare_type") is not None:
                attrs.append(f"type={_enum(a('compare_type'))}")
        elif short == "broadcast_in_dim":
            opcode, attrs = "broadcast", [f"dimensions={{{_csv(_array(a('broadcast_dimensions')))}}}"]
        elif short == "concatenate":
            opcode, attrs = "concatenate", [f"dimensions={{{_ints(str(a('dimension')))[0]}}}"]
        elif short == "transpose":
            opcode, attrs = "transpose", [f"dimensions={{{_csv(_array(a('permutation')))}}}"]
        elif short == "reverse":
            opcode, attrs = "reverse", [f"dimensions={{{_csv(_array(a('dimensions')))}}}"]
        elif short == "slice":
            st, li, sr = _array(a("start_indices")), _array(a("limit_indices")), _array(a("strides"))
            opcode = "slice"
            attrs = ["slice={" + ", ".join(f"[{x}:{y}:{z}]" for x, y, z in zip(st, li, sr)) + "}"]
        elif short == "pad":
            lo, hi, it = (_array(a("edge_padding_low")), _array(a("edge_padding_high")),
                          _array(a("interior_padding")))
            opcode = "pad"
            attrs = ["padding=" + "x".join(f"{x}_{y}_{z}" for x, y, z in zip(lo, hi, it))]
        elif short == "iota":
            opcode, attrs = "iota", [f"iota_dimension={_ints(str(a('iota_dimension')))[0]}"]
        elif short == "dynamic_slice":
            opcode, attrs = "dynamic-slice", [f"dynamic_slice_sizes={{{_csv(_array(a('slice_sizes')))}}}"]
        elif short == "dynamic_update_slice":
            opcode = "dynamic-update-slice"
        elif short == "dot_general":
            d = _struct(a("dot_dimension_numbers"))
            opcode = "dot"
            for k, hk in (("lhs_batching_dimensions", "lhs_batch_dims"),
                          ("rhs_batching_dimensions", "rhs_batch_dims"),
                          ("lhs_contracting_dimensions", "lhs_contracting_dims"),
                          ("rhs_contracting_dimensions", "rhs_contracting_dims")):
                if d.get(k):
                    attrs.append(f"{hk}={{{_csv(d[k])}}}")
            if a("precision_config") is not None:
                attrs.append(_precision(a("precision_config")))
        elif short == "convolution":
            opcode = "convolution"
            attrs = self._conv_attrs(a, op)
        elif short in ("reduce", "reduce_window", "select_and_scatter", "scatter", "sort", "map",
                       "all_reduce", "reduce_scatter"):
            opcode, attrs = self._region_op(short, op, a)
        elif short == "while":
            return self._while(op, comp, env, ops, rshapes)
        elif short in ("if", "case"):
            return self._branches(short, op, comp, env, ops, rshapes)
        elif short == "gather":
            d = _struct(a("dimension_numbers"))
            opcode = "gather"
            for k in ("offset_dims", "collapsed_slice_dims", "operand_batching_dims",
                      "start_indices_batching_dims", "start_index_map"):
                if d.get(k):
                    attrs.append(f"{k}={{{_csv(d[k])}}}")
            attrs.append(f"index_vector_dim={d.get('index_vector_dim', [0])[0]}")
            attrs.append(f"slice_sizes={{{_csv(_array(a('slice_sizes')))}}}")
            if str(a("indices_are_sorted")) == "true":
                attrs.append("indices_are_sorted=true")
        elif short == "custom_call" and _str_attr(a("call_target_name")) == "ragged_all_to_all":
            opcode, attrs = "ragged-all-to-all", self._ragged_all_to_all(a)
        elif short == "custom_call":
            opcode = "custom-call"
            attrs = [f"custom_call_target={_hlo_str(_str_attr(a('call_target_name')))}"]
            api = _ints(str(a("api_version")))[0] if a("api_version") is not None else 1
            names = {1: "API_VERSION_ORIGINAL", 2: "API_VERSION_STATUS_RETURNING",
                     3: "API_VERSION_STATUS_RETURNING_UNIFIED", 4: "API_VERSION_TYPED_FFI"}
            if api != 1:
                attrs.append(f"api_version={names.get(api, 'API_VERSION_ORIGINAL')}")
            if a("backend_config") is not None:
                cfg = str(a("backend_config"))
                attrs.append("backend_config=" + (cfg if cfg.startswith("{") else
                                                  _hlo_str(_str_attr(a("backend_config")))))
            if str(a("has_side_effect")) == "true":
                attrs.append("custom_call_has_side_effect=true")
            if a("operand_layouts") is not None:
                lays = re.findall(r"dense<([^>]*)>", str(a("operand_layouts")))
                shapes = []
                for (n, s), l in zip(ops, lays):
                    base = s[:s.index("{")] if "{" in s else s
                    shapes.append(base + "{" + _csv(_ints(l)) + "}")
                attrs.append("operand_layout_constraints={" + ", ".join(shapes) + "}")
        elif short == "rng_bit_generator":
            opcode = "rng-bit-generator"
            algo = {"DEFAULT": "rng_default", "THREE_FRY": "rng_three_fry", "PHILOX": "rng_philox"}
            attrs = [f"algorithm={algo[_enum(a('rng_algorithm'))]}"]
        elif short == "rng":
            opcode = "rng"
            dist = {"UNIFORM": "rng_uniform", "NORMAL": "rng_normal"}
            attrs = [f"distribution={dist[_enum(a('rng_distribution'))]}"]
        elif short == "fft":
            opcode = "fft"
            attrs = [f"fft_type={_enum(a('fft_type'))}",
                     f"fft_length={{{_csv(_array(a('fft_length')))}}}"]
        elif short == "cholesky":
            opcode, attrs = "cholesky", [f"lower={'true' if str(a('lower')) == 'true' else 'false'}"]
        elif short == "triangular_solve":
            opcode = "triangular-solve"
            attrs = [f"left_side={a('left_side')}", f"lower={a('lower')}",
                     f"unit_diagonal={a('unit_diagonal')}",
                     f"transpose_a={_enum(a('transpose_a'))}"]
        elif short in ("after_all", "create_token"):
            opcode = "after-all"  # after-all() with no operands is HLO's fresh token
        elif short in ("replica_id", "partition_id"):
            opcode = short.replace("_", "-")
        elif short == "reduce_precision":
            opcode = "reduce-precision"
            attrs = [f"exponent_bits={_ints(str(a('exponent_bits')))[0]}",
                     f"mantissa_bits={_ints(str(a('mantissa_bits')))[0]}"]
        elif short in ("get_dimension_size", "set_dimension_size"):
            opcode = short.replace("_", "-")
            attrs = [f"dimensions={{{_ints(str(a('dimension')))[0]}}}"]
        elif short in ("batch_norm_training", "batch_norm_inference", "batch_norm_grad"):
            opcode = short.replace("_", "-")
            eps = float(str(a("epsilon")).split(":")[0])
            attrs = [f"epsilon={repr(float(np.float32(eps)))}",
                     f"feature_index={_ints(str(a('feature_index')))[0]}"]
        elif short in ("all_gather", "all_to_all", "collective_permute", "collective_broadcast"):
            opcode, attrs = self._collective(short, a)
        elif short in ("dynamic_reshape", "infeed", "outfeed", "send", "recv"):
            return getattr(self, "_" + short)(op, comp, env, ops, rshapes, a)
        else:
            _fail(f"cannot export op {full}", hint="not yet supported by stablehlo_to_hlo")
        name = self.emit(comp, opcode, rshape, ops, attrs)
        self.bind_results(op, comp, env, name, rshapes)

    def _dynamic_reshape(self, op, comp, env, ops, rshapes, a):
        # The importer builds the shape operand as concatenate(reshape(scalar)...); reuse
        # those scalars so repeated round trips do not stack conversions.
        producer = op.operands[1].owner
        if getattr(producer, "name", "") == "stablehlo.concatenate":
            scalars = []
            for v in producer.operands:
                p = v.owner
                if getattr(p, "name", "") == "stablehlo.reshape" and \
                        str(p.operands[0].type).startswith("tensor<i"):
                    scalars.append(self._get(env, p.operands[0]))
                else:
                    scalars = None
                    break
            if scalars:
                name = self.emit(comp, "dynamic-reshape", rshapes[0], [ops[0]] + scalars)
                env[op.results[0]] = (name, rshapes[0])
                return
        shape_val, shape_shape = ops[1]
        n = int(re.search(r"\[(\d+)\]", shape_shape).group(1))
        et = shape_shape.split("[")[0]
        sizes = []
        for i in range(n):
            sl = self.emit(comp, "slice", f"{et}[1]{{0}}", [ops[1]], [f"slice={{[{i}:{i + 1}]}}"])
            sizes.append((self.emit(comp, "reshape", f"{et}[]", [(sl, None)]), f"{et}[]"))
        name = self.emit(comp, "dynamic-reshape", rshapes[0], [ops[0]] + sizes)
        env[op.results[0]] = (name, rshapes[0])

    def _infeed(self, op, comp, env, ops, rshapes, a):
        data = _tuple_shape(rshapes[:-1])
        cfg = _str_attr(a("infeed_config")) if a("infeed_config") is not None else ""
        name = self.emit(comp, "infeed", _tuple_shape([data, "token[]"]), ops,
                         [f"infeed_config={_hlo_str(cfg)}"])
        d = self.emit(comp, "get-tuple-element", data, [(name, None)], ["index=0"])
        for i, r in enumerate(list(op.results)[:-1]):
            env[r] = (self.emit(comp, "get-tuple-element", rshapes[i], [(d, None)], [f"index={i}"]),
                      rshapes[i])
        env[op.results[-1]] = (self.emit(comp, "get-tuple-element", "token[]", [(name, None)],
                                         ["index=1"]), "token[]")

    def _outfeed(self, op, comp, env, ops, rshapes, a):
        data = ops[:-1]
        if len(data) == 1:
            d = data[0]
        else:
            d = (self.emit(comp, "tuple", _tuple_shape([s for _, s in data]), data), None)
            d = (d[0], _tuple_shape([s for _, s in data]))
        cfg = _str_attr(a("outfeed_config")) if a("outfeed_config") is not None else ""
        name = self.emit(comp, "outfeed", "token[]", [d, ops[-1]],
                         [f"outfeed_shape={d[1]}", f"outfeed_config={_hlo_str(cfg)}"])
        env[op.results[0]] = (name, "token[]")

    def _channel_attrs(self, a):
        attrs = [f"channel_id={_struct(a('channel_handle'))['handle'][0]}"]
        if str(a("is_host_transfer")) == "true":
            attrs.append("is_host_transfer=true")
        return attrs

    def _send(self, op, comp, env, ops, rshapes, a):
        if len(ops) != 2:
            _fail("send of several values cannot be exported", hint="send one array at a time")
        shape = _tuple_shape([ops[0][1], "u32[]", "token[]"])
        snd = self.emit(comp, "send", shape, ops, self._channel_attrs(a))
        name = self.emit(comp, "send-done", "token[]", [(snd, None)], self._channel_attrs(a))
        env[op.results[0]] = (name, "token[]")

    def _recv(self, op, comp, env, ops, rshapes, a):
        if len(rshapes) != 2:
            _fail("recv of several values cannot be exported", hint="receive one array at a time")
        rcv = self.emit(comp, "recv", _tuple_shape([rshapes[0], "u32[]", "token[]"]), ops,
                        self._channel_attrs(a))
        done = self.emit(comp, "recv-done", _tuple_shape([rshapes[0], "token[]"]), [(rcv, None)],
                         self._channel_attrs(a))
        for i, r in enumerate(op.results):
            env[r] = (self.emit(comp, "get-tuple-element", rshapes[i], [(done, None)],
                                [f"index={i}"]), rshapes[i])

    def _conv_attrs(self, a, op):
        labels = re.search(r"\[([^\]]*)\]x\[([^\]]*)\]->\[([^\]]*)\]", str(a("dimension_numbers")))
        if not labels:
            _fail(f"cannot export convolution dimension numbers {a('dimension_numbers')}")
        lhs, rhs, out = ("".join(x.split(", ")) for x in labels.groups())
        nsp = len(lhs) - 2
        parts = []
        rtype = str(op.operands[1].type)
        rdims = [int(d) for d in _TENSOR.fullmatch(rtype).group(1).split("x") if d]
        size = [rdims[rhs.index(str(i))] for i in range(nsp)]
        if nsp:
            parts.append("size=" + "x".join(map(str, size)))
            if a("window_strides") is not None and any(x != 1 for x in _array(a("window_strides"))):
                parts.append("stride=" + "x".join(map(str, _array(a("window_strides")))))
            if a("padding") is not None:
                p = _dense_ints(a("padding"))
                if any(v for r in p for v in r):
                    parts.append("pad=" + "x".join(f"{lo}_{hi}" for lo, hi in p))
            for key, hk in (("lhs_dilation", "lhs_dilate"), ("rhs_dilation", "rhs_dilate")):
                if a(key) is not None and any(x != 1 for x in _array(a(key))):
                    parts.append(f"{hk}=" + "x".join(map(str, _array(a(key)))))
            if a("window_reversal") is not None:
                rev = ["1" if v == "true" else "0" for v in re.findall(r"true|false", str(a("window_reversal")))]
                if "1" in rev:
                    parts.append("rhs_reversal=" + "x".join(rev))
        attrs = []
        if parts:
            attrs.append("window={" + " ".join(parts) + "}")
        attrs.append(f"dim_labels={lhs}_{rhs}->{out}")
        fg = _ints(str(a("feature_group_count")))[0]
        bg = _ints(str(a("batch_group_count")))[0]
        if fg != 1:
            attrs.append(f"feature_group_count={fg}")
        if bg != 1:
            attrs.append(f"batch_group_count={bg}")
        if a("precision_config") is not None:
            attrs.append(_precision(a("precision_config")))
        return attrs

    def _region_op(self, short, op, a):
        attrs = []
        if short == "reduce":
            attrs.append(f"dimensions={{{_csv(_array(a('dimensions')))}}}")
            attrs.append(f"to_apply=%{self.region_comp(op.regions[0], 'region')}")
            return "reduce", attrs
        if short == "reduce_window":
            nd = len(_array(a("window_dimensions")))
            w = _window(a, nd, base_key="base_dilations", win_key="window_dilations")
            return "reduce-window", [w, f"to_apply=%{self.region_comp(op.regions[0], 'region')}"]
        if short == "select_and_scatter":
            nd = len(_array(a("window_dimensions")))
            w = _window(a, nd)
            sel = self.region_comp(op.regions[0], "select")
            sca = self.region_comp(op.regions[1], "scatter")
            return "select-and-scatter", [w, f"select=%{sel}", f"scatter=%{sca}"]
        if short == "scatter":
            d = _struct(a("scatter_dimension_numbers"))
            for k in ("update_window_dims", "inserted_window_dims", "input_batching_dims",
                      "scatter_indices_batching_dims", "scatter_dims_to_operand_dims"):
                if d.get(k):
                    attrs.append(f"{k}={{{_csv(d[k])}}}")
            attrs.append(f"index_vector_dim={d.get('index_vector_dim', [0])[0]}")
            if str(a("indices_are_sorted")) == "true":
                attrs.append("indices_are_sorted=true")
            if str(a("unique_indices")) == "true":
                attrs.append("unique_indices=true")
            attrs.append(f"to_apply=%{self.region_comp(op.regions[0], 'region')}")
            return "scatter", attrs
        if short == "sort":
            attrs.append(f"dimensions={{{_ints(str(a('dimension')))[0]}}}")
            if str(a("is_stable")) == "true":
                attrs.append("is_stable=true")
            attrs.append(f"to_apply=%{self.region_comp(op.regions[0], 'compare')}")
            return "sort", attrs
        if short == "map":
            attrs.append(f"dimensions={{{_csv(_array(a('dimensions')))}}}")
            attrs.append(f"to_apply=%{self.region_comp(op.regions[0], 'region')}")
            return "map", attrs
        opcode, attrs = self._collective(short, a)
        attrs.append(f"to_apply=%{self.region_comp(op.regions[0], 'region')}")
        return opcode, attrs

    def _collective(self, short, a):
        attrs = []
        if short == "reduce_scatter":
            attrs.append(f"dimensions={{{_ints(str(a('scatter_dimension')))[0]}}}")
        if short == "all_gather":
            attrs.append(f"dimensions={{{_ints(str(a('all_gather_dim')))[0]}}}")
        if short == "all_to_all":
            attrs.append(f"dimensions={{{_ints(str(a('split_dimension')))[0]}}}")
        if a("replica_groups") is not None:
            attrs.append(_replica_groups_text(a("replica_groups")))
        if a("source_target_pairs") is not None:
            pairs = _dense_ints(a("source_target_pairs"))
            attrs.append("source_target_pairs={" + ",".join("{" + _csv(p) + "}" for p in pairs) + "}")
        if a("channel_handle") is not None:
            attrs.append(f"channel_id={_struct(a('channel_handle'))['handle'][0]}")
        if a("use_global_device_ids") is not None:
            attrs.append("use_global_device_ids=true")
        return short.replace("_", "-"), attrs

    def _ragged_all_to_all(self, a):
        """JAX's custom call for ragged all-to-all (what the importer writes) as HLO's op."""
        from torch_mlir import ir
        cfg = a("backend_config")
        if cfg is None or not isinstance(cfg, ir.DictAttr) or "replica_groups" not in cfg:
            _fail("ragged_all_to_all custom call without a {replica_groups = ...} dictionary "
                  "backend_config", hint="write it as lax.ragged_all_to_all does")
        attrs = [_replica_groups_text(cfg["replica_groups"])]
        if "channel_id" in cfg:
            attrs.append(f"channel_id={ir.IntegerAttr(cfg['channel_id']).value}")
        return attrs

    def _while(self, op, comp, env, ops, rshapes):
        t = self.emit(comp, "tuple", _tuple_shape([s for _, s in ops]), ops)
        cond = self.region_comp(op.regions[0], "region_cond", tuple_param=True)
        body = self.region_comp(op.regions[1], "region_body", tuple_param=True, tuple_root=True)
        shape = _tuple_shape(rshapes)
        name = self.emit(comp, "while", shape, [(t, None)], [f"condition=%{cond}", f"body=%{body}"])
        for i, r in enumerate(op.results):
            g = self.emit(comp, "get-tuple-element", rshapes[i], [(name, None)], [f"index={i}"])
            env[r] = (g, rshapes[i])

    def _branches(self, short, op, comp, env, ops, rshapes):
        names = []
        operands = [ops[0]]
        for i, region in enumerate(op.regions):
            caps = _captures(region)
            cops = [self._get(env, v) for v in caps]
            t = self.emit(comp, "tuple", _tuple_shape([s for _, s in cops]), cops)
            operands.append((t, None))
            names.append(self.region_comp(region, f"branch_{i}", captures=caps,
                                          tuple_root=len(rshapes) > 1)
                         if caps else self._empty_param_comp(region, f"branch_{i}",
                                                             len(rshapes) > 1))
        shape = rshapes[0] if len(rshapes) == 1 else _tuple_shape(rshapes)
        if short == "if":
            attrs = [f"true_computation=%{names[0]}", f"false_computation=%{names[1]}"]
        else:
            attrs = ["branch_computations={" + ", ".join(f"%{n}" for n in names) + "}"]
        name = self.emit(comp, "conditional", shape, operands, attrs)
        self.bind_results(op, comp, env, name, rshapes)

    def _empty_param_comp(self, region, base, tuple_root):
        comp = _Comp(self.unique(base))
        pname = self.unique("param")
        comp.lines.append(f"  %{pname} = () parameter(0)")
        comp.params.append((pname, "()"))
        rets = self.export_block(region.blocks[0], comp, {})
        self.finish(comp, rets, force_tuple=tuple_root)
        self.comps.append(self.comp_text(comp))
        return comp.name


def _single_use(v) -> bool:
    return len(list(v.uses)) == 1


def _shape_builders(block) -> set:
    """Results of concatenate(reshape(scalar)...) chains that only feed dynamic_reshape
    shape operands; HLO passes those scalars directly, so the chain is not exported."""
    skip = set()
    for op in block.operations:
        if op.operation.name != "stablehlo.dynamic_reshape":
            continue
        shape = op.operands[1]
        cat = shape.owner
        if getattr(cat, "name", "") != "stablehlo.concatenate" or not _single_use(shape):
            continue
        parts = list(cat.operands)
        if all(getattr(v.owner, "name", "") == "stablehlo.reshape" and _single_use(v)
               and str(v.owner.operands[0].type).startswith("tensor<i") for v in parts):
            skip.add(shape)
            skip.update(parts)
    return skip


def _captures(region) -> list:
    """Values used in `region` (recursively) but defined outside it, in first-use order."""
    defined, used = set(), []

    def walk(reg):
        for block in reg.blocks:
            for arg in block.arguments:
                defined.add(arg)
            for op in block.operations:
                for v in op.operands:
                    if v not in defined and v not in used:
                        used.append(v)
                for r in op.results:
                    defined.add(r)
                for sub in op.regions:
                    walk(sub)

    walk(region)
    return [v for v in used if v not in defined]


def _csv(vals) -> str:
    return ",".join(str(v) for v in vals)


def _precision(attr) -> str:
    names = re.findall(r"precision (\w+)", str(attr))
    return "operand_precision={" + ",".join(n.lower() for n in names) + "}"


def _window(a, nd, base_key=None, win_key=None) -> str:
    def arr(key, default):
        return _array(a(key)) if key and a(key) is not None else [default] * nd
    size = arr("window_dimensions", 1)
    parts = ["size=" + "x".join(map(str, size))]
    stride = arr("window_strides", 1)
    if any(s != 1 for s in stride):
        parts.append("stride=" + "x".join(map(str, stride)))
    if a("padding") is not None:
        p = _dense_ints(a("padding"))
        if any(v for r in p for v in r):
            parts.append("pad=" + "x".join(f"{lo}_{hi}" for lo, hi in p))
    for key, hk in ((base_key, "lhs_dilate"), (win_key, "rhs_dilate")):
        v = arr(key, 1)
        if any(x != 1 for x in v):
            parts.append(f"{hk}=" + "x".join(map(str, v)))
    return "window={" + " ".join(parts) + "}"


def _with_layout(hlo: str, layout: str) -> str:
    return (hlo[:hlo.index("{")] if "{" in hlo else hlo) + layout


def _aliasing(func, n) -> dict[int, int]:
    out = {}
    if "arg_attrs" not in func.attributes:
        return out
    dicts = re.findall(r"\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}", str(func.attributes["arg_attrs"])[1:-1])
    for i, d in enumerate(dicts[:n]):
        m = re.search(r"tf\.aliasing_output = (\d+)", d)
        if m:
            out[i] = int(m.group(1))
    return out


def _arg_layouts(func, key, n) -> list[str | None]:
    out = [None] * n
    if key not in func.attributes:
        return out
    dicts = re.findall(r"\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}", str(func.attributes[key])[1:-1])
    for i, d in enumerate(dicts[:n]):
        m = re.search(r'kiln\.layout = "([^"]*)"', d)
        if m and m.group(1) != "{}":
            out[i] = m.group(1)
    return out


def stablehlo_to_hlo(module_text: str) -> str:
    from torch_mlir import ir
    from torch_mlir._mlir_libs import _stablehlo
    from ...dialects import load_all

    ctx = ir.Context()
    _stablehlo.register_dialect(ctx)
    load_all(ctx)  # Kiln's check and kiln dialects; no unregistered ones
    with ctx, ir.Location.unknown():
        try:
            module = ir.Module.parse(module_text)
        except Exception as e:
            msg = " | ".join(ln.strip() for ln in str(e).splitlines()[:3])
            raise KilnError(f"input is not valid MLIR: {msg}", location="stablehlo-to-hlo") from None
        try:
            return Exporter(module).run()
        except KilnError:
            raise
        except Exception as e:  # an exporter bug: still one KilnError for the caller
            raise KilnError(f"internal error: {type(e).__name__}: {e}",
                            location="stablehlo-to-hlo", hint="please report this input") from None
