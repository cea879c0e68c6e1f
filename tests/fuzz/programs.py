"""Random, well-typed StableHLO programs with adversarial run-time values.

`make_program(seed, index)` builds one program (MLIR text in the generic op form, so every op
prints the same way) and `make_inputs` the values it is called with. Everything is drawn from
`random.Random(f"{seed}:{index}")`, so a program is reproduced from its seed and index alone.

Programs are valid by construction: every op's operand types satisfy its verifier. What is
adversarial is the data: indices, sizes and strides are *computed from arguments* (so no
compile-time check can see them) and arguments take values such as INT_MIN, INT_MAX, -1, a
size past the end, a stride of 0, NaN, ±inf, denormals and -0.

A program also records `flags`: reasons its result may legitimately differ from the StableHLO
reference interpreter (implementation-defined behaviour such as integer division by zero,
float-to-int conversion of NaN, the order of a float sum). The oracle compares exactly only
where no flag is set.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

FLOATS = ["f32", "f32", "f32", "f64", "f16", "bf16"]
INTS = ["i32", "i32", "i64", "i8", "ui8", "ui32"]
INDEX_TYPES = ["i32", "i64", "ui32", "i8"]
BITS = {"i1": 1, "i8": 8, "ui8": 8, "i16": 16, "i32": 32, "ui32": 32, "i64": 64, "ui64": 64,
        "f16": 16, "bf16": 16, "f32": 32, "f64": 64}


def is_float(dtype: str) -> bool:
    return dtype.startswith("f") or dtype == "bf16"


def is_int(dtype: str) -> bool:
    return dtype[0] in "iu" and dtype != "i1"


def numpy_dtype(dtype: str):
    if dtype == "bf16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype({"i1": "bool", "i8": "int8", "ui8": "uint8", "i16": "int16", "i32": "int32",
                     "ui32": "uint32", "i64": "int64", "ui64": "uint64", "f16": "float16",
                     "f32": "float32", "f64": "float64"}[dtype])


def tensor(shape, dtype: str) -> str:
    dims = "".join(("?" if d is None else str(d)) + "x" for d in shape)
    return f"tensor<{dims}{dtype}>"


def i64_array(values) -> str:
    return "array<i64" + (": " + ", ".join(str(int(v)) for v in values) if len(values) else "") + ">"


@dataclass
class Value:
    name: str
    shape: tuple
    dtype: str

    @property
    def type(self) -> str:
        return tensor(self.shape, self.dtype)


@dataclass
class Arg:
    value: Value
    role: str                 # "data", "index" (a run-time index/size/stride) or "dynamic"
    runtime_shape: tuple = () # for "dynamic": the shape it is called with
    hint: int = 4             # for "index": a size the index is used against


@dataclass
class Program:
    text: str
    args: list[Arg]
    results: list[Value]
    ops: list[str]
    flags: set = field(default_factory=set)
    constraints: list = field(default_factory=list)  # (kind, result positions, operand shape)

    @property
    def has_dynamic_args(self) -> bool:
        return any(a.role == "dynamic" for a in self.args)


class Builder:
    """Emits SSA lines, keeps the pool of values ops may take as operands."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.lines: list[str] = []
        self.args: list[Arg] = []
        self.pool: list[Value] = []
        self.indices: list[Value] = []  # scalar integers computed from "index" arguments
        self.used: set[str] = set()
        self.ops: list[str] = []
        self.flags: set[str] = set()
        self.counter = 0
        self.risky: list[Value] = []   # results of ops whose run-time values are adversarial
        # Run-time constraints of the spec, checked by the oracle on the values Kiln computed:
        # (kind, [vectors returned as extra results], operand shape).
        self.constraints: list[tuple[str, list[Value], tuple]] = []

    def fresh(self) -> str:
        self.counter += 1
        return f"%v{self.counter}"

    def arg(self, shape, dtype, role="data", runtime_shape=(), hint=4) -> Value:
        value = Value(f"%arg{len(self.args)}", tuple(shape), dtype)
        self.args.append(Arg(value, role, tuple(runtime_shape), hint))
        if role == "data":
            self.pool.append(value)
        return value

    def op(self, name: str, operands, result_types, attrs: str = "", regions: str = "",
           results_shapes=None) -> list[Value]:
        """One op in generic form; returns its results (shape/dtype from results_shapes)."""
        for o in operands:
            self.used.add(o.name)
        names = [self.fresh() for _ in results_shapes]
        lhs = ", ".join(names)
        operand_list = ", ".join(o.name for o in operands)
        types_in = ", ".join(o.type for o in operands)
        types_out = ", ".join(tensor(s, d) for s, d in results_shapes)
        if len(results_shapes) != 1:
            types_out = f"({types_out})"
        region_text = f" ({regions})" if regions else ""
        attr_text = f" {{{attrs}}}" if attrs else ""
        prefix = f"{lhs} = " if names else ""
        self.lines.append(f'    {prefix}"stablehlo.{name}"({operand_list}){region_text}{attr_text} '
                          f': ({types_in}) -> {types_out}')
        self.ops.append(name)
        return [Value(n, tuple(s), d) for n, (s, d) in zip(names, results_shapes)]

    def op1(self, name, operands, shape, dtype, attrs="", regions="") -> Value:
        return self.op(name, operands, None, attrs, regions, [(tuple(shape), dtype)])[0]

    def constant(self, value, shape, dtype) -> Value:
        literal = _literal(value, dtype)
        name = self.fresh()
        t = tensor(shape, dtype)
        self.lines.append(f'    {name} = "stablehlo.constant"() {{value = dense<{literal}> : {t}}} : () -> {t}')
        return Value(name, tuple(shape), dtype)

    # -- operands ---------------------------------------------------------------------------
    def pick(self, want=lambda v: True) -> Value | None:
        choices = [v for v in self.pool if want(v)]
        if not choices:
            return None
        # Prefer recent values: chains, not a flat list of independent ops.
        return choices[-1] if self.rng.random() < 0.4 else self.rng.choice(choices)

    def data(self, shape=None, dtype=None) -> Value:
        """A value of this shape/dtype: from the pool, else a new argument or constant."""
        v = self.pick(lambda v: (shape is None or v.shape == tuple(shape))
                      and (dtype is None or v.dtype == dtype))
        if v is not None and self.rng.random() < 0.75:
            return v
        shape = tuple(shape) if shape is not None else random_shape(self.rng)
        dtype = dtype or self.rng.choice(FLOATS + INTS + ["i1"])
        if self.rng.random() < 0.2:
            return self.constant(random_scalar(self.rng, dtype), shape, dtype)
        return self.arg(shape, dtype)

    def index(self, dtype: str, hint: int) -> Value:
        """A scalar integer computed at run time from an argument (adversarial values)."""
        if dtype.startswith("u"):
            # The interpreter reads unsigned start indices >= 2^31 as negative (and clamps them
            # to 0): only crashes are judged there.
            self.flags.add("unsigned index")
        reuse = [v for v in self.indices if v.dtype == dtype]
        if reuse and self.rng.random() < 0.3:
            return self.rng.choice(reuse)
        source_type = dtype if self.rng.random() < 0.7 else self.rng.choice(INDEX_TYPES)
        v = self.arg((), source_type, role="index", hint=hint)
        if source_type != dtype:
            v = self.op1("convert", [v], (), dtype)
        how = self.rng.random()
        if how < 0.15:  # arithmetic on the index, where overflow can hide
            c = self.constant(self.rng.choice([1, 2, hint, 7] + ([] if dtype[0] == "u" else [-1])),
                              (), dtype)
            v = self.op1(self.rng.choice(["add", "subtract", "multiply"]), [v, c], (), dtype)
        elif how < 0.2 and not dtype.startswith("u"):
            v = self.op1("negate", [v], (), dtype)
        self.indices.append(v)
        return v

    def vector(self, scalars: list[Value]) -> Value:
        """A 1-D tensor from scalars of one type (reshape + concatenate)."""
        dtype = scalars[0].dtype
        parts = [self.op1("reshape", [s], (1,), dtype) for s in scalars]
        if len(parts) == 1:
            return parts[0]
        return self.op1("concatenate", parts, (len(parts),), dtype, attrs="dimension = 0 : i64")

    def text(self, results: list[Value]) -> str:
        sig = ", ".join(f"{a.value.name}: {a.value.type}" for a in self.args)
        outs = ", ".join(v.type for v in results)
        body = "\n".join(self.lines)
        ret = ", ".join(v.name for v in results)
        return (f"func.func @main({sig}) -> ({outs}) {{\n{body}\n"
                f"    \"func.return\"({ret}) : ({outs}) -> ()\n}}\n")


