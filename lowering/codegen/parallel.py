"""Both cores for large loop nests (XLA:CPU splits big fusions across its thread pool too).

After bufferization, a large all-parallel `linalg.generic` at the top level of a function
(elementwise ops, broadcasts, transposes) is outlined into `body(ctx, begin, end)`: the same op on subviews of its operands
restricted to [begin, end) along that dimension. The op is replaced by a call of
`kiln_parallel_for(body, ctx, extent)` in Kiln's runtime (runtime/kiln_parallel.c), which
runs the chunks on a pool of threads; `ctx` holds the operands' base addresses, from which
the body rebuilds their (static) memref descriptors. Chunks write disjoint parts of the
outputs, and every chunk computes exactly what the serial loop computes for its indices,
so results are bit-identical to the serial code.

Left alone: small ops (< MIN_ITERATIONS iterations: thread hand-off costs ~10 us), dynamic
shapes or strides, ops whose body reads `linalg.index` (chunks would renumber it) or an
outside value other than a constant, ops nested in loops, and reductions (in the outlined
body LLVM cannot tell the accumulator from the input and stops vectorizing: measured 1.5x
slower). Operands that are one buffer (in-place updates) are rebuilt from one pointer, so
LLVM still vectorizes them. Measured on the shared 2-core VM: gelu over 4M elements
3.5 -> 2.1 ms; memory-bound ops gain little (softmax 11.4 -> 8.6 ms).
"""
from __future__ import annotations

from torch_mlir import ir

MIN_ITERATIONS = 1 << 18
_ELEM_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i1": 1, "i8": 1, "i16": 2, "i32": 4,
               "i64": 8}


def _dims(op: ir.Operation) -> list[list[int]] | None:
    try:
        return [[ir.AffineDimExpr(e).position for e in ir.AffineMapAttr(m).value.results]
                for m in op.attributes["indexing_maps"]]
    except ValueError:
        return None


def _plan(op: ir.Operation):
    if op.name != "linalg.generic" or op.results or "indexing_maps" not in op.attributes:
        return None
    parent = op.parent
    if parent is None or parent.name != "func.func":
        return None
    maps = _dims(op)
    if maps is None or len(maps) != len(op.operands):
        return None
    types = []
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    for v in op.operands:
        try:
            t = ir.MemRefType(v.type)
        except ValueError:
            return None
        strides, _ = t.get_strides_and_offset()
        if not t.has_static_shape or any(s == dynamic for s in strides) \
                or str(t.element_type) not in _ELEM_BYTES:
            return None
        types.append((t, strides))
    extent = {}
    for (t, _), dims in zip(types, maps):
        extent.update(zip(dims, t.shape))
    iterators = [str(a) for a in op.attributes["iterator_types"]]
    if len(extent) != len(iterators):
        return None
    # Reductions stay serial: in the outlined body LLVM no longer knows that the accumulator
    # does not alias the input (measured: softmax's row reductions ran 1.5x slower there).
    if any("reduction" in it for it in iterators):
        return None
    split = next((d for d in range(len(iterators)) if extent[d] > 1), None)
    if split is None:
        return None
    total = 1
    for n in extent.values():
        total *= n
    if total < MIN_ITERATIONS:
        return None
    uses_index = []

    def visit(inner):
        if inner.operation.name == "linalg.index":
            uses_index.append(inner)
        return ir.WalkResult.ADVANCE
    for inner in op.regions[0].blocks[0].operations:
        inner.operation.walk(visit)
    if uses_index:
        return None
    if any(dims.count(split) > 1 for dims in maps):
        return None
    captured = _captured_constants(op)
    if captured is None:
        return None
    operands = list(op.operands)
    slots = [next(j for j in range(i + 1) if operands[j] == operands[i])
             for i in range(len(operands))]
    return {"types": types, "maps": maps, "split": split, "extent": extent[split],
            "constants": captured, "slots": slots}


def _inside(owner, op: ir.Operation) -> bool:
    while owner is not None:
        if owner == op:
            return True
        owner = owner.parent
    return False


def _captured_constants(op: ir.Operation):
    """The arith.constant ops from outside that the body uses (to be cloned into the
    outlined function), or None if it uses any other outside value."""
    found, ok = [], [True]
    body = op.regions[0].blocks[0]

    def visit(inner):
        for v in inner.operation.operands:
            owner = v.owner
            if isinstance(owner, ir.Block):
                if owner != body and not _inside(owner.owner, op):
                    ok[0] = False
                continue
            owner = getattr(owner, "operation", owner)
            if _inside(owner, op):
                continue
            if owner.name != "arith.constant":
                ok[0] = False
            elif all(owner != f for f in found):
                found.append(owner)
        return ir.WalkResult.ADVANCE
    for inner in body.operations:
        inner.operation.walk(visit)
    return found if ok[0] else None


