"""Lowerings: data_movement (see passes/legalize/__init__.py).

Kiln lowers the data-movement ops that upstream `stablehlo-legalize-to-linalg` lacks
(scatter, sort, select_and_scatter) into scf loops over tensors. The lowerings share the
machinery in this module:

* `Text` writes the loop nest as MLIR text for one helper function, which
  `replace_with_helper` parses in the module's context and splices in place of the op (by
  hand, not through a call: a call boundary would force identity-layout buffers and copies);
* an op's region (scatter's update computation, sort's comparator) appears in that text as
  a placeholder `"kiln.region"` op over 0-d tensors; `inline_regions` replaces it by a clone
  of the region's StableHLO body, which upstream then lowers like any other 0-d code;
* upstream turns each 0-d StableHLO op into a 0-d `linalg.generic`, which would allocate a
  buffer per loop iteration; `scalarize` (an `after` step) unwraps those generics into their
  scalar bodies inside the loops Kiln marked with `kiln.scalarize`.
"""
from __future__ import annotations

from torch_mlir import ir

from ...errors import KilnError
from ...pipeline import PyPass, Step
from ..ir_util import walk

SCALARIZE_ATTR = "kiln.scalarize"
REGION_MARKER = "kiln.region"


class Text:
    """A few lines of MLIR with fresh SSA names and cached index constants."""

    def __init__(self, prefix: str):
        self.lines: list[str] = []
        self.prefix = prefix
        self.count = 0
        self.constants: dict[int, str] = {}

    def fresh(self, hint: str = "v") -> str:
        self.count += 1
        return f"%{self.prefix}{hint}{self.count}"

    def emit(self, line: str) -> None:
        self.lines.append(line)

    def op(self, rhs: str, hint: str = "v") -> str:
        name = self.fresh(hint)
        self.emit(f"{name} = {rhs}")
        return name

    def apply_region(self, index: int, scalars: list[str], elements: list[str],
                     results: list[str]) -> list[str]:
        """Apply the lowered op's region `index` to scalar values: StableHLO bodies take and
        return 0-d tensors, so the scalars are wrapped and the results unwrapped. The
        `kiln.region` placeholder is replaced by the region's body (inline_regions)."""
        wrapped = [self.op(f"tensor.from_elements {v} : tensor<{e}>") for v, e in zip(scalars, elements)]
        out = self.fresh("region")
        many = len(results) > 1
        arg_types = ", ".join(f"tensor<{e}>" for e in elements)
        result_types = ", ".join(f"tensor<{e}>" for e in results)
        self.emit(f'{out}{f":{len(results)}" if many else ""} = "{REGION_MARKER}"({", ".join(wrapped)}) '
                  f"{{index = {index} : i64}} : ({arg_types}) -> ({result_types})")
        return [self.op(f"tensor.extract {out}{f'#{i}' if many else ''}[] : tensor<{e}>")
                for i, e in enumerate(results)]

    def index(self, value: int) -> str:
        # Constants live at the top of the helper so every nested loop can use them.
        if value not in self.constants:
            self.constants[value] = f"%{self.prefix}c{value}".replace("-", "m")
        return self.constants[value]

    def constant_lines(self) -> list[str]:
        return [f"{name} = arith.constant {value} : index" for value, name in self.constants.items()]

    # Index arithmetic helpers (all on `index`).
    def add(self, a: str, b: str) -> str:
        return self.op(f"arith.addi {a}, {b} : index")

    def mul(self, a: str, b: str) -> str:
        return self.op(f"arith.muli {a}, {b} : index")

    def delinearize(self, flat: str, shape: list[int]) -> list[str]:
        """Row-major coordinates of `flat` in `shape` (sizes-1 dims need no arithmetic)."""
        coords: list[str] = [""] * len(shape)
        rest = flat
        for d in reversed(range(len(shape))):
            if shape[d] == 1:
                coords[d] = self.index(0)
                continue
            if all(s == 1 for s in shape[:d]):
                coords[d] = rest
                rest = self.index(0)
                continue
            size = self.index(shape[d])
            coords[d] = self.op(f"arith.remui {rest}, {size} : index")
            rest = self.op(f"arith.divui {rest}, {size} : index")
        return coords

    def all_true(self, conditions: list[str]) -> str:
        if not conditions:
            return self.op("arith.constant true")
        result = conditions[0]
        for c in conditions[1:]:
            result = self.op(f"arith.andi {result}, {c} : i1")
        return result


def tensor_type(value: ir.Value, op: ir.Operation) -> ir.RankedTensorType:
    t = value.type
    if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape:
        raise KilnError(f"'{op.name}' on a dynamically shaped operand ({t}) is not supported",
                        location=str(op.location),
                        hint="give the program static shapes (or call it with concrete "
                             "arguments so Kiln can refine them)")
    return t


def dims_text(shape) -> str:
    return "x".join(str(d) for d in shape) + ("x" if len(shape) else "")


def type_text(shape, element) -> str:
    return f"tensor<{dims_text(shape)}{element}>"


