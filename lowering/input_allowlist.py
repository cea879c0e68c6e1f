"""Kiln's table of the attributes an input program may carry, and what happens to the others.

Every attribute of an input op is one of two kinds (attribute_reader.py tells them apart):

* the op's own (inherent) attributes -- `comparison_direction`, `sym_name`, `backend_config` --
  which the dialect's verifier checks (for the `check` dialect, Python-declared, the op's
  declaration below), and
* discardable ones, which no verifier checks and which MLIR's own lowerings may hand on:
  convert-func-to-llvm copies a function's discardable attributes onto its `llvm.func`, where
  `passthrough = [["probe-stack", "abort"]]` makes LLVM call libc's `abort` in the prologue and
  an integer `CConv` or `linkage` crashes LLVM.

A discardable attribute is kept only when it is on `ACCEPTED` below, at a place the table
allows and with a value of the kind it names: the metadata JAX exports, HLO import and
Kiln's own front ends write, gathered from what they emit (jax/_src/interpreters/mlir.py, the
StableHLO testdata, frontend/hlo) and from what Kiln reads. Anything else is, by class:

* dropped when its namespace is one of XLA's metadata producers (`mhlo.`, `jax.`, `tf.`,
  `xla.`, `sdy.`): exporters add such annotations with every release (Shardy's, TF's
  function names...), Kiln reads none that is not on the table, and refusing them would
  refuse programs that compile and run correctly without them. Dropped, nothing can pass it
  on to LLVM. The compile has no channel for notes back to the caller (it runs in a worker),
  so the drop is silent; `exe.ir()` and the dumps show the module without it.

Names and strings (attribute names, symbol names, string values, dictionary keys) must be
UTF-8: Kiln reads them, and the bindings fail on other bytes.
* refused with a located KilnError otherwise: attributes without a dialect prefix (which is
  exactly what LLVM's function attributes look like to func-to-llvm: `passthrough`, `CConv`,
  `linkage`, `personality`, `section`...), `llvm.*`, Kiln's internal `kiln.*` ones (set by one
  lowering for a later one, which trusts them) and every other namespace. These steer code
  generation or mean something Kiln does not know, so the program is refused rather than
  compiled differently from what it asks.

An op's own attributes that steer LLVM are refused the same way (`no_inline` on func.func,
argument attributes on func.call).
"""
from __future__ import annotations

import json
import math
import typing
from dataclasses import dataclass
from typing import Callable

from torch_mlir import ir
from torch_mlir.dialects import ext

from ..dialects import check as check_dialect
from ..dialects import kiln as names
from ..dialects import sdy
from ..errors import KilnError
from . import attribute_reader as reader

# Where a discardable attribute may sit. Ops are named as themselves; a custom call also as
# `stablehlo.custom_call @TARGET`.
MODULE = "builtin.module"
FUNCTION = "func.func"
CUSTOM_CALL = "stablehlo.custom_call"
ARGUMENT = "argument"            # an entry of a func.func's arg_attrs
RESULT = "result"                # an entry of a func.func's res_attrs
ANY_OP = "any op"                # any op of the program (module and functions included)
SHAPE_ASSERTION = CUSTOM_CALL + " @shape_assertion"
# The front end writes newer StableHLO's collective_broadcast with a dynamic root as this
# custom call (frontend/newer.py), keeping the op's replica_groups and channel_handle.
DYNAMIC_BROADCAST_TARGET = "kiln.collective.collective_broadcast_dynamic"
DYNAMIC_BROADCAST = f"{CUSTOM_CALL} @{DYNAMIC_BROADCAST_TARGET}"
# The JAX reader writes a shard_map body's bounds as these custom calls, each carrying its
# sharding as `kiln.sharding` (dialects/sdy.py's lower_shardy), for kiln-spmd-partition.
SPMD_MARKERS = (sdy.TO_LOCAL, sdy.TO_GLOBAL)
SPMD_MARKER_PLACES = tuple(f"{CUSTOM_CALL} @{target}" for target in SPMD_MARKERS)
# MHLO ops StableHLO lacks, as MHLO -> StableHLO legalization writes them (torch_xla,
# TensorFlow): custom calls whose `mhlo.attributes` lowering/legalize/mhlo_targets.py reads.
MHLO_OP_CALLS = tuple(f"{CUSTOM_CALL} @mhlo.{op}" for op in (
    "erf", "acos", "acosh", "asin", "asinh", "atanh", "cosh", "sinh", "tan", "topk"))


