"""Layout assignment and layout normalization on the entry function (XLA's LayoutAssignment
and LayoutNormalization, seed 002).

Inside a Kiln program every value is a logical tensor, and Kiln's code generation stores every
array in the descending (row-major) layout. Only the entry's parameters and results can be
asked to live in another layout: the HLO importer records the entry computation layout as
`kiln.layout` (e.g. "{0,1}", "{1,0:T(2,128)}"), a JAX export as `mhlo.layout_mode`.

- `kiln-layout-assignment` decides each entry parameter's and result's layout: the one asked
  for, or the default ("default" and "auto" layout modes; XLA:CPU's choice too). It checks
  what was asked for (its rank, a permutation, valid tiles, static shapes for tiled layouts)
  and records the decision as a canonical `kiln.layout`.
- `kiln-layout-normalization` makes every non-default entry layout explicit: such a
  parameter becomes its *physical* array (the buffer's elements, padding included, as a
  row-major tensor: transposed, and tiled as pad/reshape/transpose), converted to the logical
  value at the top of the body; such a result is converted back before the return. From then
  on the whole program works in the descending layout, and `kiln.layout` says so.

The physical array, and the steps between it and the logical one, come from kiln.layout
(`Layout.to_physical_steps`); the runtime converts numpy arrays with the same steps
(driver/executable.py), so both sides agree on every buffer.
"""
from __future__ import annotations

from torch_mlir import ir

from ..dialects import kiln as names
from ..errors import KilnError
from ..layout import Layout, Pad, Reshape, Slice, Transpose
from .ir_util import body_block, find_entry, function_type
from .legalize.hlo_builder import HloBuilder

LAYOUT_MODE = "mhlo.layout_mode"          # JAX's per-argument/result layout request
_AUTOMATIC_MODES = ("default", "auto")     # Kiln (like XLA:CPU) picks the descending layout


def requested_layout(attrs: dict[str, ir.Attribute], type_: ir.Type, what: str,
                     where: str | None = None) -> Layout | None:
    """The layout an entry parameter or result asks for through `kiln.layout` (which wins) or
    an explicit `mhlo.layout_mode`; None when it asks for none, for an automatic one, or is
    no ranked tensor (tokens). A layout that does not fit the type is a located KilnError."""
    text = None
    for key in (names.LAYOUT, LAYOUT_MODE):
        if key in attrs and isinstance(attrs[key], ir.StringAttr):
            value = ir.StringAttr(attrs[key]).value.strip()
            if value and value not in _AUTOMATIC_MODES:
                text = value
                break
    if text is None or not isinstance(type_, ir.RankedTensorType):
        return None
    try:
        layout = Layout.parse(text)
    except KilnError as exc:
        raise KilnError(f"{what}: bad layout '{text}': {exc.message}", location=where,
                        hint="a layout is written as in HLO: {minor_to_major[:T(tile)...]}, "
                             "e.g. {0,1} or {1,0:T(8,128)}") from None
    dims = list(ir.RankedTensorType(type_).shape)
    if sorted(layout.minor_to_major) != list(range(len(dims))):
        raise KilnError(f"{what}: layout {layout} does not order the {len(dims)} dimensions of "
                        f"{type_}", location=where,
                        hint="minor_to_major must list every dimension number exactly once")
    if layout.tiles or layout.tail_padding_alignment_in_elements > 1:
        if not ir.RankedTensorType(type_).has_static_shape:
            raise KilnError(f"{what}: the tiled layout {layout} needs a static shape, not "
                            f"{type_}", location=where,
                            hint="tile padding depends on the dimension sizes")
        try:
            layout.physical_dims(dims)
        except KilnError as exc:
            raise KilnError(f"{what}: layout {layout} cannot tile {type_}: {exc.message}",
                            location=where) from None
    return layout


def _attr_dicts(func: ir.Operation, key: str, count: int) -> list[dict[str, ir.Attribute]]:
    if key not in func.attributes:
        return [{} for _ in range(count)]
    return [{a.name: a.attr for a in ir.DictAttr(d)} for d in ir.ArrayAttr(func.attributes[key])]


def _set_attr_dicts(func: ir.Operation, key: str, dicts: list[dict[str, ir.Attribute]]) -> None:
    func.attributes[key] = ir.ArrayAttr.get([ir.DictAttr.get(d) for d in dicts])


def _entry_values(func: ir.Operation):
    """(key, index, attribute dict, type, description) of every entry parameter and result."""
    ftype = function_type(func)
    name = ir.StringAttr(func.attributes["sym_name"]).value
    args = _attr_dicts(func, "arg_attrs", len(ftype.inputs))
    results = _attr_dicts(func, "res_attrs", len(ftype.results))
    for i, (attrs, t) in enumerate(zip(args, ftype.inputs)):
        yield "arg_attrs", i, attrs, t, f"argument {i} of @{name}"
    for i, (attrs, t) in enumerate(zip(results, ftype.results)):
        yield "res_attrs", i, attrs, t, f"result {i} of @{name}"