def _struct(rank: int) -> str:
    if rank == 0:
        return "!llvm.struct<(ptr, ptr, i64)>"
    return f"!llvm.struct<(ptr, ptr, i64, array<{rank} x i64>, array<{rank} x i64>)>"


def _strided(t: ir.MemRefType, strides: list[int]) -> str:
    shape = "".join(f"{n}x" for n in t.shape)
    return f"memref<{shape}{t.element_type}, strided<[{', '.join(map(str, strides))}]>>"


def _body_text(name: str, plan) -> str:
    """The outlined function up to (not including) the linalg op: rebuild each operand from
    its address in ctx, then take its [begin, end) slice along the split dimension."""
    split = plan["split"]
    lines = [f"func.func private @{name}(%ctx: !llvm.ptr, %begin: i64, %end: i64) {{",
             "  %zero = llvm.mlir.constant(0 : i64) : i64",
             "  %b = arith.index_cast %begin : i64 to index",
             "  %e = arith.index_cast %end : i64 to index",
             "  %len = arith.subi %e, %b : index"]
    consts = set()
    for i, ((t, strides), dims) in enumerate(zip(plan["types"], plan["maps"])):
        rank = t.rank
        st = _struct(rank)
        # One load per distinct operand: an op updating a buffer in place must see one
        # pointer, or LLVM's runtime overlap check sends the loop to its scalar version.
        src = plan["slots"][i]
        if src == i:
            lines.append(f"  %g{i} = llvm.getelementptr %ctx[{i}] : (!llvm.ptr) -> !llvm.ptr, i64")
            lines.append(f"  %a{i} = llvm.load %g{i} : !llvm.ptr -> !llvm.ptr")
        lines.append(f"  %d{i}_0 = llvm.mlir.undef : {st}")
        lines.append(f"  %d{i}_1 = llvm.insertvalue %a{src}, %d{i}_0[0] : {st}")
        lines.append(f"  %d{i}_2 = llvm.insertvalue %a{src}, %d{i}_1[1] : {st}")
        lines.append(f"  %d{i}_3 = llvm.insertvalue %zero, %d{i}_2[2] : {st}")
        last = f"%d{i}_3"
        for k, (n, s) in enumerate(zip(t.shape, strides)):
            for v in (n, s):
                if v not in consts:
                    consts.add(v)
                    lines.insert(1, f"  %c{v} = llvm.mlir.constant({v} : i64) : i64")
            lines.append(f"  %d{i}_s{k} = llvm.insertvalue %c{n}, {last}[3, {k}] : {st}")
            lines.append(f"  %d{i}_t{k} = llvm.insertvalue %c{s}, %d{i}_s{k}[4, {k}] : {st}")
            last = f"%d{i}_t{k}"
        full = _strided(t, strides)
        lines.append(f"  %m{i} = builtin.unrealized_conversion_cast {last} : {st} to {full}")
        if split in dims:
            pos = dims.index(split)
            offsets = ["0"] * rank
            sizes = [str(n) for n in t.shape]
            offsets[pos], sizes[pos] = "%b", "%len"
            ones = ", ".join(["1"] * rank)
            lines.append(f"  %v{i} = memref.subview %m{i}[{', '.join(offsets)}] "
                         f"[{', '.join(sizes)}] [{ones}] : {full} to "
                         f"{_subview_type(t, strides, pos)}")
        else:
            lines.append(f"  %v{i} = memref.cast %m{i} : {full} to {full}")
    lines.append("  return")
    lines.append("}")
    return "\n".join(lines)


def _subview_type(t: ir.MemRefType, strides: list[int], pos: int) -> str:
    shape = "".join(("?" if k == pos else str(n)) + "x" for k, n in enumerate(t.shape))
    return f"memref<{shape}{t.element_type}, strided<[{', '.join(map(str, strides))}], offset: ?>>"


