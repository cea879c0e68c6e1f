"""Regenerate tests/conformance/ops/: Kiln's own conformance cases for the ops of the spec that
the StableHLO testdata never uses (batch_norm_inference/training/grad, cholesky, rng; async
start/done, an HLO-only op pair, is tests/conformance/ops/async_start_done.hlo, written by hand:
it has no expected values, the runner compares it with the reference interpreter).

    python tests/conformance/generate_ops.py     # rewrites tests/conformance/ops/*.mlir

Each case has the testdata's form: @main calls @inputs and @expected (constants) and checks the
op's results with check.expect_almost_eq. Expected values come from the StableHLO reference
interpreter (kiln.reference.evaluate). The interpreter does not implement batch norm or
cholesky itself (it stops with "can be decomposed into supported operations"), so it evaluates
their definitions written in ops it does implement: batch norm as the spec's pseudocode
(compute_mean, compute_variance, the grad formula of XLA's expander, in the element type),
cholesky as the column recurrence unrolled per element. Kiln's lowerings compute differently
(rsqrt factors, f32 for f16/bf16, loops), so agreement is a real check. rng's values are
implementation-defined: its cases check in the program what the spec fixes (UNIFORM in [a, b))
and loose moments of the distribution.
"""
from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np

OUT = Path(__file__).resolve().parent / "ops"
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

DTYPE = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
# Absolute tolerance per unit of the largest expected magnitude: the interpreter computes f16
# and bf16 in those types (Kiln in f32), so they differ by a few of the type's ulps.
RELATIVE = {"f32": 2e-5, "f64": 1e-12, "f16": 1e-2, "bf16": 6e-2}


def ttype(shape, e: str) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + e + ">"


def constant(array: np.ndarray, e: str) -> str:
    data = np.ascontiguousarray(array.astype(DTYPE[e]))
    return f'stablehlo.constant dense<"0x{data.tobytes().hex().upper()}"> : {ttype(array.shape, e)}'


class Program:
    """StableHLO text in the generic form, one op a line; values are (name, shape, element)."""

    def __init__(self):
        self.lines: list[str] = []
        self.count = 0

    def op(self, name: str, operands, shape, e: str, attrs: str = "", region: str = ""):
        result = f"%v{self.count}"
        self.count += 1
        args = ", ".join(v[0] for v in operands)
        types = ", ".join(ttype(v[1], v[2]) for v in operands)
        attrs = f" {{{attrs}}}" if attrs else ""
        region = f" ({region})" if region else ""
        self.lines.append(f'    {result} = "{name}"({args}){region}{attrs} : ({types}) -> '
                          f"{ttype(shape, e)}")
        return (result, tuple(shape), e)

    def const(self, value: float, shape, e: str):
        scalar = (f"%v{self.count}", (), e)
        self.count += 1
        self.lines.append(f"    {scalar[0]} = stablehlo.constant dense<{value!r}> : {ttype((), e)}")
        return self.broadcast(scalar, shape, []) if shape else scalar

    def broadcast(self, v, shape, dims):
        return self.op("stablehlo.broadcast_in_dim", [v], shape, v[2],
                       f"broadcast_dimensions = array<i64{': ' if dims else ''}{', '.join(map(str, dims))}>")

    def binary(self, name, a, b):
        return self.op(f"stablehlo.{name}", [a, b], a[1], a[2])

    def unary(self, name, a):
        return self.op(f"stablehlo.{name}", [a], a[1], a[2])

    def reduce_sum(self, v, dims):
        e = v[2]
        zero = self.const(0.0, (), e)
        scalar = ttype((), e)
        region = (f"{{\n    ^bb0(%a: {scalar}, %b: {scalar}):\n"
                  f'      %s = "stablehlo.add"(%a, %b) : ({scalar}, {scalar}) -> {scalar}\n'
                  f'      "stablehlo.return"(%s) : ({scalar}) -> ()\n    }}')
        shape = [n for d, n in enumerate(v[1]) if d not in dims]
        return self.op("stablehlo.reduce", [v, zero], shape, e,
                       f"dimensions = array<i64: {', '.join(map(str, dims))}>", region)

    def reshape(self, v, shape):
        return self.op("stablehlo.reshape", [v], shape, v[2])

    def function(self, args, results) -> str:
        params = ", ".join(f"%arg{i}: {ttype(a[1], a[2])}" for i, a in enumerate(args))
        outs = ", ".join(ttype(r[1], r[2]) for r in results)
        body = "\n".join(self.lines)
        return (f"func.func @main({params}) -> ({outs}) {{\n{body}\n"
                f"    return {', '.join(r[0] for r in results)} : {outs}\n}}")