# -- layout-assignment ---------------------------------------------------------------------------
def assign_layouts(module: ir.Module, entry: str | None) -> None:
    """Decide the layout of every entry parameter and result: the one asked for (checked),
    or the default. A decided non-default layout is recorded as a canonical `kiln.layout`;
    an explicit `mhlo.layout_mode` is replaced by it."""
    func = find_entry(module, entry)
    where = str(func.location)
    dicts = {"arg_attrs": _attr_dicts(func, "arg_attrs", len(function_type(func).inputs)),
             "res_attrs": _attr_dicts(func, "res_attrs", len(function_type(func).results))}
    changed = False
    for key, i, attrs, type_, what in _entry_values(func):
        layout = requested_layout(attrs, type_, what, where)
        if layout is None:
            continue
        canonical = ir.StringAttr.get(str(layout))
        updated = dict(attrs)
        updated[names.LAYOUT] = canonical
        if LAYOUT_MODE in updated:
            del updated[LAYOUT_MODE]
        if updated != attrs:
            dicts[key][i] = updated
            changed = True
    if changed:
        for key, values in dicts.items():
            if any(values) or key in func.attributes:
                _set_attr_dicts(func, key, values)


# -- layout-normalization ------------------------------------------------------------------------
def normalize_layouts(module: ir.Module, entry: str | None) -> None:
    """Rewrite every entry parameter and result whose layout does not store it row-major as
    its physical array (descending layout), converting to and from the logical value inside
    the body."""
    func = find_entry(module, entry)
    if not len(func.regions[0].blocks):
        return
    where = str(func.location)
    block = body_block(func)
    ret = block.operations[len(block.operations) - 1].operation
    body_start = block.operations[0].operation  # conversions of arguments go before it
    dicts = {"arg_attrs": _attr_dicts(func, "arg_attrs", len(block.arguments)),
             "res_attrs": _attr_dicts(func, "res_attrs", len(ret.operands))}
    changed = False
    for key, i, attrs, type_, what in list(_entry_values(func)):
        layout = requested_layout(attrs, type_, what, where)
        dims = list(ir.RankedTensorType(type_).shape) if layout is not None else []
        if layout is None or layout.stores_row_major(dims):
            continue
        if key == "arg_attrs":
            _physical_argument(block.arguments[i], body_start, layout, dims)
        else:
            _physical_result(ret, i, layout, dims)
        updated = dict(attrs)
        updated[names.LAYOUT] = ir.StringAttr.get(str(Layout.default(len(layout.physical_dims(dims)))))
        dicts[key][i] = updated
        changed = True
    if not changed:
        return
    func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
        [a.type for a in block.arguments], [v.type for v in ret.operands]))
    for key, values in dicts.items():
        _set_attr_dicts(func, key, values)


def _physical_argument(arg: ir.BlockArgument, body_start: ir.Operation, layout: Layout,
                       dims: list[int]) -> None:
    """The argument becomes the physical array; its users get the logical value."""
    element = ir.RankedTensorType(arg.type).element_type
    with ir.InsertionPoint(body_start), arg.location:
        arg.set_type(ir.RankedTensorType.get(layout.physical_dims(dims), element))
        value, made = _run(arg, layout.to_logical_steps(dims))
    if made:  # (a permutation of size-1 dimensions moves nothing)
        arg.replace_all_uses_except(value, made)


def _physical_result(ret: ir.Operation, index: int, layout: Layout, dims: list[int]) -> None:
    """Result `index` is returned as the physical array of the logical value."""
    with ir.InsertionPoint(ret), ret.location:
        value, _ = _run(ret.operands[index], layout.to_physical_steps(dims))
    ret.operands[index] = value


def _run(value: ir.Value, steps) -> tuple[ir.Value, list[ir.Operation]]:
    """Build `steps` (kiln.layout's Transpose/Reshape/Pad/Slice) on `value` as StableHLO;
    returns the last value and the ops made, first to last."""
    h = HloBuilder()
    made: list[ir.Operation] = []
    for step in steps:
        if isinstance(step, Transpose):
            value = h.transpose(value, step.permutation)
        elif isinstance(step, Reshape):
            value = h.reshape(value, step.shape)
        elif isinstance(step, Pad):
            zero = _zero(h, ir.RankedTensorType(value.type).element_type, made)
            value = h.pad(value, zero, [0] * len(step.high), step.high)
        elif isinstance(step, Slice):
            value = h.slice(value, [0] * len(step.limits), step.limits)
        made.append(value.owner.operation)
    return value, made


def _zero(h: HloBuilder, element: ir.Type, made: list[ir.Operation]) -> ir.Value:
    """A 0-d zero of any element type: the padding value (padding holds no particular
    value; zero keeps buffers deterministic)."""
    if isinstance(element, ir.ComplexType):
        part = _zero(h, ir.ComplexType(element).element_type, made)
        value = h.complex(part, part)
    else:
        scalar = ir.RankedTensorType.get([], element)
        if isinstance(element, ir.IntegerType):
            attr = ir.IntegerAttr.get(element, 0)
        else:
            attr = ir.FloatAttr.get(element, 0.0)
        value = h.op("stablehlo.constant", [], [], element,
                     value=ir.DenseElementsAttr.get_splat(scalar, attr))
    made.append(value.owner.operation)
    return value
