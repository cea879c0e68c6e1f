"""Applying a front end's calling convention at call time: pytrees of arrays in and out, and
concrete shapes checked against the producer's symbolic ones before anything compiles.

Pytrees come as the JSON-able nested lists the JAX front end reads from an Exported:
[kind, children, dict keys?, custom-node name?, aux data?]. Custom nodes are rebuilt through
jax's own registry, so only exports that use them need jax at call time.
"""
from __future__ import annotations

import ast
import base64
import re

from ..errors import KilnError
from ..frontend.convention import Aval


def _custom_node(node: list):
    try:
        from jax._src.export import _export
    except ImportError:
        raise KilnError(f"the export's pytree has a custom node '{node[2]}'; restoring it needs jax",
                        hint="install jax, or call the Executable's .flat(...) with flat arrays") from None
    if node[2] not in _export.deserialization_registry:
        raise KilnError(f"the export's pytree has node type '{node[2]}', unknown to this jax",
                        hint="register it with jax.export.register_pytree_node_serialization")
    _, from_aux, from_iter = _export.deserialization_registry[node[2]]
    return from_aux(base64.b64decode(node[3])), from_iter


def unflatten(tree: list, leaves):
    """Build the pytree `tree` from an iterator of leaves."""
    kind, children = tree[0], tree[1]
    if kind == "leaf":
        return next(leaves)
    values = [unflatten(c, leaves) for c in children]
    if kind == "none":
        return None
    if kind == "tuple":
        return tuple(values)
    if kind == "list":
        return values
    if kind == "dict":
        return dict(zip(tree[2], values))
    if kind == "custom":
        aux, from_iter = _custom_node(tree)
        return from_iter(aux, values)
    raise KilnError(f"unknown pytree node kind {kind}")


def flatten(tree: list, value, what: str) -> list:
    """The leaves of `value`, checked against the structure `tree`."""
    kind, children = tree[0], tree[1]
    if kind == "leaf":
        return [value]
    if kind == "none":
        if value is not None:
            raise KilnError(f"{what} must be None")
        return []
    if kind in ("tuple", "list"):
        if not isinstance(value, (tuple, list)) or len(value) != len(children):
            raise KilnError(f"{what} must be a {kind} of {len(children)}, got {type(value).__name__}"
                            + (f" of {len(value)}" if isinstance(value, (tuple, list)) else ""))
        return [x for c, v, i in zip(children, value, range(len(children)))
                for x in flatten(c, v, f"{what}[{i}]")]
    if kind == "dict":
        if not isinstance(value, dict) or sorted(value) != sorted(tree[2]):
            raise KilnError(f"{what} must be a dict with keys {tree[2]}")
        return [x for c, k in zip(children, tree[2]) for x in flatten(c, value[k], f"{what}[{k!r}]")]
    if kind == "custom":
        aux, from_iter = _custom_node(tree)  # a clear error first when jax is missing
        import jax
        placeholder = from_iter(aux, [unflatten(c, iter(lambda: 0.0, None)) for c in children])
        treedef = jax.tree_util.tree_structure(placeholder)
        return list(jax.tree_util.tree_leaves(treedef.flatten_up_to(value)))
    raise KilnError(f"unknown pytree node kind {kind}")


_DIM_FUNCS = {"floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b, "max": max, "min": min,
              "non_negative": lambda a: max(a, 0)}
_DIM_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
            ast.Mult: lambda a, b: a * b, ast.FloorDiv: lambda a, b: a // b,
            ast.Mod: lambda a, b: a % b}


def eval_dim(expr: str, env: dict[str, int]) -> int:
    """The value of one of JAX's symbolic dimension expressions ("2*b + 1", "floordiv(b, 2)",
    "max(a, b)"...) for the variables in `env`. The text comes from a file, so it is evaluated
    from its syntax tree, never with eval(). Raises ValueError for any other form."""
    def value(node):
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name) and node.id in env:
            return env[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _DIM_OPS:
            return _DIM_OPS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in _DIM_FUNCS and not node.keywords:
            return _DIM_FUNCS[node.func.id](*(value(a) for a in node.args))
        raise ValueError(f"unsupported dimension expression {expr!r}")
    try:
        return value(ast.parse(expr, mode="eval").body)
    except (SyntaxError, ZeroDivisionError, TypeError, RecursionError) as exc:
        raise ValueError(str(exc)) from None


def check_shapes(avals: list[Aval], shapes: list[tuple[int, ...]], entry: str) -> None:
    """Check concrete shapes against the symbolic ones before compiling: a clear error instead
    of a program specialised to inconsistent dimension variables."""
    env: dict[str, int] = {}
    for arg, (aval, shape) in enumerate(zip(avals, shapes)):
        for d, (sym, n) in enumerate(zip(aval.shape, shape)):
            if re.fullmatch(r"[A-Za-z_]\w*", sym):
                if sym in env and env[sym] != n:
                    raise KilnError(f"argument {arg} of @{entry} has dimension {d} = {n}, but "
                                    f"dimension variable '{sym}' is {env[sym]} from an earlier "
                                    "argument", hint="shapes must fit the export's symbolic shapes")
                if n < 1:
                    raise KilnError(f"dimension variable '{sym}' must be >= 1, got {n} "
                                    f"(argument {arg} of @{entry}, dimension {d})")
                env[sym] = n
    for arg, (aval, shape) in enumerate(zip(avals, shapes)):
        for d, (sym, n) in enumerate(zip(aval.shape, shape)):
            try:
                want = eval_dim(sym, env)
            except ValueError:  # a form this check cannot evaluate: the program's own check decides
                continue
            if want != n:
                raise KilnError(f"argument {arg} of @{entry} must have dimension {d} = {sym} = "
                                f"{want}, got {n}", hint="shapes must fit the export's symbolic shapes: "
                                + ", ".join("(" + ", ".join(a.shape) + ")" for a in avals))