def parallelize(module: ir.Module) -> None:
    todo = []

    def visit(op):
        op = op.operation
        if op.name == "linalg.generic":
            plan = _plan(op)
            if plan is not None:
                todo.append((op, plan))
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    if not todo:
        return
    symbols = ir.SymbolTable(module.operation)
    if "kiln_parallel_for" not in symbols:
        decl = ir.Module.parse("func.func private @kiln_parallel_for("
                               "(!llvm.ptr, i64, i64) -> (), !llvm.ptr, i64)")
        f = decl.body.operations[0].operation
        module.body.append(f)
        symbols.insert(f)
    for n, (op, plan) in enumerate(todo):
        name = f"kiln_parallel_body_{n}"
        while name in symbols:
            name += "_"
        helper = ir.Module.parse(_body_text(name, plan))
        func = helper.body.operations[0].operation
        module.body.append(func)
        symbols.insert(func)
        block = func.regions[0].blocks[0]
        ops = list(block.operations)
        views = [o.operation.results[0] for o in ops
                 if o.operation.name in ("memref.subview", "memref.cast")]
        with ir.InsertionPoint(ops[-1]):
            copies = [(c.results[0], c.clone().results[0]) for c in plan["constants"]]
            clone = op.clone()
        for i, v in enumerate(views):
            clone.operands[i] = v

        def remap(inner):
            for i, v in enumerate(inner.operation.operands):
                for old, new in copies:
                    if v == old:
                        inner.operation.operands[i] = new
            return ir.WalkResult.ADVANCE
        for inner in clone.regions[0].blocks[0].operations:
            inner.operation.walk(remap)
        _emit_call(op, plan, name)
        op.erase()


def _emit_call(op: ir.Operation, plan, name: str) -> None:
    """ctx = the operands' element-0 addresses; kiln_parallel_for(@name, ctx, extent)."""
    k = len(op.operands)
    lines = ["func.func private @caller(" +
             ", ".join(f"%o{i}: {v.type}" for i, v in enumerate(op.operands)) + ") {",
             f"  %ctx = memref.alloca() : memref<{k}xi64>"]
    for i, ((t, _), v) in enumerate(zip(plan["types"], op.operands)):
        size = _ELEM_BYTES[str(t.element_type)]
        rank = t.rank
        idx = ", ".join(["index"] * (2 * rank))
        meta = f"%base{i}, %off{i}" + (f", %sz{i}:{rank}, %st{i}:{rank}" if rank else "")
        lines += [
            f"  %p{i} = memref.extract_aligned_pointer_as_index %o{i} : {v.type} -> index",
            f"  {meta} = memref.extract_strided_metadata %o{i} : {v.type} -> "
            f"memref<{t.element_type}>, index" + (f", {idx}" if rank else ""),
            f"  %ob{i} = arith.muli %off{i}, %size{size} : index",
            f"  %q{i} = arith.addi %p{i}, %ob{i} : index",
            f"  %w{i} = arith.index_cast %q{i} : index to i64",
            f"  memref.store %w{i}, %ctx[%i{i}] : memref<{k}xi64>"]
    consts = {f"  %i{i} = arith.constant {i} : index" for i in range(k)}
    consts |= {f"  %size{s} = arith.constant {s} : index" for s in _ELEM_BYTES.values()}
    lines[2:2] = sorted(consts)
    lines += [f"  %cp = memref.extract_aligned_pointer_as_index %ctx : memref<{k}xi64> -> index",
              "  %c64 = arith.index_cast %cp : index to i64",
              "  %cptr = llvm.inttoptr %c64 : i64 to !llvm.ptr",
              f"  %n = arith.constant {plan['extent']} : i64",
              f"  %f = func.constant @{name} : (!llvm.ptr, i64, i64) -> ()",
              "  func.call @kiln_parallel_for(%f, %cptr, %n) : "
              "((!llvm.ptr, i64, i64) -> (), !llvm.ptr, i64) -> ()",
              "  return", "}",
              f"func.func private @{name}(!llvm.ptr, i64, i64)",
              "func.func private @kiln_parallel_for((!llvm.ptr, i64, i64) -> (), !llvm.ptr, i64)"]
    caller = ir.Module.parse("\n".join(lines))
    body = caller.body.operations[0].operation.regions[0].blocks[0]
    args = list(body.arguments)
    mapping = list(zip(args, op.operands))
    with ir.InsertionPoint(op), op.location:
        for inner in list(body.operations)[:-1]:  # all but the return
            clone = inner.operation.clone()
            for i, v in enumerate(clone.operands):
                for old, new in mapping:
                    if v == old:
                        clone.operands[i] = new
            mapping.extend(zip(inner.operation.results, clone.results))
