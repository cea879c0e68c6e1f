"""kiln-read-outputs-as-inputs: all-parallel linalg.generics stop reading their outputs.

A `linalg.generic` with only parallel loops may read its output operand (`%out` in the
body): a dot_general with no contracting dimension (an outer product, as torch_xla writes
`nn.Upsample`) becomes `out + a * b` over a zero fill, and Kiln's own lowerings write
elementwise updates the same way. Upstream `linalg-fuse-elementwise-ops` fuses such a
producer into a consumer that iterates more loops than the producer (a broadcast) by keeping
the producer's output as a second output of the fused op, indexed by fewer loops than the
fused op has: every iteration of the extra loops then adds into the same element again
(`nn.Upsample(scale_factor=2)` gave 2x the right value in its second channel).

So, before fusion, each such generic reads what it read from its output as an input
instead: the value a `linalg.fill` wrote is used as the scalar it is, any other tensor
becomes an extra input with the output's indexing map, and the output becomes a
`tensor.empty` of its type. For all-parallel loops this changes nothing (each output element
is read once, before it is written), and the op is then purely elementwise, which upstream
fuses correctly.
"""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import tensor

from .ir_util import all_parallel, clone_ops, operand_segments


def read_outputs_as_inputs(module: ir.Module) -> None:
    todo = []

    def visit(op):
        op = op.operation
        if op.name == "linalg.generic" and all_parallel(op) and _reads_an_output(op):
            todo.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for op in todo:
        _rewrite(op)


def _reads_an_output(op: ir.Operation) -> bool:
    if len(op.regions) != 1 or len(op.regions[0].blocks) != 1:
        return False
    n_in, _ = operand_segments(op)
    return any(list(arg.uses) for arg in list(op.regions[0].blocks[0].arguments)[n_in:])


def _fill_value(value: ir.Value) -> ir.Value | None:
    """The scalar a `linalg.fill` wrote into `value`, if one did."""
    owner = value.owner if isinstance(value, ir.OpResult) else None
    if owner is None or owner.operation.name != "linalg.fill":
        return None
    return owner.operation.operands[0]


def _rewrite(op: ir.Operation) -> None:
    n_in, n_out = operand_segments(op)
    operands = list(op.operands)
    maps = list(ir.ArrayAttr(op.attributes["indexing_maps"]))
    args = list(op.regions[0].blocks[0].arguments)
    inputs, in_maps = operands[:n_in], maps[:n_in]
    outputs = operands[n_in:]
    scalar_for: dict = {}          # an output's block argument -> the fill scalar it read
    input_for: dict = {}           # an output's block argument -> its new input's position
    with op.location, ir.InsertionPoint(op):
        for j in range(n_out):
            arg, init = args[n_in + j], outputs[j]
            if not list(arg.uses):
                continue
            init_type = ir.RankedTensorType(init.type)
            if not init_type.has_static_shape:
                return   # (Kiln's programs are static here; leave a dynamic one as it is)
            filled = _fill_value(init)
            if filled is not None and filled.type == init_type.element_type:
                scalar_for[arg] = filled
                filled_into = _owner(init).operands[1]
                if isinstance(filled_into, ir.OpResult) and _owner(filled_into).name == "tensor.empty":
                    outputs[j] = filled_into
                    continue
            else:
                input_for[arg] = len(inputs)
                inputs.append(init)
                in_maps.append(maps[n_in + j])
            outputs[j] = tensor.EmptyOp(init_type.shape, init_type.element_type).result
        attributes = {named.name: named.attr for named in
                      (op.attributes[k] for k in range(len(op.attributes)))}
        attributes["indexing_maps"] = ir.ArrayAttr.get(in_maps + maps[n_in:])
        attributes["operandSegmentSizes"] = ir.DenseI32ArrayAttr.get([len(inputs), n_out])
        new = ir.Operation.create("linalg.generic", results=[r.type for r in op.results],
                                  operands=inputs + outputs, attributes=attributes, regions=1)
    arg_types = [a.type for a in args[:n_in]] + \
        [args[n_in + j].type for j in range(n_out) if args[n_in + j] in input_for] + \
        [a.type for a in args[n_in:]]
    block = new.regions[0].blocks.append(*arg_types, arg_locs=[op.location] * len(arg_types))
    new_args = list(block.arguments)
    mapping: dict = dict(zip(args[:n_in], new_args[:n_in]))
    for arg, scalar in scalar_for.items():
        mapping[arg] = scalar
    for arg, position in input_for.items():
        mapping[arg] = new_args[position]
    for arg, new_arg in zip(args[n_in:], new_args[len(inputs):]):
        mapping.setdefault(arg, new_arg)
    clone_ops([o.operation for o in op.regions[0].blocks[0].operations], mapping,
              ir.InsertionPoint(block))
    for old, fresh in zip(op.results, new.results):
        old.replace_all_uses_with(fresh)
    fills = {_owner(init) for arg, init in zip(args[n_in:], operands[n_in:]) if arg in scalar_for}
    op.erase()
    for fill in fills:   # a fill nothing reads any more
        if not any(list(r.uses) for r in fill.results):
            fill.erase()


def _owner(value: ir.Value) -> ir.Operation:
    return value.owner.operation
