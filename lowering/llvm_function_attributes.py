"""The attributes an `llvm.func` of Kiln's lowered module may carry: what Kiln's own passes and
MLIR's conversions (func-to-llvm, the C-interface wrappers) set, and nothing else.

LLVM function attributes decide code the program never asked for: `passthrough` entries
become LLVM attributes (`"probe-stack"="abort"` calls `abort` in every prologue), `personality`
and `garbage_collector` name functions LLVM calls, `section` places code, `CConv` and
`linkage` change how it is called and linked. The input check (input_allowlist.py) keeps
them out of a program; this table checks the result, just before LLVM sees it (trust.py's
`check_lowered`), so that a lowering bug or a scripted pipeline cannot let one through.
"""
from __future__ import annotations

from torch_mlir import ir

from ..dialects import kiln as names
from ..errors import KilnError
from . import attribute_reader as reader
from .input_allowlist import ACCEPTED, is_a

# Inherent attributes of llvm.func whose every value Kiln may set: names and types, and the
# per-argument/result dictionaries (checked entry by entry below).
_ANY_VALUE = frozenset({"sym_name", "function_type", "sym_visibility", "arg_attrs", "res_attrs"})

# Inherent attributes whose value must be one of these (as MLIR prints them).
_VALUES = {
    "linkage": frozenset({"#llvm.linkage<external>", "#llvm.linkage<internal>",
                          "#llvm.linkage<private>"}),
    "CConv": frozenset({"#llvm.cconv<ccc>"}),
    "visibility_": frozenset({"0 : i64"}),
    "unnamed_addr": frozenset({"0 : i64"}),
    "no_unwind": frozenset({"unit"}),
    "always_inline": frozenset({"unit"}),  # the entry, into its C interface (codegen/c_interface.py)
    # convert-math-to-libm's declarations of the C library's math functions (erff, acoshf...)
    "memory_effects": frozenset({"#llvm.memory_effects<other = none, argMem = none, "
                                 "inaccessibleMem = none, errnoMem = none, targetMem0 = none, "
                                 "targetMem1 = none>"}),
}

# LLVM function attributes (passthrough entries) Kiln's codegen sets: codegen/fastmath.py and
# codegen/parallel.py ask for 512-bit vectors.
PASSTHROUGH = frozenset({('"prefer-vector-width"', '"512"')})  # as MLIR prints them

# Discardable attributes: the C-interface request and the passthrough list as Kiln's passes
# put them on func.func (func-to-llvm copies them), and the linkage builders.py requests.
_DISCARDABLE_LLVM = {
    "llvm.emit_c_interface": frozenset({"unit"}),
    "llvm.linkage": frozenset({"#llvm.linkage<internal>"}),
    "llvm.readnone": frozenset({"unit"}),  # convert-math-to-libm's declarations
}
_PASSTHROUGH_NAMES = ("passthrough", "llvm.passthrough")

# A GPU kernel's marks, as Kiln's kernel outlining and MLIR's gpu-to-nvvm conversion set them
# (lowering/gpu/): the device code's launch bounds, by kind of value.
_DEVICE_DISCARDABLE = {"gpu.kernel": "Unit", "nvvm.kernel": "Unit",
                       "gpu.known_block_size": "DenseI32Array",
                       "gpu.known_grid_size": "DenseI32Array",
                       "nvvm.maxntid": "DenseI32Array", "nvvm.reqntid": "DenseI32Array"}


def check_device_function_attributes(func: ir.Operation) -> None:
    """check_function_attributes for an llvm.func of a GPU kernel module (lowering/gpu/
    ptx.py, before LLVM IR is made of it): the same table, and the kernels' launch marks."""
    check_function_attributes(func, _DEVICE_DISCARDABLE)


def check_function_attributes(func: ir.Operation, marks: dict[str, str] | None = None) -> None:
    """Every attribute of the llvm.func `func` must be one Kiln sets (see the module doc);
    `marks`: more discardable attributes allowed, by the kind of their value."""
    read = reader.Attributes(func)
    for name, kind in (marks or {}).items():
        if name in read.names and not reader.is_kind(read.value(name), kind):
            _refuse(func, name, "a value that is not " + kind)
    discardable = set(read.discardable())
    for i in range(len(func.attributes)):
        named = func.attributes[i]
        name, value = named.name, named.attr
        if marks and name in marks and name in discardable:
            continue  # its kind was checked above
        if name in _PASSTHROUGH_NAMES:
            _check_passthrough(func, name, value)
        elif name in discardable:
            allowed = _DISCARDABLE_LLVM.get(name)
            if allowed is not None:
                if str(value) not in allowed:
                    _refuse(func, name, value)
            elif name.startswith("llvm.") or not (name.startswith(names.PREFIX)
                                                  or name in ACCEPTED):
                _refuse(func, name, value)
        elif name in ("arg_attrs", "res_attrs"):
            _check_value_attributes(func, name, value)
        elif name not in _ANY_VALUE and str(value) not in _VALUES.get(name, ()):
            _refuse(func, name, value)


def _check_passthrough(func: ir.Operation, name: str, value: ir.Attribute) -> None:
    if not is_a(ir.ArrayAttr, value):
        _refuse(func, name, value)
    for entry in ir.ArrayAttr(value):
        pair = tuple(str(s) for s in ir.ArrayAttr(entry)) \
            if is_a(ir.ArrayAttr, entry) else None
        if pair not in PASSTHROUGH:
            _refuse(func, f"{name} entry", entry)


def _check_value_attributes(func: ir.Operation, key: str, value: ir.Attribute) -> None:
    """Argument and result attributes: the input's metadata that survived (vetted at the
    input check, and not LLVM's: translation ignores them) and Kiln's own; no `llvm.*`
    parameter attribute, which Kiln's passes do not set."""
    for entry in ir.ArrayAttr(value):
        entry = ir.DictAttr(entry)
        for i in range(len(entry)):
            name = entry[i].name
            if not (name in ACCEPTED or name.startswith(names.PREFIX)):
                _refuse(func, f"{key} entry '{name}'", entry[i].attr)


def _refuse(func: ir.Operation, what: str, value) -> None:
    raise KilnError(f"the lowered function @{ir.StringAttr(func.attributes['sym_name']).value} "
                    f"carries LLVM attribute {what} = {value}, which Kiln's passes do not set",
                    location=str(func.location),
                    hint="internal error: an attribute reached LLVM that Kiln did not put "
                         "there; please report it with the program")