def replace_with_helper(op: ir.Operation, text: str, operands: list[ir.Value],
                        regions: list[ir.Region] = ()) -> None:
    """Parse `text` (one func.func), fill its `kiln.region` placeholders from `regions`, and
    splice its body in place of `op` with its arguments bound to `operands`; op's results
    become the helper's returned values."""
    try:
        helper_module = ir.Module.parse(text, op.context)
    except ir.MLIRError as exc:  # a bug in Kiln's text generation, never the user's input
        raise KilnError(f"internal error lowering '{op.name}': generated IR does not parse: {exc}",
                        location=str(op.location), hint="please report this program") from None
    func = helper_module.body.operations[0].operation
    block = func.regions[0].blocks[0]
    inline_regions([o.operation for o in block.operations], list(regions))
    for arg, value in zip(block.arguments, operands):
        arg.replace_all_uses_with(value)
    ops = [o.operation for o in block.operations]
    for o in ops[:-1]:
        o.move_before(op)
    for result, value in zip(op.results, list(ops[-1].operands)):
        result.replace_all_uses_with(value)
    op.erase()


def inline_regions(ops: list[ir.Operation], regions: list[ir.Region]) -> None:
    """Replace every `kiln.region` placeholder among `ops` (and nested in them) by a clone of
    `regions[index]`'s single block, its arguments bound to the placeholder's operands."""
    markers = []
    for o in ops:
        if o.name == REGION_MARKER:
            markers.append(o)
        markers.extend(c for c in walk(o) if c.name == REGION_MARKER)
    for marker in markers:
        index = ir.IntegerAttr(marker.attributes["index"]).value
        clone_region_body(regions[index], marker)


def clone_region_body(region: ir.Region, marker: ir.Operation) -> None:
    if len(region.blocks) != 1:
        raise KilnError("regions with several blocks are not supported here",
                        location=str(marker.location), hint="use a single-block region")
    block = region.blocks[0]
    mapping: dict[ir.Value, ir.Value] = {}
    for arg, value in zip(block.arguments, marker.operands):
        if arg.type != value.type:
            raise KilnError(f"region argument of type {arg.type} where Kiln passes {value.type}",
                            location=str(marker.location),
                            hint="the region's argument types must be 0-d tensors of the "
                                 "operands' element types")
        mapping[arg] = value
    ip = ir.InsertionPoint(marker)
    body = [o.operation for o in block.operations]
    for o in body[:-1]:
        new = o.clone(ip)
        _remap(new, mapping)
        for old, fresh in zip(o.results, new.results):
            mapping[old] = fresh
    returned = [mapping.get(v, v) for v in body[-1].operands]
    for result, value in zip(marker.results, returned):
        result.replace_all_uses_with(value)
    marker.erase()


def _remap(op: ir.Operation, mapping: dict) -> None:
    for i, v in enumerate(op.operands):
        if v in mapping:
            op.operands[i] = mapping[v]
    for r in op.regions:
        for b in r.blocks:
            for c in b.operations:
                _remap(c.operation, mapping)


def scalarize(module: ir.Module) -> None:
    """Inside loops marked `kiln.scalarize`, unwrap each 0-d linalg.generic into its scalar
    body between tensor.extract and tensor.from_elements (canonicalize then folds the pairs)."""
    loops = [o for o in walk(module.operation) if SCALARIZE_ATTR in o.attributes]
    for loop in loops:
        for g in [o for o in walk(loop) if o.name == "linalg.generic"]:
            if all(_is_0d(v.type) for v in list(g.operands) + list(g.results)) and \
                    _outputs_unread(g):
                _unwrap_generic(g)
        del loop.attributes[SCALARIZE_ATTR]


def _is_0d(t: ir.Type) -> bool:
    return isinstance(t, ir.RankedTensorType) and t.rank == 0


def _outputs_unread(g: ir.Operation) -> bool:
    # Elementwise generics only write their outputs; one that reads them is left alone.
    block = g.regions[0].blocks[0]
    n_out = len(g.results)
    return all(not list(arg.uses) for arg in list(block.arguments)[len(block.arguments) - n_out:])


def _unwrap_generic(g: ir.Operation) -> None:
    block = g.regions[0].blocks[0]
    body = [o.operation for o in block.operations]
    mapping = {}
    with ir.InsertionPoint(g), g.location:
        for arg, operand in zip(block.arguments, g.operands):
            mapping[arg] = ir.Operation.create(
                "tensor.extract", results=[ir.RankedTensorType(operand.type).element_type],
                operands=[operand]).result
        ip = ir.InsertionPoint(g)
        for o in body[:-1]:
            new = o.clone(ip)
            _remap(new, mapping)
            for old, fresh in zip(o.results, new.results):
                mapping[old] = fresh
        for result, value in zip(g.results, body[-1].operands):
            value = mapping.get(value, value)
            packed = ir.Operation.create("tensor.from_elements", results=[result.type],
                                         operands=[value]).result
            result.replace_all_uses_with(packed)
    g.erase()


# The lowerings import the helpers above, so they are imported last.
from . import scatter, slicing, sort, windows  # noqa: E402

before: list[Step] = [
    PyPass("lower-scatter", scatter.lower_scatters),
    PyPass("lower-sort", sort.lower_sorts),
    PyPass("lower-select-and-scatter", windows.lower_select_and_scatters),
    PyPass("widen-unsigned-slice-starts", slicing.widen_unsigned_starts),
]
after: list[Step] = [
    PyPass("scalarize-0d-loops", scalarize),
]