# -- batch norm as the spec defines it -----------------------------------------------------------
def _spec_batch_norm(kind: str, shape, feature: int, e: str, epsilon: float) -> tuple[str, int]:
    p = Program()
    c = shape[feature]
    per = ((c,), e)
    args = {"inference": [shape, per[0], per[0], per[0], per[0]], "training": [shape, per[0], per[0]],
            "grad": [shape, per[0], per[0], per[0], shape]}[kind]
    values = [(f"%arg{i}", tuple(s), e) for i, s in enumerate(args)]
    others = [d for d in range(len(shape)) if d != feature]
    n = int(np.prod([shape[d] for d in others]))
    spread = lambda v: p.broadcast(v, shape, [feature])  # noqa: E731

    def mean(v):
        return p.binary("divide", p.reduce_sum(v, others), p.const(float(n), (c,), e))

    eps = p.const(float(np.float32(epsilon)), shape, e)

    def inference(x, scale, offset, m, var):
        centered = p.binary("subtract", x, spread(m))
        stddev = p.unary("sqrt", p.binary("add", spread(var), eps))
        normalized = p.binary("divide", centered, stddev)
        return p.binary("add", p.binary("multiply", spread(scale), normalized), spread(offset))

    if kind == "inference":
        results = [inference(*values)]
    elif kind == "training":
        x, scale, offset = values
        m = mean(x)
        centered = p.binary("subtract", x, spread(m))
        var = mean(p.binary("multiply", centered, centered))
        results = [inference(x, scale, offset, m, var), m, var]
    else:  # the spec's grad: XLA's batchnorm_expander formula
        x, scale, m, var, g = values
        var_eps = p.binary("add", spread(var), eps)
        centered = p.binary("subtract", x, spread(m))
        stddev = p.unary("sqrt", var_eps)
        normalized = p.binary("divide", centered, stddev)
        count = p.const(float(n), shape, e)
        i1 = p.binary("multiply", g, count)
        i2 = spread(p.reduce_sum(g, others))
        i3 = spread(p.reduce_sum(p.binary("multiply", g, centered), others))
        i5 = p.binary("divide", p.binary("multiply", i3, centered), var_eps)
        i6 = p.binary("subtract", p.binary("subtract", i1, i2), i5)
        factor = p.binary("divide", p.binary("divide", spread(scale), stddev), count)
        results = [p.binary("multiply", factor, i6),
                   p.reduce_sum(p.binary("multiply", g, normalized), others),
                   p.reduce_sum(g, others)]
    return p.function(values, results), len(results)


def batch_norm_op(kind: str, shape, feature: int, e: str, epsilon: float, names) -> tuple[str, list]:
    c = ttype((shape[feature],), e)
    tx = ttype(shape, e)
    operands = {"inference": [tx, c, c, c, c], "training": [tx, c, c], "grad": [tx, c, c, c, tx]}[kind]
    results = [tx] if kind == "inference" else [tx, c, c]
    text = (f'"stablehlo.batch_norm_{kind}"({", ".join(names)}) {{epsilon = {float(np.float32(epsilon)):e} : f32, '
            f"feature_index = {feature} : i64}} : ({', '.join(operands)}) -> "
            + (results[0] if len(results) == 1 else f"({', '.join(results)})"))
    return text, results


def batch_norm_inputs(kind: str, shape, feature: int, e: str, seed: int):
    rng = np.random.default_rng(seed)
    c = shape[feature]
    x = rng.standard_normal(shape) * 2 + 1
    scale, offset, m = (rng.standard_normal(c) for _ in range(3))
    var = rng.random(c) + 0.25
    arrays = {"inference": [x, scale, offset, m, var], "training": [x, scale, offset],
              "grad": [x, scale, m, var, rng.standard_normal(shape)]}[kind]
    if kind == "grad":  # at the batch statistics, as a training step calls it
        others = tuple(d for d in range(len(shape)) if d != feature)
        arrays[2], arrays[3] = x.mean(axis=others), x.var(axis=others)
    return [np.asarray(a).astype(DTYPE[e]) for a in arrays]


