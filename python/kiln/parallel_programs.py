"""`interpreter.run_parallel`, the StableHLO reference interpreter's way of running several
programs at once (one per replica and partition), as Kiln runs it: on a LocalFabric.

    %results:N = "interpreter.run_parallel"(%inputs...) {
        programs = [[@replica0_partition0, ...], [@replica1_partition0, ...]],
        infeed = [@queue0, ...]}                 # optional: functions whose results are queued

A module using it is taken apart: the program functions are compiled on their own, with the
grid's replica and partition counts; the operands of the run_parallel come from compiling
@main up to that op; the devices run; then @main is compiled again with the results in
place of the op (as constants), so its checks judge them.
"""
from __future__ import annotations

import numpy as np
from torch_mlir import ir

from .errors import KilnError

OP = "interpreter.run_parallel"


def parse_if_run_parallel(source, filename: str) -> ir.Module | None:
    """The module of `source` (a path, or program text) if its @main runs programs with
    run_parallel, else None. It is parsed as every input is (kiln.frontend: nesting bounded
    first, binary formats read in a child process) and judged by the op itself, not by its
    name in the text: a comment that mentions it changes nothing. The text test only spares
    the parse for sources that cannot hold the op (its name in any spelling but hex escapes)."""
    from pathlib import Path
    from .context import make_context
    from .frontend import import_module
    if isinstance(source, str):
        if "run_parallel" not in source:
            return None
    else:
        try:
            if b"run_parallel" not in Path(source).read_bytes():
                return None
        except OSError:
            return None  # compiling it reports why it cannot be read
        source = Path(source)
    module, _ = import_module(source, make_context(), filename)
    with module.context:
        try:
            _, op = _find(module)
        except KilnError:  # no @main: not this form
            return None
    return module if op is not None else None


def _symbols(attr: ir.Attribute) -> list:
    return [ir.FlatSymbolRefAttr(a).value if not isinstance(a, ir.ArrayAttr) else _symbols(a)
            for a in ir.ArrayAttr(attr)]


def _find(module: ir.Module):
    from .lowering.ir_util import find_entry
    main = find_entry(module, "main")
    if not main.regions or not len(main.regions[0].blocks):
        return main, None  # a declaration
    for op in main.regions[0].blocks[0].operations:
        if op.operation.name == OP:
            return main, op.operation
    return main, None


def _is_token(t: ir.Type) -> bool:
    return str(t) == "!stablehlo.token"


def _without(module: ir.Module, drop: set[str]) -> ir.Module:
    """A copy of `module` without the functions named in `drop`."""
    from .lowering.ir_util import functions, symbol_name
    copy = ir.Module.parse(str(module), context=module.context)
    for f in list(functions(copy)):
        if symbol_name(f) in drop:
            f.erase()
    return copy


def _strip_tokens(module: ir.Module, name: str) -> None:
    """Entry functions pass arrays only: `name`'s token parameters become `after_all` tokens
    made inside it, and its token results are dropped (run_parallel hands tokens back as
    fresh ones)."""
    from .lowering.ir_util import function_type
    func = _function(module, name)
    ftype = function_type(func)
    block = func.regions[0].blocks[0]
    for i in reversed([i for i, t in enumerate(ftype.inputs) if _is_token(t)]):
        arg = block.arguments[i]
        with ir.InsertionPoint.at_block_begin(block), func.location:
            fresh = ir.Operation.create("stablehlo.after_all", results=[arg.type], operands=[]).result
        arg.replace_all_uses_with(fresh)
        block.erase_argument(i)
    for op in func.regions[0].blocks[0].operations:
        if op.operation.name == "func.return":
            kept = [v for v in op.operation.operands if not _is_token(v.type)]
            with ir.InsertionPoint(op), op.location:
                ir.Operation.create("func.return", operands=kept)
            op.operation.erase()
            break
    func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
        [t for t in ftype.inputs if not _is_token(t)], [t for t in ftype.results if not _is_token(t)]))


def _compile(module: ir.Module, entry: str, filename: str, replicas: int, partitions: int):
    import kiln
    _strip_tokens(module, entry)
    i32 = ir.IntegerType.get_signless(32, context=module.context)
    module.operation.attributes["mhlo.num_replicas"] = ir.IntegerAttr.get(i32, replicas)
    module.operation.attributes["mhlo.num_partitions"] = ir.IntegerAttr.get(i32, partitions)
    return kiln.compile(str(module), entry=entry, filename=filename)