@dataclass(frozen=True)
class Accepted:
    """A discardable attribute Kiln keeps: what its value must be and where it may sit."""
    kind: str                                   # the value's kind, for messages
    holds: Callable[[int], bool]                # whether a value (a C API handle) is of it
    places: frozenset[str]


def is_a(kind: type, attr) -> bool:
    """Whether `attr` (an attribute or type) is a `kind`: the bindings' casting constructors
    are their isinstance. Only for values the allowlist passed (see attribute_reader.py)."""
    try:
        kind(attr)
        return True
    except (ValueError, TypeError):
        return False


def _of(kind: str, text: str):
    return text, lambda value: reader.is_kind(value, kind)


_STRING = _of("String", "a string")
_INTEGER = _of("Integer", "an integer")
_BOOL = _of("Bool", "a bool")
_DICT = ("a dictionary of plain values (strings, numbers, arrays, integer or real elements)",
         lambda value: reader.is_kind(value, "Dictionary") and reader.is_plain(value))
_I32_ARRAY = _of("DenseI32Array", "an array<i32: ...>")
_FLAG = ("a bool or unit attribute",
         lambda value: reader.is_kind(value, "Bool") or reader.is_kind(value, "Unit"))
_GROUPS = ("a 2-D integer tensor", lambda value: reader.is_kind(value, "DenseIntElements")
           and reader.rank(value) == 2)
_CHANNEL = ("a #stablehlo.channel_handle", reader.is_channel_handle)
_RNG_ALGORITHM = ("a #stablehlo<rng_algorithm ...>", reader.is_rng_algorithm)
_INDICES = ("a 1-D integer tensor", lambda value: reader.is_kind(value, "DenseIntElements")
            and reader.rank(value) == 1)


def _is_sharding(value: int) -> bool:
    """A sharding as python/kiln/distributed/sharding.py writes it: {"tiles": [positive
    ints], "devices": [device ids]}, the devices filling the tiles a whole number of times."""
    if not reader.is_kind(value, "String"):
        return False
    try:
        data = json.loads(reader.string(value))
        tiles, devices = data["tiles"], data["devices"]
    except (ValueError, TypeError, KeyError, UnicodeDecodeError):
        return False
    if not (isinstance(tiles, list) and isinstance(devices, list) and devices
            and all(type(t) is int and 1 <= t <= len(devices) for t in tiles)
            and all(type(d) is int and 0 <= d < 1 << 31 for d in devices)):
        return False
    return len(devices) % math.prod(tiles) == 0


_SHARDING = ('a sharding (JSON: {"tiles": [...], "devices": [...]})', _is_sharding)


def _accepted(kind, *places) -> Accepted:
    return Accepted(kind[0], kind[1], frozenset(places))


