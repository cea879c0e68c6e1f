"""Shardy (`sdy`): JAX's sharding annotations, which Kiln (one device) drops.

Shardy cannot be declared with the bindings' Python-defined dialects (ext/IRDL), so Kiln's
contexts do not register it and an `sdy` op in Kiln's own parse is an unknown-op error:
- IRDL ops have the generic syntax only, and JAX prints `sdy.mesh @mesh = <["x"=2]>`,
  `sdy.sharding_constraint %0 <@mesh, [{}, {"y"}]> : T` in custom form;
- an IRDL attribute's parameters must each be an attribute: `#sdy.sharding<@mesh, [{"x"}, {}]>`
  happens to parse (`{"x"}` reads as a dictionary), but `{"x", ?}` (open dimensions),
  `{"x":(1)2}` (sub-axes), `replicated={"y"}`, `#sdy.mesh<["x"=2, "y"=2]>` and
  `#sdy.op_sharding_rule<([i, j])->([i, j]) {i=2, j=2}>` do not;
- IRDL names ops and attributes in one symbol table: op `sdy.mesh` and attribute
  `#sdy.mesh` cannot both be declared.
So an export carrying Shardy is read by jaxlib, which registers it (frontend/jax_export.py),
and strip_shardy drops the annotations there, in jaxlib's context, before the module is printed
for Kiln. It uses only the generic operation API, so it works on either binding's IR. What an
unknown `sdy` op in Kiln's own parse reports is in diagnostics.py.
"""
from __future__ import annotations

NAMESPACE = "sdy"
PREFIX = "sdy."


def strip_shardy(module, ir) -> None:
    """Drop every `sdy.*` attribute (of ops, function arguments and results), Shardy's symbols
    at module level (`sdy.mesh`) and `sdy.sharding_constraint` (its result is its operand):
    Kiln runs one device. `ir` is the bindings' ir module that `module` belongs to."""
    top = module.operation
    for op in [top, *_nested(top)]:
        for name in [n for n in _names(op.attributes) if n.startswith(PREFIX)]:
            del op.attributes[name]
        for key in ("arg_attrs", "res_attrs"):
            if key in op.attributes:
                op.attributes[key] = _without_shardy(ir.ArrayAttr(op.attributes[key]), ir)
        if op.name == "sdy.sharding_constraint":
            op.results[0].replace_all_uses_with(op.operands[0])
    for op in list(_nested(top)):
        if op.name == "sdy.sharding_constraint" or (op.name.startswith(PREFIX)
                                                    and op.parent.name == "builtin.module"):
            op.erase()


def _without_shardy(per_value, ir):
    """A function's `arg_attrs`/`res_attrs` without their `sdy.*` entries."""
    kept = []
    for attrs in per_value:
        attrs = ir.DictAttr(attrs)
        kept.append(ir.DictAttr.get({attrs[i].name: attrs[i].attr for i in range(len(attrs))
                                     if not attrs[i].name.startswith(PREFIX)}))
    return ir.ArrayAttr.get(kept)


def _names(attributes) -> list[str]:
    return [attributes[i].name for i in range(len(attributes))]


def has_shardy(module) -> bool:
    top = module.operation
    return any(op.name.startswith(PREFIX) or any(n.startswith(PREFIX) for n in _names(op.attributes))
               for op in [top, *_nested(top)])


def _nested(op):
    """Every operation nested in `op`, parents before their children."""
    for region in op.regions:
        for block in region:
            for child in block:
                yield child.operation
                yield from _nested(child.operation)