def random_shape(rng: random.Random, rank: int | None = None) -> tuple:
    rank = rng.choice([0, 1, 1, 2, 2, 2, 3]) if rank is None else rank
    return tuple(rng.choice([0, 1, 2, 3, 3, 4, 5]) if rng.random() < 0.1 else rng.randint(1, 5)
                 for _ in range(rank))


def random_scalar(rng: random.Random, dtype: str):
    if dtype == "i1":
        return rng.choice([True, False])
    if is_float(dtype):
        return rng.choice([0.0, 1.0, -1.0, 0.5, 2.0, 3.25, -7.0])
    lo, hi = int_range(dtype)
    return rng.choice([0, 1, 2, 3, 7, lo, hi]) if rng.random() < 0.3 else \
        min(max(rng.randint(-5, 9), lo), hi)


def int_range(dtype: str) -> tuple[int, int]:
    bits = BITS[dtype]
    if dtype.startswith("u"):
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _literal(value, dtype: str) -> str:
    if dtype == "i1":
        return "true" if value else "false"
    if is_float(dtype):
        if value != value:
            return "0x7FC00000" if dtype == "f32" else "0x7FF8000000000000" if dtype == "f64" \
                else "0x7E00" if dtype == "f16" else "0x7FC0"
        if value in (float("inf"), float("-inf")):
            bits = {"f32": ("0x7F800000", "0xFF800000"), "f64": ("0x7FF0000000000000", "0xFFF0000000000000"),
                    "f16": ("0x7C00", "0xFC00"), "bf16": ("0x7F80", "0xFF80")}[dtype]
            return bits[0] if value > 0 else bits[1]
        return repr(float(value))
    return str(int(value))


# -- op generators: each adds one op (or a few) to the builder ---------------------------------
FLOAT_UNARY = ["abs", "negate", "floor", "ceil", "sign", "round_nearest_even", "round_nearest_afz"]
FLOAT_UNARY_APPROX = ["exponential", "log", "sqrt", "rsqrt", "tanh", "sine", "cosine", "logistic",
                      "exponential_minus_one", "log_plus_one", "cbrt", "tan"]
INT_UNARY = ["abs", "negate", "not", "popcnt", "count_leading_zeros", "sign"]
FLOAT_BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "remainder"]
FLOAT_BINARY_APPROX = ["power", "atan2"]
INT_BINARY = ["add", "subtract", "multiply", "maximum", "minimum", "and", "or", "xor",
              "shift_left", "shift_right_arithmetic", "shift_right_logical"]
INT_BINARY_IMPL = ["divide", "remainder", "power"]  # by 0, INT_MIN / -1, negative exponents
BOOL_BINARY = ["and", "or", "xor"]


def gen_unary(b: Builder):
    x = b.data()
    if is_float(x.dtype):
        name = b.rng.choice(FLOAT_UNARY + FLOAT_UNARY_APPROX + ["is_finite"])
        if name in FLOAT_UNARY_APPROX:
            b.flags.add("approximate")
        if name == "is_finite":
            b.pool.append(b.op1(name, [x], x.shape, "i1"))
            return
    elif x.dtype == "i1":
        name = "not"
    else:
        name = b.rng.choice(INT_UNARY)
        if x.dtype.startswith("u") and name in ("negate", "abs", "sign"):
            name = "not"
    b.pool.append(b.op1(name, [x], x.shape, x.dtype))


def gen_binary(b: Builder):
    x = b.data()
    y = b.data(x.shape, x.dtype)
    if is_float(x.dtype):
        name = b.rng.choice(FLOAT_BINARY + FLOAT_BINARY_APPROX)
        if name in FLOAT_BINARY_APPROX:
            b.flags.add("approximate")
    elif x.dtype == "i1":
        name = b.rng.choice(BOOL_BINARY)
    else:
        name = b.rng.choice(INT_BINARY + INT_BINARY_IMPL)
        if name in INT_BINARY_IMPL:
            b.flags.add(f"integer {name}")
    b.pool.append(b.op1(name, [x, y], x.shape, x.dtype))