ACCEPTED: dict[str, Accepted] = {
    # JAX exports (jax/_src/interpreters/mlir.py: module, function, argument/result attributes)
    "mhlo.num_partitions": _accepted(_INTEGER, MODULE),
    "mhlo.num_replicas": _accepted(_INTEGER, MODULE),
    "jax.uses_shape_polymorphism": _accepted(_BOOL, MODULE, FUNCTION),
    "mhlo.sharding": _accepted(_STRING, ARGUMENT, RESULT, ANY_OP),
    "mhlo.frontend_attributes": _accepted(_DICT, ARGUMENT, RESULT, ANY_OP),
    "mhlo.backend_config": _accepted(_DICT, CUSTOM_CALL),   # typed-FFI attributes
    "mhlo.layout_mode": _accepted(_STRING, ARGUMENT, RESULT),
    "mhlo.memory_kind": _accepted(_STRING, ARGUMENT, RESULT),
    "mhlo.is_same_data_across_replicas": _accepted(_FLAG, ARGUMENT),
    "jax.result_info": _accepted(_STRING, RESULT),
    "jax.arg_info": _accepted(_STRING, ARGUMENT),           # older exports
    "jax.buffer_donor": _accepted(_BOOL, ARGUMENT),
    "jax.global_constant": _accepted(_STRING, ARGUMENT),    # a dimension variable's argument
    "jax.token": _accepted(_BOOL, ARGUMENT, RESULT),
    "jax.const": _accepted(_BOOL, ARGUMENT),
    "tf.aliasing_output": _accepted(_INTEGER, ARGUMENT),
    "error_message": _accepted(_STRING, SHAPE_ASSERTION),   # JAX's message, {0}-style
    "replica_groups": _accepted(_GROUPS, DYNAMIC_BROADCAST),
    "mhlo.attributes": _accepted(_DICT, *MHLO_OP_CALLS),
    "mhlo.version": _accepted(_INTEGER, *MHLO_OP_CALLS),
    "channel_handle": _accepted(_CHANNEL, DYNAMIC_BROADCAST),
    # JAX's shape-polymorphic custom calls (mlir.custom_call with result shapes computed at
    # run time): which operands hold the result shapes; kiln-lower-jax-custom-calls reads the
    # dynamic rng's algorithm.
    "indices_of_shape_operands": _accepted(_INDICES, CUSTOM_CALL),
    "rng_algorithm": _accepted(_RNG_ALGORITHM, f"{CUSTOM_CALL} @stablehlo.dynamic_rng_bit_generator"),
    # XLA's HLO -> MHLO import (torch_xla, TensorFlow) writes, on an op whose result layout
    # is not the default, that layout (a minor-to-major permutation) and its HLO shape;
    # neither changes the values, and Kiln chooses its own layouts.
    "result_layout": _accepted(_INDICES, ANY_OP),
    "xla_shape": _accepted(_STRING, ANY_OP),
    # Kiln's front ends (dialects/kiln.py): HLO import and the JAX export reader
    names.LAYOUT: _accepted(_STRING, ARGUMENT, RESULT),
    names.OPERAND_TREE: _accepted(_I32_ARRAY, CUSTOM_CALL),
    names.RESULT_TREE: _accepted(_I32_ARRAY, CUSTOM_CALL),
    names.FUSION_KIND: _accepted(_STRING, ANY_OP),
    names.HLO_MODULE: _accepted(_STRING, MODULE),
    names.NUM_PARTITIONS: _accepted(_INTEGER, MODULE),
    names.REPLICA_COUNT: _accepted(_INTEGER, MODULE),
    names.SHARDING: _accepted(_SHARDING, ARGUMENT, RESULT, *SPMD_MARKER_PLACES),
    names.JAX_INFO: _accepted(_STRING, MODULE),
}

# Namespaces of XLA's metadata producers: their attributes not on the table are dropped.
DROPPED_NAMESPACES = ("mhlo.", "jax.", "tf.", "xla.", "sdy.")

# Inherent attributes that steer LLVM rather than say what the program computes: func-to-llvm
# hands them on (a call's argument attributes become LLVM call-site attributes).
_STEERING_INHERENT = {FUNCTION: frozenset({"no_inline"}),
                      "func.call": frozenset({"no_inline", "arg_attrs", "res_attrs"})}


def _declared_attributes(op_class) -> frozenset[str]:
    """The attributes a `check` op declares (dialects/check.py): its non-operand fields and
    its optional attributes."""
    fields = {name for name, kind in op_class.__annotations__.items()
              if typing.get_origin(kind) not in (ext.Operand, ext.Result)}
    return frozenset(fields | set(op_class.OPTIONAL))


_CHECK_OPS = {name: _declared_attributes(cls) for name, cls in check_dialect.OPS.items()}


def text(attr: ir.Attribute, op: ir.Operation, what: str) -> str:
    """A string attribute's value (one check_op_attributes passed: a string, UTF-8)."""
    try:
        return ir.StringAttr(attr).value_bytes.decode("utf-8")
    except (UnicodeDecodeError, ValueError):
        raise KilnError(f"{what} of '{op.name}' must be a UTF-8 string, not {attr}",
                        location=str(op.location)) from None


def describe(op: ir.Operation) -> str:
    """`op` in messages: `@name` for symbols (check_op_attributes passed), else its op name."""
    if "sym_name" in op.attributes:
        return "@" + text(op.attributes["sym_name"], op, "the symbol name")
    return f"'{op.name}'"


def _decision(name: str, value: int, places: tuple[str, ...], op: ir.Operation,
              where: str) -> bool:
    """True to keep `name` (its value the C API handle `value`), False to drop it; raises
    when the input is refused."""
    accepted = ACCEPTED.get(name)
    if accepted is not None and not accepted.places.isdisjoint(places):
        if not accepted.holds(value):
            raise KilnError(f"attribute '{name}' on {where} must be {accepted.kind}",
                            location=str(op.location), hint="fix or remove the attribute")
        return True
    if name.startswith(DROPPED_NAMESPACES):
        return False
    raise KilnError(f"attribute '{name}' on {where} is not allowed in an input program",
                    location=str(op.location), hint=_refusal_hint(name))


