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


# ---- several devices: Shardy's shardings in Kiln's form ----------------------------------------

SHARDING = "kiln.sharding"            # a value's sharding, python/kiln/distributed/sharding.py JSON
TO_LOCAL = "kiln.spmd.to_local"       # a device's shard of a global value
TO_GLOBAL = "kiln.spmd.to_global"     # the global value from every device's shard


def lower_shardy(module, ir) -> None:
    """Turn Shardy's annotations into Kiln's, in jaxlib's context (it registers `sdy`), before
    strip_shardy drops the rest: `sdy.sharding` of the entry's arguments and results becomes a
    `kiln.sharding` string; each `sdy.manual_computation` (a shard_map body) is inlined between
    `kiln.spmd.to_local` and `kiln.spmd.to_global` custom calls that carry its shardings,
    restricted to its manual axes (over the others the body is computed whole, on every
    device); `sdy.sharding_constraint` and `sdy.reshard` pass their operand through (Kiln
    computes values outside manual bodies whole). kiln-spmd-partition does the rest."""
    from jaxlib.mlir.dialects import sdy
    from ..distributed.sharding import from_sdy
    from ..errors import KilnError
    top = module.operation
    meshes = {}
    for op in top.regions[0].blocks[0]:
        if op.operation.name == "sdy.mesh":
            mesh = sdy.MeshAttr(op.operation.attributes["mesh"])
            meshes[ir.StringAttr(op.operation.attributes["sym_name"]).value] = (
                [(sdy.MeshAxisAttr(a).name, sdy.MeshAxisAttr(a).size) for a in mesh.axes],
                list(mesh.device_ids))

    def sharding_of(attr, what, manual_axes=None):
        s = sdy.TensorShardingAttr(attr)
        ref = s.mesh_or_ref
        if isinstance(ref, ir.FlatSymbolRefAttr) or str(ref).startswith("@"):
            axes, ids = meshes[str(ref).lstrip("@").strip('"')]
        else:
            mesh = sdy.MeshAttr(ref)
            axes = [(sdy.MeshAxisAttr(a).name, sdy.MeshAxisAttr(a).size) for a in mesh.axes]
            ids = list(mesh.device_ids)
        def names(axis_refs, kind):
            """The axes named (those of a shard_map's manual axes at its boundary)."""
            kept = []
            for a in axis_refs:
                ref_axis = sdy.AxisRefAttr(a)
                if ref_axis.sub_axis_info is not None:
                    raise KilnError(f"{what}: {kind} ({a}) are not supported yet")
                if manual_axes is None or ref_axis.name in manual_axes:
                    kept.append(ref_axis.name)
            return kept
        unreduced = names(s.unreduced_axes, "unreduced sub-axes")
        dims = [names(sdy.DimensionShardingAttr(d).axes, "sub-axis shardings")
                for d in s.dimension_shardings]
        return from_sdy(axes, ids, dims, what, unreduced).to_json()

    # Entry arguments and results.
    for op in _nested(top):
        if op.name != "func.func":
            continue
        for key in ("arg_attrs", "res_attrs"):
            if key not in op.attributes:
                continue
            updated = []
            for i, attrs in enumerate(ir.ArrayAttr(op.attributes[key])):
                attrs = ir.DictAttr(attrs)
                entries = {attrs[j].name: attrs[j].attr for j in range(len(attrs))}
                if "sdy.sharding" in entries:
                    what = f"{'argument' if key == 'arg_attrs' else 'result'} {i}"
                    entries[SHARDING] = ir.StringAttr.get(sharding_of(entries["sdy.sharding"], what))
                updated.append(ir.DictAttr.get(entries))
            op.attributes[key] = ir.ArrayAttr.get(updated)

    # shard_map bodies, innermost first (a body moves out of its op when inlined).
    while True:
        manual = [op for op in _nested(top) if op.name == "sdy.manual_computation"]
        if not manual:
            break
        _inline_manual(manual[-1], sharding_of, ir)
    for op in list(_nested(top)):
        if op.name in ("sdy.sharding_constraint", "sdy.reshard"):
            op.results[0].replace_all_uses_with(op.operands[0])
            op.erase()
    _results_keep_their_shards(top, ir)