# -- cholesky, the column recurrence unrolled ----------------------------------------------------
def _spec_cholesky(shape, e: str, lower: bool) -> str:
    """L[j, j] = sqrt(A[j, j] - sum_k<j L[j, k]^2); L[i, j] = (A[i, j] - sum_k<j L[i, k] L[j, k])
    / L[j, j] for i > j; reading A's lower triangle (upper: A's transpose's, U = L^T)."""
    p = Program()
    a = ("%arg0", tuple(shape), e)
    n = shape[-1]
    batch = list(shape[:-2])
    flat = int(np.prod(batch)) if batch else 1
    rank = len(shape)

    def entry(i, j):  # A[..., i, j] as a [flat] vector
        start = [0] * (rank - 2) + [i, j]
        limit = list(shape[:-2]) + [i + 1, j + 1]
        sliced = p.op("stablehlo.slice", [a], batch + [1, 1], e,
                      f"start_indices = array<i64: {', '.join(map(str, start))}>, "
                      f"limit_indices = array<i64: {', '.join(map(str, limit))}>, "
                      f"strides = array<i64: {', '.join('1' * rank)}>")
        return p.reshape(sliced, [flat])

    read = (lambda i, j: entry(i, j)) if lower else (lambda i, j: entry(j, i))
    L = {}
    for j in range(n):
        acc = read(j, j)
        for k in range(j):
            acc = p.binary("subtract", acc, p.binary("multiply", L[j, k], L[j, k]))
        L[j, j] = p.unary("sqrt", acc)
        for i in range(j + 1, n):
            acc = read(i, j)
            for k in range(j):
                acc = p.binary("subtract", acc, p.binary("multiply", L[i, k], L[j, k]))
            L[i, j] = p.binary("divide", acc, L[j, j])
    zero = p.const(0.0, (flat,), e)
    cells = []
    for i in range(n):
        for j in range(n):
            value = L.get((i, j) if lower else (j, i), zero)
            cells.append(p.reshape(value, [flat, 1]))
    joined = p.op("stablehlo.concatenate", cells, [flat, n * n], e, "dimension = 1 : i64")
    return p.function([a], [p.reshape(joined, list(shape))])


def cholesky_inputs(shape, e: str, lower: bool, seed: int):
    rng = np.random.default_rng(seed)
    n = shape[-1]
    m = rng.standard_normal(shape)
    spd = m @ np.swapaxes(m, -1, -2) + n * np.eye(n)
    # The triangle the op must not read holds other (finite) values.
    unread = np.triu_indices(n, 1) if lower else np.tril_indices(n, -1)
    spd[(..., *unread)] = rng.standard_normal(spd[(..., *unread)].shape) * 100
    return [spd.astype(DTYPE[e])]


# -- the case files --------------------------------------------------------------------------
def _unpack(name: str, count: int) -> list[str]:
    return [name] if count == 1 else [f"{name}#{i}" for i in range(count)]


def _multi(name: str, count: int) -> str:
    return name if count == 1 else f"{name}:{count}"


def write_case(filename: str, title: str, op_text, arrays, arg_types, e: str, oracle: str) -> None:
    from kiln.reference import evaluate
    expected = evaluate(oracle, arrays, arg_types)
    operands = _unpack("%in", len(arrays))
    text, result_types = op_text(operands)
    results = _unpack("%out", len(result_types))
    wanted = _unpack("%want", len(expected))
    in_types = ", ".join(arg_types)
    out_types = ", ".join(result_types)
    checks = []
    for got, want, array, t in zip(results, wanted, expected, result_types):
        scale = max(1.0, float(np.max(np.abs(np.asarray(array, np.float64)))) if array.size else 1.0)
        checks.append(f"    check.expect_almost_eq {got}, {want}, tolerance = {RELATIVE[e] * scale:.3e} : {t}")
    consts = "\n".join(f"    %c{i} = {constant(a, e)}" for i, a in enumerate(arrays))
    wants = "\n".join(f"    %c{i} = {constant(np.asarray(a), e)}" for i, a in enumerate(expected))
    source = f"""// {title}
// Generated by tests/conformance/generate_ops.py; expected values: the StableHLO reference
// interpreter on the op's definition in ops it implements (see that script).
module @{Path(filename).stem} {{
  func.func public @main() -> ({out_types}) {{
    {_multi('%in', len(arrays))} = call @inputs() : () -> ({in_types})
    {_multi('%want', len(expected))} = call @expected() : () -> ({out_types})
    {_multi('%out', len(result_types))} = {text}
{chr(10).join(checks)}
    return {', '.join(results)} : {out_types}
  }}
  func.func private @inputs() -> ({in_types}) {{
{consts}
    return {', '.join(f'%c{i}' for i in range(len(arrays)))} : {in_types}
  }}
  func.func private @expected() -> ({out_types}) {{
{wants}
    return {', '.join(f'%c{i}' for i in range(len(expected)))} : {out_types}
  }}
}}
"""
    (OUT / filename).write_text(source)