def _refusal_hint(name: str) -> str:
    if name.startswith("llvm.") or "." not in name:
        return ("attributes without a dialect prefix and `llvm.*` ones would steer LLVM's code "
                "generation (function attributes such as `passthrough` or `CConv`); remove it")
    if name.startswith(names.PREFIX):
        return "Kiln's internal `kiln.*` attributes are set by its lowerings only; remove it"
    return ("Kiln keeps the metadata JAX, XLA and its own front ends write (docs/guides/trust.md "
            "lists it) and refuses other attributes; remove it")


# Attribute names known to be an op's own, and known not to be, by op name: an op's inherent
# attributes are fixed by its registration, so the C API is asked only about an op that has a
# name not seen before on that kind of op.
_inherent: dict[str, set[str]] = {}
_not_inherent: dict[str, set[str]] = {}


def _discardable(read: reader.Attributes, op_name: str) -> list[str | None]:
    present = read.names
    own, other = _inherent.setdefault(op_name, set()), _not_inherent.setdefault(op_name, set())
    if all(n in own or n in other for n in present):
        return [n for n in present if n in other]
    found = read.discardable()
    if None not in present:
        other.update(found)
        own.update(n for n in present if n not in other)
    return found


def check_op_attributes(op: ir.Operation, op_name: str, places: tuple[str, ...] = (),
                        names_read: dict | None = None) -> None:
    """Refuse or drop the discardable attributes of `op` (named `op_name`) per the table (see
    the module doc), and refuse names and strings that are not UTF-8. `places`: more names
    for where `op` is (a custom call's `stablehlo.custom_call @TARGET`); `names_read`: a
    dictionary shared by the calls on one module (the attribute names read so far).

    Called on every op of a program: one pass over its attributes through the C API (no
    value reaches the bindings), which is asked which are discardable only for kinds of op
    not seen with these attribute names before."""
    if not len(op.attributes):
        return
    read = reader.Attributes(op, names_read)
    if None in read.names:
        raise KilnError(f"an attribute name on '{op_name}' is not valid UTF-8",
                        location=str(op.location), hint="names and strings must be UTF-8")
    for name, value in zip(read.names, read.values):
        bad = reader.first_bad_string(value)
        if bad is not None:
            raise KilnError(f"attribute '{name}' of '{op_name}' holds a string that is not "
                            f"valid UTF-8: {bad[:80]!r}", location=str(op.location),
                            hint="names and strings must be UTF-8")
    if op_name in _CHECK_OPS:  # IRDL ops: every attribute is discardable to MLIR
        extra = [n for n in read.names if n not in _CHECK_OPS[op_name]]
    else:
        extra = _discardable(read, op_name)
        for name in _STEERING_INHERENT.get(op_name, ()):
            if name in read.names and name not in extra:
                raise KilnError(f"attribute '{name}' on {describe(op)} is not allowed in an "
                                f"input program", location=str(op.location),
                                hint="it steers LLVM's code generation; remove it")
    if not extra:
        return
    where = describe(op)
    dropped = [name for name in extra
               if not _decision(name, read.value(name), (op_name, ANY_OP, *places), op, where)]
    for name in dropped:
        del op.attributes[name]


def check_value_attributes(func: ir.Operation) -> None:
    """The same for a function's per-argument and per-result attribute dictionaries (their
    strings were checked with the function's attributes)."""
    read = reader.Attributes(func)
    for key, place in (("arg_attrs", ARGUMENT), ("res_attrs", RESULT)):
        if key not in read.names:
            continue
        entries, changed = [], False
        for index, entry in enumerate(reader.array_elements(read.value(key))):
            where = f"{place} {index} of {describe(func)}"
            kept = [name for name, value in reader.dictionary_entries(entry)
                    if _decision(name, value, (place,), func, where)]
            changed |= len(kept) != len(reader.dictionary_entries(entry))
            entries.append(kept)
        if changed:
            old = ir.ArrayAttr(func.attributes[key])
            func.attributes[key] = ir.ArrayAttr.get([
                ir.DictAttr.get({name: ir.DictAttr(old[i])[name] for name in kept})
                for i, kept in enumerate(entries)])