def gen_compare_select(b: Builder):
    x = b.data()
    y = b.data(x.shape, x.dtype)
    direction = b.rng.choice(["EQ", "NE", "LT", "LE", "GT", "GE"])
    kind = "FLOAT" if is_float(x.dtype) else "UNSIGNED" if x.dtype.startswith("u") or x.dtype == "i1" \
        else "SIGNED"
    if kind == "FLOAT" and b.rng.random() < 0.3:
        kind = "TOTALORDER"
        b.flags.add("totalorder")  # NaN payload signs: the oracle's and Kiln's may differ
    pred = b.op1("compare", [x, y], x.shape, "i1",
                 attrs=f"comparison_direction = #stablehlo<comparison_direction {direction}>, "
                       f"compare_type = #stablehlo<comparison_type {kind}>")
    if b.rng.random() < 0.3:
        b.pool.append(pred)
        return
    z = b.data(x.shape, x.dtype)
    if b.rng.random() < 0.2 and x.shape:  # a scalar predicate broadcasts
        pred = b.op1("reshape", [b.op1("slice", [b.op1("reshape", [pred], (_prod(x.shape),), "i1")],
                                         (1,), "i1", attrs="start_indices = array<i64: 0>, "
                                         "limit_indices = array<i64: 1>, strides = array<i64: 1>")],
                     (), "i1") if _prod(x.shape) else b.constant(True, (), "i1")
    b.pool.append(b.op1("select", [pred, y, z], x.shape, x.dtype))


def gen_clamp(b: Builder):
    x = b.data()
    if x.dtype == "i1":
        return
    scalar = b.rng.random() < 0.5
    lo = b.data(() if scalar else x.shape, x.dtype)
    hi = b.data(() if scalar else x.shape, x.dtype)
    b.pool.append(b.op1("clamp", [lo, x, hi], x.shape, x.dtype))


def gen_convert(b: Builder):
    x = b.data()
    to = b.rng.choice(FLOATS + INTS + ["i1"])
    if is_float(x.dtype) and not is_float(to):
        b.flags.add("float to integer conversion")  # NaN, inf, out of range: implementation-defined
    if x.dtype in ("f64", "f32") and to in ("f16", "bf16", "f32") and x.dtype != to:
        b.flags.add("approximate")  # double rounding through intermediate widths
    b.pool.append(b.op1("convert", [x], x.shape, to))


def gen_bitcast(b: Builder):
    pairs = {"f32": "i32", "i32": "f32", "f64": "i64", "i64": "f64", "i8": "ui8", "ui8": "i8",
             "ui32": "i32"}
    x = b.data(dtype=b.rng.choice(list(pairs)))
    if is_float(x.dtype):
        b.flags.add("NaN payload")
    b.pool.append(b.op1("bitcast_convert", [x], x.shape, pairs[x.dtype]))


def gen_broadcast(b: Builder):
    x = b.data()
    if len(x.shape) >= 4:
        return
    extra = b.rng.randint(0, 2)
    rank = len(x.shape) + extra
    dims = sorted(b.rng.sample(range(rank), len(x.shape)))
    out = [b.rng.randint(1, 3) for _ in range(rank)]
    for d, size in zip(dims, x.shape):
        out[d] = size if size != 1 or b.rng.random() < 0.5 else b.rng.randint(1, 4)
    b.pool.append(b.op1("broadcast_in_dim", [x], out, x.dtype,
                        attrs=f"broadcast_dimensions = {i64_array(dims)}"))


def gen_reshape(b: Builder):
    x = b.data()
    n = _prod(x.shape)
    shape = _factor(b.rng, n)
    b.pool.append(b.op1("reshape", [x], shape, x.dtype))


def gen_transpose(b: Builder):
    x = b.pick(lambda v: len(v.shape) >= 2) or b.data(random_shape(b.rng, b.rng.randint(2, 3)))
    perm = list(range(len(x.shape)))
    b.rng.shuffle(perm)
    b.pool.append(b.op1("transpose", [x], [x.shape[p] for p in perm], x.dtype,
                        attrs=f"permutation = {i64_array(perm)}"))


def gen_reverse(b: Builder):
    x = b.pick(lambda v: len(v.shape) >= 1) or b.data(random_shape(b.rng, 2))
    dims = sorted(b.rng.sample(range(len(x.shape)), b.rng.randint(1, len(x.shape))))
    b.pool.append(b.op1("reverse", [x], x.shape, x.dtype, attrs=f"dimensions = {i64_array(dims)}"))