def _results_keep_their_shards(top, ir) -> None:
    """The first step of propagation, for results the program leaves unannotated (jit without
    out_shardings): a result that is a shard_map output, or an argument returned as it is,
    keeps that value's sharding, as XLA's propagation gives it, instead of being gathered
    whole on every device."""
    for func in _nested(top):
        if func.name != "func.func" or "res_attrs" not in func.attributes:
            continue
        body = func.regions[0].blocks[0]
        returned = list(list(body)[-1].operation.operands)
        arg_attrs = list(ir.ArrayAttr(func.attributes["arg_attrs"])) \
            if "arg_attrs" in func.attributes else []
        updated = []
        for value, attrs in zip(returned, ir.ArrayAttr(func.attributes["res_attrs"])):
            attrs = ir.DictAttr(attrs)
            entries = {attrs[j].name: attrs[j].attr for j in range(len(attrs))}
            if SHARDING not in entries and "sdy.sharding" not in entries:
                found = _sharding_of_value(value, body, arg_attrs, ir)
                if found is not None:
                    entries[SHARDING] = found
            updated.append(ir.DictAttr.get(entries))
        func.attributes["res_attrs"] = ir.ArrayAttr.get(updated)


def _sharding_of_value(value, body, arg_attrs, ir):
    owner = value.owner
    if isinstance(owner, ir.Block):
        for i, arg in enumerate(body.arguments):
            if arg == value and i < len(arg_attrs):
                attrs = ir.DictAttr(arg_attrs[i])
                return attrs[SHARDING] if SHARDING in attrs else None
        return None
    op = owner.operation if hasattr(owner, "operation") else owner
    if op.name == "stablehlo.custom_call" and SHARDING in op.attributes and \
            ir.StringAttr(op.attributes["call_target_name"]).value == TO_GLOBAL:
        return op.attributes[SHARDING]
    return None


def _inline_manual(op, sharding_of, ir) -> None:
    import re
    manual_axes = set(re.findall(r'"([^"]+)"', str(op.attributes["manual_axes"])))
    ins = list(ir.ArrayAttr(_per_value(op.attributes["in_shardings"], ir)))
    outs = list(ir.ArrayAttr(_per_value(op.attributes["out_shardings"], ir)))
    block = op.regions[0].blocks[0]
    where = f"shard_map at {op.location}"
    with ir.InsertionPoint(op), op.location:
        for i, (arg, operand) in enumerate(zip(block.arguments, op.operands)):
            local = _marker(TO_LOCAL, operand, arg.type,
                            sharding_of(ins[i], f"{where}, input {i}", manual_axes), ir)
            arg.replace_all_uses_with(local)
        body = list(block)
        for inner in body[:-1]:
            inner.operation.move_before(op)
        returned = list(body[-1].operation.operands)
        for i, (result, value) in enumerate(zip(op.results, returned)):
            full = _marker(TO_GLOBAL, value, result.type,
                           sharding_of(outs[i], f"{where}, output {i}", manual_axes), ir)
            result.replace_all_uses_with(full)
    op.erase()


def _per_value(attr, ir):
    from jaxlib.mlir.dialects import sdy
    return ir.ArrayAttr.get(list(sdy.TensorShardingPerValueAttr(attr).shardings))


def _marker(target: str, value, result_type, sharding_json: str, ir):
    return ir.Operation.create(
        "stablehlo.custom_call", results=[result_type], operands=[value],
        attributes={"call_target_name": ir.StringAttr.get(target),
                    SHARDING: ir.StringAttr.get(sharding_json)}).result