def _operand_values(module: ir.Module, op, filename: str) -> list:
    """The run_parallel's operands, computed by @main's ops before it (tokens: None)."""
    if all(_is_token(v.type) for v in op.operands):
        return [None] * len(op.operands)
    copy = ir.Module.parse(str(module), context=module.context)
    main_copy, op_copy = _find(copy)
    values = [v for v in op_copy.operands if not _is_token(v.type)]
    with ir.InsertionPoint(op_copy), op_copy.location:
        early_return = ir.Operation.create("func.return", operands=values)
    block = main_copy.regions[0].blocks[0]
    for inner in list(block.operations)[::-1]:  # everything after the new return goes
        if inner.operation == early_return:
            break
        inner.operation.erase()
    main_copy.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get([], [v.type for v in values]))
    import kiln
    computed = iter(kiln.compile(str(copy), entry="main", filename=filename)())
    return [None if _is_token(v.type) else next(computed) for v in op.operands]


def run_parallel_module(source, filename: str):
    """Compile and run a module whose @main runs programs with interpreter.run_parallel;
    returns (outputs, check outcomes) of @main, as Executable.run_checks does. `source`: its
    text, or the module parse_if_run_parallel returned (consumed)."""
    import kiln
    from .context import make_context
    from .frontend import import_module
    from .distributed.fabric import LocalFabric
    from .distributed.run import run_devices
    module = source if isinstance(source, ir.Module) else \
        import_module(source, make_context(), filename)[0]
    with module.context:
        main, op = _find(module)
        while op is not None:
            grid = _symbols(op.attributes["programs"])
            replicas, partitions = len(grid), len(grid[0]) if grid else 0
            if not replicas or not partitions or any(len(row) != partitions for row in grid):
                raise KilnError(f"{OP}: programs must be a non-empty rectangular grid",
                                location=str(op.location))
            queues = _symbols(op.attributes["infeed"]) if "infeed" in op.attributes else []
            programs = [name for row in grid for name in row]
            others = _without(module, {"main"})
            compiled = {name: _compile(_without(module, {"main"}), name, filename, replicas,
                                       partitions) for name in dict.fromkeys(programs)}
            operands = _operand_values(module, op, filename)
            fabric = LocalFabric(replicas, partitions)
            shared = fabric.infeed[0]
            for q in queues:
                values = _compile(others, q, filename, 1, 1)()
                shared.put(list(values))
            fabric.infeed = [shared] * fabric.num_devices
            per_device, position = [], 0
            for name in programs:
                count = len(compiled[name].arg_specs) + _token_args(module, name)
                per_device.append(operands[position:position + count])
                position += count
            if position != len(operands):
                raise KilnError(f"{OP}: its programs take {position} operands, it has "
                                f"{len(operands)}", location=str(op.location))
            results = run_devices(fabric, [compiled[n].device_call for n in programs],
                                  [[[a for a in args if a is not None]] for args in per_device])
            _substitute(module, op, [r for name, out in zip(programs, results)
                                     for r in _with_tokens(module, name, out)])
            main, op = _find(module)
        exe = kiln.compile(str(module), entry="main", filename=filename)
    return exe.run_checks()


def _function(module: ir.Module, name: str):
    from .lowering.ir_util import find_entry
    return find_entry(module, name)


def _token_args(module: ir.Module, name: str) -> int:
    from .lowering.ir_util import function_type
    return sum(1 for t in function_type(_function(module, name)).inputs if _is_token(t))


def _with_tokens(module: ir.Module, name: str, outputs) -> list:
    """The program's results with None where it returns a token."""
    from .lowering.ir_util import function_type
    outputs = iter(outputs)
    return [None if _is_token(t) else next(outputs)
            for t in function_type(_function(module, name)).results]


def _substitute(module: ir.Module, op: ir.Operation, values: list) -> None:
    """Replace run_parallel's results by constants of `values` (tokens by after_all)."""
    from .lowering.legalize.hlo_builder import HloBuilder
    if len(values) != len(op.results):
        raise KilnError(f"{OP}: the programs returned {len(values)} values, it has "
                        f"{len(op.results)} results", location=str(op.location))
    with ir.InsertionPoint(op), op.location:
        h = HloBuilder()
        for result, value in zip(op.results, values):
            if _is_token(result.type):
                fresh = ir.Operation.create("stablehlo.after_all", results=[result.type],
                                            operands=[]).result
            else:
                t = ir.RankedTensorType(result.type)
                fresh = h.constant(np.asarray(value), t.element_type)
            result.replace_all_uses_with(fresh)
    op.erase()