BATCH_NORM_CASES = [  # (element, shape, feature_index): NCHW, NHWC, rows, a vector
    ("f32", (2, 3, 4, 4), 1), ("f32", (2, 4, 4, 3), 3), ("f64", (5, 6), 0),
    ("f16", (4, 3, 5), 2), ("bf16", (3, 4, 5), 1),
]
CHOLESKY_CASES = [("f32", (4, 4), True), ("f64", (2, 5, 5), False), ("f32", (3, 3, 3), False),
                  ("f64", (1, 1), True)]


# -- rng: what the spec fixes, checked in the program -------------------------------------------
def _reduce(value: str, t: str, scalar: str, init: str, op: str, name: str, rank: int) -> str:
    dims = ", ".join(map(str, range(rank)))
    return (f"    %{name}_init = stablehlo.constant dense<{init}> : {scalar}\n"
            f"    %{name} = stablehlo.reduce({value} init: %{name}_init) applies stablehlo.{op} "
            f"across dimensions = [{dims}] : ({t}, {scalar}) -> {scalar}\n")


def rng_case(e: str, distribution: str, shape=(64, 64)) -> str:
    """UNIFORM(a, b): every value in [a, b), the least within 1% of (b - a) of a and the
    greatest of b (integers: exactly a and b - 1), the mean within 5 standard errors of the
    distribution's. NORMAL(mu, sigma): mean and variance within ~5 standard errors."""
    t, scalar = ttype(shape, e), ttype((), e)
    count = int(np.prod(shape))
    integer = e.startswith("i")
    if distribution == "UNIFORM":
        a, b = (-5, 7) if integer else (-2.0, 3.0)
    else:
        a, b = 1.5, 2.0  # mu, sigma
    lines = [f"    %a = stablehlo.constant dense<{a}> : {scalar}",
             f"    %b = stablehlo.constant dense<{b}> : {scalar}",
             f"    %shape = stablehlo.constant dense<[{', '.join(map(str, shape))}]> : tensor<{len(shape)}xi64>",
             f"    %r = stablehlo.rng %a, %b, %shape, distribution = {distribution} : "
             f"({scalar}, {scalar}, tensor<{len(shape)}xi64>) -> {t}"]
    body = "\n".join(lines) + "\n"
    wide = "tensor<f64>"  # the statistics are taken in f64
    rw = "%r" if e == "f64" else "%rw"
    if e != "f64":
        body += f"    %rw = stablehlo.convert %r : ({t}) -> {ttype(shape, 'f64')}\n"
    tw = ttype(shape, "f64")
    body += _reduce(rw, tw, wide, "0.0", "add", "sum", len(shape))
    body += f"    %n = stablehlo.constant dense<{float(count)}> : {wide}\n"
    body += f"    %mean = stablehlo.divide %sum, %n : {wide}\n"
    checks = []
    if distribution == "UNIFORM":
        body += _reduce(rw, tw, wide, "0x7FF0000000000000", "minimum", "lo", len(shape))
        body += _reduce(rw, tw, wide, "0xFFF0000000000000", "maximum", "hi", len(shape))
        body += (f"    %aw = stablehlo.constant dense<{float(a)}> : {wide}\n"
                 f"    %bw = stablehlo.constant dense<{float(b)}> : {wide}\n"
                 f"    %lo_ok = stablehlo.compare GE, %lo, %aw : ({wide}, {wide}) -> tensor<i1>\n"
                 f"    %hi_ok = stablehlo.compare LT, %hi, %bw : ({wide}, {wide}) -> tensor<i1>\n")
        checks += ["    check.expect_eq_const %lo_ok, dense<true> : tensor<i1>",
                   "    check.expect_eq_const %hi_ok, dense<true> : tensor<i1>"]
        if integer:
            checks += [f"    check.expect_eq_const %lo, dense<{float(a)}> : {wide}",
                       f"    check.expect_eq_const %hi, dense<{float(b - 1)}> : {wide}"]
        else:
            near = 0.01 * (b - a)
            checks += [f"    check.expect_almost_eq_const %lo, dense<{a}> : {wide} {{tolerance = {near} : f64}}",
                       f"    check.expect_almost_eq_const %hi, dense<{b}> : {wide} {{tolerance = {near} : f64}}"]
        # the mean and standard error of uniform draws: from a..b-1 for integers
        middle = (a + b - 1) / 2 if integer else (a + b) / 2
        spread = np.sqrt(((b - a) ** 2 - (1 if integer else 0)) / (12 * count))
        checks.append(f"    check.expect_almost_eq_const %mean, dense<{middle}> : {wide} "
                      f"{{tolerance = {5 * spread:.4f} : f64}}")
    else:
        body += (f"    %mean_b = stablehlo.broadcast_in_dim %mean, dims = [] : ({wide}) -> {tw}\n"
                 f"    %dev = stablehlo.subtract {rw}, %mean_b : {tw}\n"
                 f"    %sq = stablehlo.multiply %dev, %dev : {tw}\n")
        body += _reduce("%sq", tw, wide, "0.0", "add", "sqsum", len(shape))
        body += f"    %var = stablehlo.divide %sqsum, %n : {wide}\n"
        checks += [f"    check.expect_almost_eq_const %mean, dense<{a}> : {wide} "
                   f"{{tolerance = {5 * b / np.sqrt(count):.4f} : f64}}",
                   f"    check.expect_almost_eq_const %var, dense<{b * b}> : {wide} "
                   f"{{tolerance = {5 * b * b * np.sqrt(2 / count):.4f} : f64}}"]
    return f"""// stablehlo.rng {distribution}, {e}: its values are implementation-defined, so the
// program checks what the spec fixes and the distribution's moments (generate_ops.py).
module @rng_{distribution.lower()}_{e} {{
  func.func public @main() -> {t} {{
{body}{chr(10).join(checks)}
    return %r : {t}
  }}
}}
"""