def gen_slice(b: Builder):
    x = b.pick(lambda v: len(v.shape) >= 1) or b.data(random_shape(b.rng, 2))
    starts, limits, strides, out = [], [], [], []
    for d in x.shape:
        s = b.rng.randint(0, d)
        l = b.rng.randint(s, d)
        st = b.rng.randint(1, 3)
        starts.append(s), limits.append(l), strides.append(st)
        out.append(-(-(l - s) // st))
    b.pool.append(b.op1("slice", [x], out, x.dtype,
                        attrs=f"start_indices = {i64_array(starts)}, limit_indices = "
                              f"{i64_array(limits)}, strides = {i64_array(strides)}"))


def gen_concatenate(b: Builder):
    x = b.pick(lambda v: len(v.shape) >= 1) or b.data(random_shape(b.rng, 2))
    dim = b.rng.randrange(len(x.shape))
    parts, total = [x], x.shape[dim]
    for _ in range(b.rng.randint(1, 2)):
        shape = list(x.shape)
        shape[dim] = b.rng.randint(0, 3)
        parts.append(b.data(shape, x.dtype))
        total += shape[dim]
    out = list(x.shape)
    out[dim] = total
    b.pool.append(b.op1("concatenate", parts, out, x.dtype, attrs=f"dimension = {dim} : i64"))


def gen_pad(b: Builder):
    x = b.pick(lambda v: len(v.shape) >= 1) or b.data(random_shape(b.rng, 2))
    pad_value = b.data((), x.dtype)
    lows, highs, interiors, out = [], [], [], []
    for d in x.shape:
        interior = b.rng.choice([0, 0, 1, 2])
        full = d + max(d - 1, 0) * interior
        low = b.rng.randint(-full, 2)
        high = b.rng.randint(-(full + low), 2)
        lows.append(low), highs.append(high), interiors.append(interior)
        out.append(full + low + high)
    b.pool.append(b.op1("pad", [x, pad_value], out, x.dtype,
                        attrs=f"edge_padding_low = {i64_array(lows)}, edge_padding_high = "
                              f"{i64_array(highs)}, interior_padding = {i64_array(interiors)}"))


def gen_iota(b: Builder):
    shape = random_shape(b.rng, b.rng.randint(1, 3))
    dtype = b.rng.choice(FLOATS + INTS)
    if dtype in ("i8", "ui8", "f16", "bf16") and max(shape) > 100:
        return
    b.pool.append(b.op1("iota", [], shape, dtype,
                        attrs=f"iota_dimension = {b.rng.randrange(len(shape))} : i64"))


def gen_dynamic_slice(b: Builder):
    x = b.pick(lambda v: len(v.shape) >= 1) or b.data(random_shape(b.rng, 2))
    itype = b.rng.choice(INDEX_TYPES)
    idx = [b.index(itype, d) for d in x.shape]
    sizes = [b.rng.randint(0, d) for d in x.shape]
    v = b.op1("dynamic_slice", [x] + idx, sizes, x.dtype, attrs=f"slice_sizes = {i64_array(sizes)}")
    b.pool.append(v)
    b.risky.append(v)


def gen_dynamic_update_slice(b: Builder):
    x = b.pick(lambda v: len(v.shape) >= 1) or b.data(random_shape(b.rng, 2))
    update = b.data([b.rng.randint(0, d) for d in x.shape], x.dtype)
    itype = b.rng.choice(INDEX_TYPES)
    idx = [b.index(itype, d) for d in x.shape]
    v = b.op1("dynamic_update_slice", [x, update] + idx, x.shape, x.dtype)
    b.pool.append(v)
    b.risky.append(v)


def _reduce_all(b: Builder, x: Value, dims_dynamic=True) -> Value:
    """Sum (or max) of every element: brings a dynamically shaped value back to a scalar."""
    dtype = x.dtype
    if dtype == "i1":
        body_op, init = "or", False
    elif b.rng.random() < 0.5:
        body_op, init = "maximum", (-np.inf if is_float(dtype) else int_range(dtype)[0])
    else:
        body_op, init = "add", 0
        if is_float(dtype):
            b.flags.add("float sum order")
    init_v = b.constant(init, (), dtype)
    region = _binary_region(body_op, dtype)
    return b.op1("reduce", [x, init_v], (), dtype, regions=region,
                 attrs=f"dimensions = {i64_array(range(len(x.shape)))}")


def _binary_region(op: str, dtype: str, index: int = 0) -> str:
    t = tensor((), dtype)
    a, c = f"%lhs{index}", f"%rhs{index}"
    if op == "rhs":
        return f"{{\n    ^bb0({a}: {t}, {c}: {t}):\n      \"stablehlo.return\"({c}) : ({t}) -> ()\n    }}"
    return (f"{{\n    ^bb0({a}: {t}, {c}: {t}):\n      %r{index} = \"stablehlo.{op}\"({a}, {c}) : ({t}, {t}) -> {t}\n"
            f"      \"stablehlo.return\"(%r{index}) : ({t}) -> ()\n    }}")


def gen_real_dynamic_slice(b: Builder):
    x = b.pick(lambda v: 1 <= len(v.shape) <= 2) or b.data(random_shape(b.rng, b.rng.randint(1, 2)))
    itype = b.rng.choice(["i32", "i64"])
    starts, limits, strides = [], [], []
    for d in x.shape:
        # Each of start/limit/stride is a constant or computed at run time.
        starts.append(b.index(itype, d) if b.rng.random() < 0.6 else b.constant(b.rng.randint(0, d), (), itype))
        limits.append(b.index(itype, d) if b.rng.random() < 0.6 else b.constant(d, (), itype))
        strides.append(b.index(itype, 1) if b.rng.random() < 0.4 else b.constant(b.rng.randint(1, 2), (), itype))
    operands = [x, b.vector(starts), b.vector(limits), b.vector(strides)]
    b.constraints.append(("real_dynamic_slice", operands[1:], x.shape))
    sliced = b.op1("real_dynamic_slice", operands, [None] * len(x.shape), x.dtype)
    b.flags.add("run-time constraint")
    v = _reduce_all(b, sliced)
    b.pool.append(v)
    b.risky.append(v)


def gen_dynamic_shape_op(b: Builder):
    """dynamic_iota / dynamic_broadcast_in_dim / dynamic_pad / dynamic_reshape with sizes from
    arguments: a result whose size the caller chooses (huge, negative, overflowing)."""
    # Kiln lowers dynamic_pad and dynamic_reshape only where shapes refine to constants: a
    # located "cannot lower" error, so they are drawn less often.
    kind = b.rng.choices(["iota", "broadcast", "pad", "reshape"], [4, 4, 1, 1])[0]
    itype = "i64" if b.rng.random() < 0.7 else "i32"
    if kind == "iota":
        rank = b.rng.randint(1, 2)
        dims = b.vector([b.index(itype, 4) for _ in range(rank)])
        dtype = b.rng.choice(FLOATS + INTS)
        b.constraints.append(("sizes", [dims], ()))
        r = b.op1("dynamic_iota", [dims], [None] * rank, dtype,
                  attrs=f"iota_dimension = {b.rng.randrange(rank)} : i64")
    elif kind == "broadcast":
        x = b.data(random_shape(b.rng, b.rng.randint(0, 1)))
        rank = len(x.shape) + 1
        dims = b.vector([b.index(itype, 4) for _ in range(rank)])
        b.constraints.append(("broadcast", [dims], x.shape))
        r = b.op1("dynamic_broadcast_in_dim", [x, dims], [None] * rank, x.dtype,
                  attrs=f"broadcast_dimensions = {i64_array(range(1, rank))}")
    elif kind == "pad":
        x = b.pick(lambda v: 1 <= len(v.shape) <= 2) or b.data(random_shape(b.rng, 1))
        pad_value = b.data((), x.dtype)
        lows = b.vector([b.index(itype, 2) for _ in x.shape])
        highs = b.vector([b.index(itype, 2) for _ in x.shape])
        interiors = b.vector([b.index(itype, 1) if b.rng.random() < 0.5 else b.constant(0, (), itype)
                              for _ in x.shape])
        b.constraints.append(("dynamic_pad", [lows, highs, interiors], x.shape))
        r = b.op1("dynamic_pad", [x, pad_value, lows, highs, interiors], [None] * len(x.shape), x.dtype)
    else:
        x = b.data()
        rank = b.rng.randint(1, 2)
        dims = b.vector([b.index(itype, _prod(x.shape)) for _ in range(rank)])
        r = b.op1("dynamic_reshape", [x, dims], [None] * rank, x.dtype)
    b.flags.add("run-time constraint")
    v = _reduce_all(b, r)
    b.pool.append(v)
    b.risky.append(v)


def gen_gather(b: Builder):
    x = b.pick(lambda v: 1 <= len(v.shape) <= 3) or b.data(random_shape(b.rng, 2))
    rank = len(x.shape)
    mapped = sorted(b.rng.sample(range(rank), b.rng.randint(1, rank)))
    b.rng.shuffle(mapped)
    n = b.rng.randint(1, 3)
    itype = b.rng.choice(["i32", "i64", "ui32"])
    rows = [b.vector([b.index(itype, x.shape[d]) if b.rng.random() < 0.7 else
                      b.constant(b.rng.randint(0, 2), (), itype) for d in mapped]) for _ in range(n)]
    indices = rows[0] if n == 1 else b.op1("concatenate", rows, (n * len(mapped),), itype,
                                          attrs="dimension = 0 : i64")
    indices = b.op1("reshape", [indices], (n, len(mapped)), itype)
    sizes = [b.rng.randint(0, d) for d in x.shape]
    collapsed = sorted(d for d in range(rank) if sizes[d] == 1 and b.rng.random() < 0.6)
    offset = list(range(1, 1 + rank - len(collapsed)))
    out = [n] + [sizes[d] for d in range(rank) if d not in collapsed]
    v = b.op1("gather", [x, indices], out, x.dtype,
              attrs=f"dimension_numbers = #stablehlo.gather<offset_dims = [{_ints(offset)}], "
                    f"collapsed_slice_dims = [{_ints(collapsed)}], start_index_map = [{_ints(mapped)}], "
                    f"index_vector_dim = 1>, slice_sizes = {i64_array(sizes)}, indices_are_sorted = false")
    b.pool.append(v)
    b.risky.append(v)


def gen_scatter(b: Builder):
    x = b.pick(lambda v: 1 <= len(v.shape) <= 3) or b.data(random_shape(b.rng, 2))
    rank = len(x.shape)
    mapped = sorted(b.rng.sample(range(rank), b.rng.randint(1, rank)))
    n = b.rng.randint(1, 3)
    itype = b.rng.choice(["i32", "i64"])
    rows = [b.vector([b.index(itype, x.shape[d]) for d in mapped]) for _ in range(n)]
    indices = rows[0] if n == 1 else b.op1("concatenate", rows, (n * len(mapped),), itype,
                                          attrs="dimension = 0 : i64")
    indices = b.op1("reshape", [indices], (n, len(mapped)), itype)
    window = [b.rng.randint(0, d) for d in x.shape]
    inserted = sorted(d for d in mapped if window[d] == 1 and b.rng.random() < 0.6)
    update_shape = [n] + [window[d] for d in range(rank) if d not in inserted]
    updates = b.data(update_shape, x.dtype)
    combine = b.rng.choice(["add", "maximum", "rhs"] if x.dtype != "i1" else ["or", "rhs"])
    if any(window[d] > 1 for d in range(rank)):
        # A window partly out of bounds: XLA (and Kiln) skip the whole update window, the
        # interpreter each element that falls outside.
        b.flags.add("scatter window out of bounds")
    if n > 1 and (combine == "rhs" or (combine == "add" and is_float(x.dtype))):
        b.flags.add("scatter order")  # duplicate indices: which update wins is unspecified
    v = b.op1("scatter", [x, indices, updates], x.shape, x.dtype,
              regions=_binary_region(combine, x.dtype),
              attrs=f"scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = "
                    f"[{_ints(range(1, len(update_shape)))}], inserted_window_dims = [{_ints(inserted)}], "
                    f"scatter_dims_to_operand_dims = [{_ints(mapped)}], index_vector_dim = 1>, "
                    f"indices_are_sorted = false, unique_indices = false")
    b.pool.append(v)
    b.risky.append(v)


def gen_dot_general(b: Builder):
    dtype = b.rng.choice(["f32", "f32", "f64", "i32", "f16"])
    lhs = b.pick(lambda v: 1 <= len(v.shape) <= 3 and v.dtype == dtype) or \
        b.data(random_shape(b.rng, b.rng.randint(1, 3)), dtype)
    rank = len(lhs.shape)
    batch = [0] if rank == 3 or (rank == 2 and b.rng.random() < 0.3) else []
    contract = [b.rng.choice([d for d in range(rank) if d not in batch])] if rank > len(batch) else []
    n = b.rng.randint(1, 4)
    rhs_shape = [lhs.shape[d] for d in batch] + [lhs.shape[d] for d in contract] + [n]
    rhs = b.data(rhs_shape, dtype)
    free = [lhs.shape[d] for d in range(rank) if d not in batch and d not in contract]
    out = [lhs.shape[d] for d in batch] + free + [n]
    nb = len(batch)
    attrs = (f"dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [{_ints(batch)}], "
             f"rhs_batching_dimensions = [{_ints(range(nb))}], lhs_contracting_dimensions = "
             f"[{_ints(contract)}], rhs_contracting_dimensions = [{_ints(range(nb, nb + len(contract)))}]>")
    if is_float(dtype):
        b.flags.add("float sum order")
    b.pool.append(b.op1("dot_general", [lhs, rhs], out, dtype, attrs=attrs))


def gen_reduce(b: Builder):
    x = b.pick(lambda v: len(v.shape) >= 1) or b.data(random_shape(b.rng, 2))
    dims = sorted(b.rng.sample(range(len(x.shape)), b.rng.randint(1, len(x.shape))))
    if x.dtype == "i1":
        op, init = b.rng.choice([("and", True), ("or", False)])
    else:
        lo, hi = (-np.inf, np.inf) if is_float(x.dtype) else int_range(x.dtype)
        op, init = b.rng.choice([("add", 0), ("maximum", lo), ("minimum", hi), ("multiply", 1)])
        if is_float(x.dtype) and op in ("add", "multiply"):
            b.flags.add("float sum order")
    init_v = b.constant(init, (), x.dtype)
    out = [d for i, d in enumerate(x.shape) if i not in dims]
    b.pool.append(b.op1("reduce", [x, init_v], out, x.dtype, regions=_binary_region(op, x.dtype),
                        attrs=f"dimensions = {i64_array(dims)}"))


def gen_reduce_window(b: Builder):
    """A windowed reduction with strides, dilations and padding (all static)."""
    x = b.pick(lambda v: 1 <= len(v.shape) <= 3 and v.dtype != "i1") or b.data(random_shape(b.rng, 2), "f32")
    window, strides, base, dil, pads, out = [], [], [], [], [], []
    for d in x.shape:
        bd = b.rng.choice([1, 1, 2])
        lo, hi = b.rng.randint(0, 2), b.rng.randint(0, 2)
        padded = (max(d, 1) - 1) * bd + 1 + lo + hi if d else lo + hi
        w = b.rng.randint(1, max(1, min(3, padded)))
        wd = b.rng.choice([1, 1, 2])
        while (w - 1) * wd + 1 > padded and wd > 1:
            wd -= 1
        if (w - 1) * wd + 1 > padded:
            w, wd, lo, hi = 1, 1, lo + 1, hi
            padded = (max(d, 1) - 1) * bd + 1 + lo + hi if d else lo + hi
        st = b.rng.randint(1, 2)
        window.append(w), strides.append(st), base.append(bd), dil.append(wd), pads.append((lo, hi))
        out.append((padded - ((w - 1) * wd + 1)) // st + 1)
    lo_, hi_ = (-np.inf, np.inf) if is_float(x.dtype) else int_range(x.dtype)
    op, init = b.rng.choice([("add", 0), ("maximum", lo_), ("minimum", hi_)])
    if is_float(x.dtype) and op == "add":
        b.flags.add("float sum order")
    init_v = b.constant(init, (), x.dtype)
    padding = "dense<[" + ", ".join(f"[{l}, {h}]" for l, h in pads) + f"]> : tensor<{len(pads)}x2xi64>"
    b.pool.append(b.op1("reduce_window", [x, init_v], out, x.dtype, regions=_binary_region(op, x.dtype),
                        attrs=f"window_dimensions = {i64_array(window)}, window_strides = {i64_array(strides)}, "
                              f"base_dilations = {i64_array(base)}, window_dilations = {i64_array(dil)}, "
                              f"padding = {padding}"))


def gen_sort(b: Builder):
    x = b.pick(lambda v: len(v.shape) >= 1 and v.dtype != "i1") or b.data(random_shape(b.rng, 2), "f32")
    dim = b.rng.randrange(len(x.shape))
    direction = b.rng.choice(["LT", "GT"])
    kind = "FLOAT" if is_float(x.dtype) else "UNSIGNED" if x.dtype.startswith("u") else "SIGNED"
    if kind == "FLOAT":
        if b.rng.random() < 0.5:
            kind = "TOTALORDER"
            b.flags.add("totalorder")  # the interpreter orders NaN as FLOAT does (it is unordered)
        else:
            b.flags.add("sort with NaN")  # not a strict weak order: any permutation is right
    t = tensor((), x.dtype)
    operands = [x]
    with_values = b.rng.random() < 0.4
    if with_values:
        operands.append(b.data(x.shape))
        b.flags.add("sort order of equal keys")
    params = [f"%a: {t}", f"%b: {t}"] + ([f"%c: {tensor((), operands[1].dtype)}",
                                           f"%d: {tensor((), operands[1].dtype)}"] if with_values else [])
    region = (f"{{\n    ^bb0({', '.join(params)}):\n"
              f"      %p = \"stablehlo.compare\"(%a, %b) {{comparison_direction = #stablehlo<comparison_direction {direction}>, "
              f"compare_type = #stablehlo<comparison_type {kind}>}} : ({t}, {t}) -> tensor<i1>\n"
              f"      \"stablehlo.return\"(%p) : (tensor<i1>) -> ()\n    }}")
    results = b.op("sort", operands, None, regions=region,
                   attrs=f"dimension = {dim} : i64, is_stable = {'true' if b.rng.random() < 0.5 else 'false'}",
                   results_shapes=[(o.shape, o.dtype) for o in operands])
    b.pool.extend(results)


def gen_while(b: Builder):
    """A loop whose trip count comes from an argument, clamped to at most 6."""
    x = b.data()
    bound = b.index("i32", 6)
    lo, hi = b.constant(0, (), "i32"), b.constant(b.rng.randint(0, 6), (), "i32")
    bound = b.op1("clamp", [lo, bound, hi], (), "i32")
    zero = b.constant(0, (), "i32")
    t, it = x.type, "tensor<i32>"
    step = {"i1": "not"}.get(x.dtype) or ("negate" if x.dtype[0] != "u" else "not")
    body_op = b.rng.choice([step, "add"]) if x.dtype != "i1" else "not"
    update = (f'      %n2 = "stablehlo.{body_op}"(%bx) : ({t}) -> {t}' if body_op != "add" else
              f'      %n2 = "stablehlo.add"(%bx, %bx) : ({t}, {t}) -> {t}')
    cond = (f"{{\n    ^bb0(%ci: {it}, %cx: {t}, %cb: {it}):\n"
            f"      %lt = \"stablehlo.compare\"(%ci, %cb) {{comparison_direction = #stablehlo<comparison_direction LT>}} "
            f": ({it}, {it}) -> tensor<i1>\n      \"stablehlo.return\"(%lt) : (tensor<i1>) -> ()\n    }}")
    body = (f"{{\n    ^bb0(%bi: {it}, %bx: {t}, %bb: {it}):\n"
            f"      %one = \"stablehlo.constant\"() {{value = dense<1> : {it}}} : () -> {it}\n"
            f"      %n1 = \"stablehlo.add\"(%bi, %one) : ({it}, {it}) -> {it}\n{update}\n"
            f"      \"stablehlo.return\"(%n1, %n2, %bb) : ({it}, {t}, {it}) -> ()\n    }}")
    results = b.op("while", [zero, x, bound], None, regions=f"{cond}, {body}",
                   results_shapes=[((), "i32"), (x.shape, x.dtype), ((), "i32")])
    b.pool.append(results[1])


def gen_case(b: Builder):
    """stablehlo.case with an index from an argument (out of range selects the last branch)
    or stablehlo.if on a comparison."""
    x = b.data()
    y = b.data(x.shape, x.dtype)
    t = x.type
    n = b.rng.randint(1, 3)
    branches = []
    for i in range(n):
        pick = [x, y][i % 2]
        branches.append(f"{{\n      \"stablehlo.return\"({pick.name}) : ({t}) -> ()\n    }}")
    if b.rng.random() < 0.5:
        index = b.index("i32", n)
        b.pool.append(b.op1("case", [index], x.shape, x.dtype, regions=", ".join(branches)))
    else:
        c = b.index(b.rng.choice(["i32", "i64"]), 4)
        zero = b.constant(0, (), c.dtype)
        pred = b.op1("compare", [c, zero], (), "i1",
                     attrs="comparison_direction = #stablehlo<comparison_direction LT>")
        other = f"{{\n      \"stablehlo.return\"({y.name}) : ({t}) -> ()\n    }}"
        b.pool.append(b.op1("if", [pred], x.shape, x.dtype, regions=f"{branches[0]}, {other}"))
    b.used.update({x.name, y.name})


def gen_dynamic_arg(b: Builder):
    """An argument with dynamic dimensions (the call's shape specializes it), combined
    elementwise with a second one of the same declared type (whose run-time size may differ)
    and reduced, and its size read with get_dimension_size."""
    rank = b.rng.randint(1, 2)
    static = random_shape(b.rng, rank)
    dtype = b.rng.choice(["f32", "i32", "f64"])
    declared = tuple(None if b.rng.random() < 0.7 else d for d in static)
    if all(d is not None for d in declared):
        declared = (None,) + declared[1:]
    x = b.arg(declared, dtype, role="dynamic", runtime_shape=static)
    if b.rng.random() < 0.5:
        mismatch = b.rng.random() < 0.25  # a different size: a call error, never a crash
        other = tuple((d + 1 if mismatch and i == 0 else d) for i, d in enumerate(static))
        y = b.arg(declared, dtype, role="dynamic", runtime_shape=other)
        x = b.op1(b.rng.choice(["add", "maximum", "multiply"]), [x, y], declared, dtype)
    if b.rng.random() < 0.5:
        size = b.op1("get_dimension_size", [x], (), "i32", attrs=f"dimension = 0 : i64")
        b.pool.append(size)
        b.indices.append(size)
    b.pool.append(_reduce_all(b, x))


def gen_sparse_product(b: Builder):
    """jaxlib's `cpu_csr_sparse_dense_ffi` (built into Kiln) with CSR row pointers and column
    indices straight from arguments: valid CSR, or adversarial (past the end, negative,
    decreasing)."""
    rows, cols, nnz = b.rng.randint(1, 4), b.rng.randint(1, 4), b.rng.randint(0, 6)
    k = b.rng.choice([None, b.rng.randint(1, 3)])
    itype = b.rng.choice(["i32", "i64"])
    data = b.arg((nnz,), "f32")
    indptr = b.arg((rows + 1,), itype, role="indptr", hint=nnz)
    indices = b.arg((nnz,), itype, role="colidx", hint=cols)
    rhs = b.data((cols,) if k is None else (cols, k), "f32")
    out = (rows,) if k is None else (rows, k)
    v = b.op1("custom_call", [data, indptr, indices, rhs], out, "f32",
              attrs='call_target_name = "cpu_csr_sparse_dense_ffi", api_version = 4 : i32, '
                    'backend_config = {}')
    b.constraints.append(("csr", [indptr, indices], (rows, cols, nnz)))
    b.flags.add("custom call")  # the interpreter has no custom calls
    b.flags.add("run-time constraint")
    b.pool.append(v)
    b.risky.append(v)


def gen_huge_static_shape(b: Builder):
    """A static shape whose element or byte count overflows or exceeds any machine (iota or a
    broadcast of a splat, reduced to a scalar): a located error before anything is
    allocated."""
    # At least 2^40 elements (a terabyte): beyond any machine, so an error is the only right
    # answer (2^31 one-byte elements would be legitimate work, only slow).
    big = b.rng.choice([1 << 40, 1 << 41, (1 << 62) // 3, (1 << 63) - 1])
    rank = b.rng.randint(1, 2)
    shape = tuple([big] + [b.rng.choice([1, 2, 1 << 32, big])] * (rank - 1))
    dtype = b.rng.choice(["f32", "i8", "f64"])
    if b.rng.random() < 0.5:
        v = b.op1("iota", [], shape, dtype, attrs="iota_dimension = 0 : i64")
    else:
        scalar = b.data((), dtype)
        v = b.op1("broadcast_in_dim", [scalar], shape, dtype, attrs="broadcast_dimensions = array<i64>")
    b.flags.add("huge shape")
    b.pool.append(_reduce_all(b, v))


GENERATORS = [
    (gen_unary, 6), (gen_binary, 8), (gen_compare_select, 4), (gen_clamp, 2), (gen_convert, 4),
    (gen_bitcast, 1), (gen_broadcast, 3), (gen_reshape, 3), (gen_transpose, 2), (gen_reverse, 1),
    (gen_slice, 3), (gen_concatenate, 2), (gen_pad, 3), (gen_iota, 2), (gen_dynamic_slice, 6),
    (gen_dynamic_update_slice, 5), (gen_real_dynamic_slice, 4), (gen_dynamic_shape_op, 4),
    (gen_gather, 5), (gen_scatter, 5), (gen_dot_general, 3), (gen_reduce, 3), (gen_sort, 3),
    (gen_while, 2), (gen_case, 2), (gen_dynamic_arg, 2), (gen_reduce_window, 2),
    (gen_sparse_product, 1), (gen_huge_static_shape, 1),
]


def make_program(seed: int, index: int) -> Program:
    rng = random.Random(f"{seed}:{index}")
    b = Builder(rng)
    funcs, weights = zip(*GENERATORS)
    for _ in range(rng.randint(1, 8)):
        rng.choices(funcs, weights)[0](b)
    if not b.pool:
        b.pool.append(b.arg(random_shape(rng), "f32"))
    # Return every value nothing used (so no op is dead code), the risky ones first.
    unused = [v for v in b.pool if v.name not in b.used]
    results = list(dict.fromkeys([r.name for r in b.risky if r.name not in b.used] +
                                 [v.name for v in unused]))
    by_name = {v.name: v for v in b.pool}
    results = [by_name[n] for n in results][:10] or [b.pool[-1]]
    if not b.args:  # keep one argument so every program is called
        b.arg((), "f32")
    # The vectors a run-time constraint is about come back too, so the oracle can tell
    # whether Kiln should have refused the call.
    constraints = []
    for kind, vectors, shape in b.constraints:
        positions = list(range(len(results), len(results) + len(vectors)))
        results += vectors
        constraints.append((kind, positions, shape))
    return Program(b.text(results), b.args, results, b.ops, b.flags, constraints)


# -- adversarial run-time values -----------------------------------------------------------------
def index_values(dtype: str, hint: int) -> list[int]:
    lo, hi = int_range(dtype)
    values = [0, 1, -1, 2, hint - 1, hint, hint + 1, -hint, 2 * hint, lo, hi, lo + 1, hi - 1,
              1 << 31, -(1 << 31), (1 << 31) - 1, 1 << 32, 1 << 62, 255, 256, 65536]
    return [v for v in values if lo <= v <= hi]


def float_values(dtype: str) -> list[float]:
    import ml_dtypes
    info = ml_dtypes.finfo(numpy_dtype(dtype))
    return [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, float(info.tiny), float(info.tiny) / 4,
            -float(info.tiny) / 2, float(info.max), float(info.min), float(info.eps), 1.0, -1.0,
            0.5, 1e4, -3.0]


def make_inputs(program: Program, seed: int, index: int, variant: int = 0) -> list[np.ndarray]:
    """Values for `program`'s arguments. Variant 0 is mostly ordinary data with adversarial
    indices; later variants make the data adversarial too."""
    rng = random.Random(f"{seed}:{index}:inputs:{variant}")
    wild = rng.random() < 0.5          # special floats and integer extremes in the data
    in_range = rng.random() < 0.35     # indices mostly valid: the paths that compute results
    out = []
    for arg in program.args:
        dtype = arg.value.dtype
        shape = arg.runtime_shape if arg.role == "dynamic" else arg.value.shape
        npd = numpy_dtype(dtype)
        if arg.role == "index":
            choices = index_values(dtype, arg.hint)
            value = rng.choice(choices) if rng.random() < (0.15 if in_range else 0.7) else \
                min(max(rng.randint(0, arg.hint) if in_range else rng.randint(-2, arg.hint + 2),
                        int_range(dtype)[0]), int_range(dtype)[1])
            out.append(np.array(value, dtype=npd))
            continue
        n = _prod(shape)
        if arg.role in ("indptr", "colidx"):
            out.append(_csr_vector(rng, arg, n, in_range or rng.random() < 0.5).astype(npd))
            continue
        if dtype == "i1":
            array = np.array([rng.random() < 0.5 for _ in range(n)], dtype=bool)
        elif is_float(dtype):
            special = float_values(dtype)
            array = np.array([rng.choice(special) if wild and rng.random() < 0.4 else
                              round(rng.uniform(-4, 4), 2) for _ in range(n)], dtype=np.float64).astype(npd)
        else:
            lo, hi = int_range(dtype)
            special = index_values(dtype, 4)
            array = np.array([rng.choice(special) if wild and rng.random() < 0.4 else
                              min(max(rng.randint(-5, 9), lo), hi) for _ in range(n)], dtype=object).astype(npd)
        out.append(array.reshape(shape))
    return out


def _csr_vector(rng: random.Random, arg: Arg, n: int, valid: bool) -> np.ndarray:
    """Row pointers (nondecreasing from 0 to at most nnz) or column indices (in [0, cols)) of
    a CSR matrix, or, when not `valid`, the same with one adversarial entry."""
    bound = arg.hint
    if arg.role == "indptr":
        values = sorted(rng.randint(0, bound) for _ in range(n - 1))
        values = [0] + values
    else:
        values = [rng.randint(0, max(bound - 1, 0)) for _ in range(n)]
    if not valid and n:
        values[rng.randrange(n)] = rng.choice(index_values(arg.value.dtype, bound))
    return np.array(values, dtype=object)


def _prod(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _factor(rng: random.Random, n: int) -> tuple:
    if n == 0:
        dims = [0] + rng.sample([1, 2, 3], rng.randint(0, 2))
        rng.shuffle(dims)
        return tuple(dims)
    dims = []
    while n > 1 and len(dims) < 3:
        divisors = [d for d in range(2, n + 1) if n % d == 0]
        d = rng.choice(divisors)
        dims.append(d)
        n //= d
    if n > 1:
        dims.append(n)
    if rng.random() < 0.3:
        dims.insert(rng.randint(0, len(dims)), 1)
    return tuple(dims)


def _ints(values) -> str:
    return ", ".join(str(int(v)) for v in values)


def constraint_violations(constraints, results) -> list[str]:
    """The run-time constraints of the spec that Kiln's own values for the index vectors
    violate: where one does, the call should have raised a KilnError."""
    broken = []
    for kind, positions, shape in constraints:
        vectors = [[int(v) for v in np.asarray(results[p]).reshape(-1)] for p in positions]
        if kind == "real_dynamic_slice":
            start, limit, stride = vectors
            if not all(0 <= s <= l <= d and t > 0 for s, l, t, d in zip(start, limit, stride, shape)):
                broken.append(f"real_dynamic_slice start {start} limit {limit} stride {stride} on {list(shape)}")
        elif kind in ("sizes", "broadcast"):
            (sizes,) = vectors
            bad = any(s < 0 for s in sizes)
            if kind == "broadcast":  # operand dims map to the trailing output dims
                bad |= any(d not in (1, s) for d, s in zip(shape, sizes[1:]))
            if bad:
                broken.append(f"{'dynamic_iota' if kind == 'sizes' else 'dynamic_broadcast_in_dim'} "
                              f"output shape {sizes} (operand {list(shape)})")
        elif kind == "csr":
            indptr, indices = vectors
            rows, cols, nnz = shape
            ok = (indptr[0] == 0 and all(a <= b for a, b in zip(indptr, indptr[1:]))
                  and indptr[-1] <= nnz and all(0 <= c < cols for c in indices[:max(indptr[-1], 0)]))
            if not ok:
                broken.append(f"cpu_csr_sparse_dense_ffi row pointers {indptr} column indices "
                              f"{indices} for a {rows}x{cols} matrix with {nnz} values")
        elif kind == "dynamic_pad":
            low, high, interior = vectors
            sizes = [l + h + d + max(d - 1, 0) * i for l, h, i, d in zip(low, high, interior, shape)]
            if any(i < 0 for i in interior) or any(s < 0 for s in sizes):
                broken.append(f"dynamic_pad low {low} high {high} interior {interior} on {list(shape)}")
    return broken