RNG_CASES = [("f32", "UNIFORM"), ("f64", "UNIFORM"), ("f16", "UNIFORM"), ("bf16", "UNIFORM"),
             ("i32", "UNIFORM"), ("f32", "NORMAL"), ("f64", "NORMAL"), ("bf16", "NORMAL")]


def generate() -> list[str]:
    OUT.mkdir(exist_ok=True)
    written = []
    for seed, (kind, (e, shape, feature)) in enumerate(
            (k, c) for k in ("inference", "training", "grad") for c in BATCH_NORM_CASES):
        epsilon = 1e-3
        arrays = batch_norm_inputs(kind, shape, feature, e, seed)
        oracle, _ = _spec_batch_norm(kind, shape, feature, e, epsilon)
        name = f"batch_norm_{kind}_{e}_{'x'.join(map(str, shape))}_feature{feature}.mlir"
        write_case(name, f"stablehlo.batch_norm_{kind}, {e}, feature_index {feature}",
                   lambda ops, k=kind, s=shape, f=feature, el=e: batch_norm_op(k, s, f, el, epsilon, ops),
                   arrays, [ttype(a.shape, e) for a in arrays], e, oracle)
        written.append(name)
    for seed, (e, shape, lower) in enumerate(CHOLESKY_CASES):
        arrays = cholesky_inputs(shape, e, lower, 100 + seed)
        t = ttype(shape, e)
        name = f"cholesky_{e}_{'x'.join(map(str, shape))}_{'lower' if lower else 'upper'}.mlir"
        write_case(name, f"stablehlo.cholesky, {e}, lower = {str(lower).lower()}",
                   lambda ops, t=t, lower=lower: (
                       f"stablehlo.cholesky {ops[0]}, lower = {str(lower).lower()} : {t}", [t]),
                   arrays, [t], e, _spec_cholesky(shape, e, lower))
        written.append(name)
    for e, distribution in RNG_CASES:
        name = f"rng_{distribution.lower()}_{e}.mlir"
        (OUT / name).write_text(rng_case(e, distribution))
        written.append(name)
    return written


if __name__ == "__main__":
    for name in generate():
        print(OUT / name)
