"""The execution plan of a compiled program: its buffer assignment and its thunk sequence.

Both are read off the entry function after the `codegen` stage, the last point where buffers
are still memrefs and library calls are still named. The data model is target-neutral: a
buffer is a sized region with a live range, a thunk is a unit of work that reads and writes
buffer slices. A GPU target fills the same structures with kernel launches.

Live ranges are positions of the entry body's top-level ops. A temporary lives from its
`memref.alloc` to its last real use; its `memref.dealloc` is not a use, because Kiln's pool
frees by liveness at run time, like XLA's heap simulator frees after the last use.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from torch_mlir import ir

from ..context import make_context
from ..dialects import kiln as names
from ..errors import KilnError
from ..lowering.ir_util import find_entry, walk

ALIGNMENT = 64
# Ops whose memref result is a view of their first memref operand: same buffer.
_VIEW_OPS = {"memref.subview", "memref.cast", "memref.reinterpret_cast", "memref.expand_shape",
             "memref.collapse_shape", "memref.view", "memref.transpose",
             "memref.extract_strided_metadata", "memref.memory_space_cast"}
# Ops that make no work of their own.
_NO_WORK = {"arith.constant", "func.constant", "memref.alloc", "memref.alloca", "memref.dealloc",
            "memref.get_global", "func.return", "memref.extract_aligned_pointer_as_index",
            "scf.yield", "scf.condition"} | _VIEW_OPS
_SKIPPED_CALLS = {"kiln_check_interrupt", "kiln_runtime_check_failed"}


@dataclass
class Buffer:
    index: int
    kind: str                     # "parameter", "output", "temp" or "constant"
    name: str                     # the SSA name of its defining value
    type: str
    size: int
    live: tuple[int, int]         # first and last top-level op positions
    parameter: int | None = None  # the entry argument number, for parameters and outputs
    offset: int = 0               # in the temporaries' arena; 0 for the others
    values: list[str] = field(default_factory=list)   # every SSA name that views it

    def overlaps(self, other: Buffer) -> bool:
        return self.live[0] <= other.live[1] and other.live[0] <= self.live[1]


@dataclass(frozen=True)
class Slice:
    allocation: int
    offset: int
    size: int

    def __str__(self) -> str:
        return f"{{{self.allocation}, {self.offset}, {self.size}}}"


class BufferAssignment:
    """Every buffer of the entry function, with temporaries packed into one arena by live
    range (buffers with disjoint live ranges may share bytes)."""

    def __init__(self, buffers: list[Buffer]):
        self.buffers = buffers
        self.temp_bytes = _pack(self.temps)

    @property
    def temps(self) -> list[Buffer]:
        return [b for b in self.buffers if b.kind == "temp"]

    @property
    def total_bytes(self) -> int:
        """The bytes needed if no buffer shared space (each temporary in its own aligned
        slot of the arena)."""
        return sum(_align(b.size) if b.kind == "temp" else b.size for b in self.buffers)

    @property
    def peak_bytes(self) -> int:
        """Parameters, outputs and constants, plus the temporaries' arena."""
        return sum(b.size for b in self.buffers if b.kind != "temp") + self.temp_bytes

    def shared(self) -> list[tuple[Buffer, Buffer]]:
        """Pairs of temporaries that reuse the same bytes at different times."""
        temps = self.temps
        return [(a, b) for i, a in enumerate(temps) for b in temps[i + 1:]
                if a.offset < b.offset + b.size and b.offset < a.offset + a.size]

    def allocations(self) -> list[tuple[str, int, list[Buffer]]]:
        """(description, size, buffers): one allocation per parameter, output and constant,
        then one for all temporaries, as XLA lays them out."""
        out = []
        for b in self.buffers:
            if b.kind == "parameter":
                out.append((f"parameter {b.parameter}", b.size, [b]))
            elif b.kind == "output":
                out.append(("maybe-live-out", b.size, [b]))
            elif b.kind == "constant":
                out.append(("constant", b.size, [b]))
        if self.temps:
            out.append(("preallocated-temp", self.temp_bytes, self.temps))
        return out

    def slice_of(self, buffer: Buffer) -> Slice:
        for index, (_, _, members) in enumerate(self.allocations()):
            if buffer in members:
                return Slice(index, buffer.offset, buffer.size)
        raise KeyError(buffer.name)

    def __str__(self) -> str:
        lines = []
        for index, (what, size, members) in enumerate(self.allocations()):
            lines.append(f"allocation {index}: size {size}, {what}:")
            for b in members:
                lines.append(f" value: <{b.index} {b.name} @0> ({b.type}), offset {b.offset}, "
                             f"size {b.size}, live [{b.live[0]}, {b.live[1]}]"
                             + (f", also {', '.join(b.values[1:])}" if len(b.values) > 1 else ""))
        lines.append("")
        lines.append(f"Total bytes used: {self.peak_bytes} ({_human(self.peak_bytes)})")
        lines.append(f"Total bytes without reuse: {self.total_bytes} ({_human(self.total_bytes)})")
        lines.append(f"Peak temporary bytes: {self.temp_bytes} ({_human(self.temp_bytes)})")
        for a, b in self.shared():
            lines.append(f"Shared: {a.name} and {b.name} (disjoint live ranges)")
        return "\n".join(lines) + "\n"


@dataclass
class Thunk:
    kind: str        # kernel, blas, parallel-kernel, custom-call, while, conditional, copy
    name: str
    position: int
    reads: list[Buffer] = field(default_factory=list)
    writes: list[Buffer] = field(default_factory=list)
    target: str | None = None                                  # custom-call target
    nested: list[list[Thunk]] = field(default_factory=list)    # while / conditional bodies

    def describe(self, assignment: BufferAssignment, indent: str = "") -> list[str]:
        def slices(buffers):
            return ", ".join(str(assignment.slice_of(b)) for b in buffers)
        label = self.name + (f" target={self.target}" if self.target else "")
        lines = [f"{indent}{self.kind:16} {label} reads: [{slices(self.reads)}] "
                 f"writes: [{slices(self.writes)}]"]
        for number, body in enumerate(self.nested):
            lines.append(f"{indent}  region {number}:")
            for thunk in body:
                lines.extend(thunk.describe(assignment, indent + "    "))
        return lines


class ThunkSequence(list):
    """Thunks in program order, printable with the buffer slices they touch."""

    def __init__(self, thunks: list[Thunk], assignment: BufferAssignment):
        super().__init__(thunks)
        self.assignment = assignment

    def __str__(self) -> str:
        lines = []
        for thunk in self:
            lines.extend(thunk.describe(self.assignment))
        return "\n".join(lines) + "\n"


# -- analysis ----------------------------------------------------------------------------------

def analyse(codegen_ir: str, entry: str | None, num_results: int
            ) -> tuple[BufferAssignment, ThunkSequence]:
    """The plan of the entry function in `codegen_ir` (text after the `codegen` stage), whose
    last `num_results` arguments are the caller-owned results."""
    with make_context():
        module = ir.Module.parse(codegen_ir)
        return analyse_module(module, entry, num_results)


def analyse_module(module: ir.Module, entry: str | None, num_results: int
                   ) -> tuple[BufferAssignment, ThunkSequence]:
    """`analyse` on a module in hand (the compiler's, right after `codegen`)."""
    with module.context:
        return _Analysis(find_entry(module, entry), num_results).run()


class _Analysis:
    def __init__(self, func: ir.Operation, num_results: int):
        self.func = func
        self.num_results = num_results
        self.buffers: list[Buffer] = []
        self.owner: dict[ir.Value, Buffer] = {}    # every value that names a buffer
        self.touched: set[int] = set()             # buffers some thunk already used
        # Runtime calls take buffers as raw pointers packed into a pointer array: follow them.
        self.pointer: dict[ir.Value, Buffer] = {}         # an integer address of a buffer
        self.array_of: dict[ir.Value, ir.Value] = {}      # an address of a pointer array
        self.arrays: dict[ir.Value, list[Buffer]] = {}    # pointer array -> buffers in it
        self.site_slots: set[ir.Value] = set()            # custom-call site address globals
        self.counter = 0

    def run(self):
        block = self.func.regions[0].blocks[0]
        args = list(block.arguments)
        first_output = len(args) - self.num_results
        for number, arg in enumerate(args):
            if _is(ir.MemRefType, arg.type):
                kind = "parameter" if number < first_output else "output"
                self._add(kind, arg, f"arg{number}", (0, 0), parameter=number)
        ops = list(block.operations)
        last = len(ops) - 1
        for b in self.buffers:    # the caller owns these for the whole run
            b.live = (0, last)
        thunks = self._sequence(ops, top=True)
        assignment = BufferAssignment(self.buffers)
        return assignment, ThunkSequence(thunks, assignment)

    # buffers
    def _add(self, kind, value, name, live, parameter=None) -> Buffer:
        mtype = ir.MemRefType(value.type)
        buffer = Buffer(len(self.buffers), kind, name, str(mtype), _byte_size(mtype, value),
                        live, parameter, values=[name])
        self.buffers.append(buffer)
        self.owner[value] = buffer
        return buffer

    def _buffer(self, value) -> Buffer | None:
        try:
            return self.owner.get(value)
        except TypeError:
            return None

    def _use(self, buffer: Buffer, position: int):
        start, end = buffer.live
        buffer.live = (min(start, position), max(end, position))

    # ops
    def _sequence(self, ops, top: bool, position: int | None = None) -> list[Thunk]:
        thunks = []
        for index, op in enumerate(ops):
            op = op.operation
            where = index if top else position
            self._define(op, where)
            thunk = self._thunk(op, where)
            if thunk is not None:
                thunks.append(thunk)
            elif op.name == "memref.alloca_scope":   # a scope around a call: look inside
                thunks.extend(self._sequence(op.regions[0].blocks[0].operations, False, where))
        return thunks

    def _define(self, op: ir.Operation, where: int):
        """Record the buffers and views `op` defines, and the buffers it uses."""
        if op.name == "memref.alloca" and _is_pointer_array(op):
            self.arrays[op.results[0]] = []
        elif op.name in ("memref.alloc", "memref.alloca"):
            self._add("temp", op.results[0], _name(op.results[0]), (where, where))
        elif op.name == "memref.get_global":
            if _is_call_site(op):
                self.site_slots.add(op.results[0])  # runtime bookkeeping, not program data
            else:
                self._add("constant", op.results[0], _name(op.results[0]), (where, where))
        elif op.name in _VIEW_OPS:
            source = self._buffer(op.operands[0])
            if source is not None:
                self.owner[op.results[0]] = source
                source.values.append(_name(op.results[0]))
        elif op.name == "memref.extract_aligned_pointer_as_index":
            source = self._buffer(op.operands[0])
            if source is not None:
                self.pointer[op.results[0]] = source
            elif op.operands[0] in self.arrays:
                self.array_of[op.results[0]] = op.operands[0]
        elif op.name in ("arith.index_cast", "llvm.inttoptr"):
            if op.operands[0] in self.pointer:
                self.pointer[op.results[0]] = self.pointer[op.operands[0]]
            elif op.operands[0] in self.array_of:
                self.array_of[op.results[0]] = self.array_of[op.operands[0]]
        elif op.name == "memref.store" and op.operands[1] in self.arrays:
            if op.operands[0] in self.pointer:
                buffer = self.pointer[op.operands[0]]
                self.arrays[op.operands[1]].append(buffer)
                self._use(buffer, where)
        if op.name != "memref.dealloc":
            for value in _all_operands(op):
                buffer = self._buffer(value)
                if buffer is not None:
                    self._use(buffer, where)

    def _thunk(self, op: ir.Operation, where: int) -> Thunk | None:
        name = op.name
        if name in _NO_WORK or name == "memref.alloca_scope":
            return None
        if name == "memref.load" and op.operands[0] in self.site_slots:
            return None  # reading a custom call's site address: part of the call
        if name == "memref.copy":
            return self._make("copy", where, reads=[op.operands[0]], writes=[op.operands[1]])
        if name == "func.call":
            return self._call(op, where)
        if name == "scf.while":
            return self._control("while", op, where)
        if name == "scf.if":
            return self._control("conditional", op, where)
        if len(op.regions) or any(self._buffer(v) is not None for v in op.operands):
            return self._kernel("kernel", op, where)
        return None   # scalar arithmetic between thunks: part of the control code

    def _make(self, kind, where, reads=(), writes=(), **extra) -> Thunk:
        self.counter += 1
        rs = _unique(b for b in map(self._buffer, reads) if b is not None)
        ws = _unique(b for b in map(self._buffer, writes) if b is not None)
        self.touched.update(b.index for b in rs + ws)
        return Thunk(kind, f"{kind}.{self.counter}", where, rs, ws, **extra)

    def _call(self, op: ir.Operation, where: int) -> Thunk | None:
        callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        if callee in _SKIPPED_CALLS:
            return None
        memrefs = [v for v in op.operands if _is(ir.MemRefType, v.type)]
        if callee.startswith(("kiln_gemm", "kiln_blas")):
            # The accumulator (last buffer) is updated in place (beta = 1): read and written.
            return self._make("blas", where, reads=memrefs, writes=memrefs[-1:])
        if callee in ("kiln_custom_call", "kiln_parallel_for"):
            # A buffer no earlier thunk touched is one this call makes.
            passed = _unique(b for v in op.operands if v in self.array_of
                             for b in self.arrays[self.array_of[v]])
            written = [b for b in passed if b.kind != "parameter" and b.index not in self.touched]
            thunk = self._make("parallel-kernel" if callee == "kiln_parallel_for" else "custom-call",
                               where)
            thunk.writes = written
            thunk.reads = [b for b in passed if b not in written]
            self.touched.update(b.index for b in passed)
            if "kiln.custom_call_target" in op.attributes:
                thunk.target = ir.StringAttr(op.attributes["kiln.custom_call_target"]).value
            return thunk
        thunk = self._make("kernel", where, reads=memrefs)
        thunk.name = callee
        return thunk

    def _kernel(self, kind: str, op: ir.Operation, where: int) -> Thunk:
        reads, writes = [], []
        for inner in [op, *walk(op)]:
            if inner.name == "memref.store":
                writes.append(inner.operands[1])
            elif inner.name == "memref.copy":
                reads.append(inner.operands[0])
                writes.append(inner.operands[1])
            elif inner.name != "memref.dealloc":
                reads.extend(v for v in inner.operands if _is(ir.MemRefType, v.type))
        # A buffer in both lists is updated in place (loaded and stored).
        return self._make(kind, where, reads=reads, writes=writes)

    def _control(self, kind: str, op: ir.Operation, where: int) -> Thunk:
        if kind == "while":   # loop-carried buffers start as the initial operands
            for region in op.regions:
                for arg, init in zip(region.blocks[0].arguments, op.operands):
                    if self._buffer(init) is not None:
                        self.owner[arg] = self._buffer(init)
        for result, init in zip(op.results, op.operands if kind == "while" else ()):
            if self._buffer(init) is not None:
                self.owner[result] = self._buffer(init)
        self.counter += 1   # numbered before the thunks nested in it
        name = f"{kind}.{self.counter}"
        nested = [self._sequence(region.blocks[0].operations, False, where)
                  for region in op.regions if len(region.blocks)]
        if not any(nested):   # e.g. an scf.if that only frees buffers
            return None
        thunk = Thunk(kind, name, where, nested=nested)
        condition = [op.operands[0]] if kind == "conditional" else []
        thunk.reads = _unique(b for b in map(self._buffer, condition) if b is not None)
        for body in thunk.nested:
            for inner in body:
                thunk.reads += [b for b in inner.reads if b not in thunk.reads]
                thunk.writes += [b for b in inner.writes if b not in thunk.writes]
        return thunk


# -- helpers -----------------------------------------------------------------------------------

def _is_call_site(op: ir.Operation) -> bool:
    """A custom call's site-address global (lowering/legalize/custom_calls.py)."""
    name = ir.FlatSymbolRefAttr(op.attributes["name"]).value
    return name.startswith(names.CALL_SITE_SYMBOL)


def _pack(temps: list[Buffer]) -> int:
    """Greedy first fit, largest first: each temporary takes the lowest aligned offset free of
    every already placed temporary whose live range overlaps its own. Returns the arena size."""
    placed: list[Buffer] = []
    for buffer in sorted(temps, key=lambda b: (-b.size, b.live[0], b.index)):
        offset = 0
        for other in sorted((o for o in placed if o.overlaps(buffer)), key=lambda o: o.offset):
            if offset + buffer.size <= other.offset:
                break
            offset = max(offset, _align(other.offset + other.size))
        buffer.offset = offset
        placed.append(buffer)
    return max((b.offset + b.size for b in temps), default=0)


def _align(n: int) -> int:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def _byte_size(mtype: ir.MemRefType, value) -> int:
    if not mtype.has_static_shape:
        raise KilnError(f"buffer {_name(value)} of type {mtype} has no static size",
                        hint="pass arg_shapes to plan a program with dynamic shapes")
    count = 1
    for dim in mtype.shape:
        count *= dim
    return count * _element_bytes(mtype.element_type)


def _element_bytes(element: ir.Type) -> int:
    if _is(ir.ComplexType, element):
        return 2 * _element_bytes(ir.ComplexType(element).element_type)
    if _is(ir.IndexType, element):
        return 8
    for kind in (ir.IntegerType, ir.FloatType):
        if isinstance(element, kind):
            return max(1, (kind(element).width + 7) // 8)
    return 8


def _is_pointer_array(op: ir.Operation) -> bool:
    """An alloca holding the pointers passed to a runtime call is plumbing, not data."""
    if op.name != "memref.alloca":
        return False
    for use in op.results[0].uses:
        user = use.owner
        if not (user.name == "memref.extract_aligned_pointer_as_index"
                or (user.name == "memref.store" and use.operand_number == 1)):
            return False
    return True



def _all_operands(op: ir.Operation):
    yield from op.operands
    for inner in walk(op):
        yield from inner.operands


def _unique(buffers) -> list[Buffer]:
    out = []
    for b in buffers:
        if b not in out:
            out.append(b)
    return out


def _name(value) -> str:
    try:
        return value.get_name()
    except Exception:   # a value the bindings cannot print alone
        return "%value"


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n}{unit}" if unit == "B" else f"{n:.2f}{unit}"
        n /= 1024
    return str(n)


def _is(kind, mlir_type) -> bool:
    return isinstance(mlir_type, kind)


# -- saving ------------------------------------------------------------------------------------

def to_json(assignment: BufferAssignment, thunks: ThunkSequence) -> dict:
    """The plan as JSON (saved with compiled code in `.kx` files and the compile cache)."""
    def thunk(t: Thunk) -> dict:
        return {"kind": t.kind, "name": t.name, "position": t.position,
                "reads": [b.index for b in t.reads], "writes": [b.index for b in t.writes],
                "target": t.target, "nested": [[thunk(x) for x in body] for body in t.nested]}
    buffers = [{"index": b.index, "kind": b.kind, "name": b.name, "type": b.type, "size": b.size,
                "live": list(b.live), "parameter": b.parameter, "offset": b.offset,
                "values": b.values} for b in assignment.buffers]
    return {"buffers": buffers, "thunks": [thunk(t) for t in thunks]}


def from_json(data: dict) -> tuple[BufferAssignment, ThunkSequence]:
    buffers = [Buffer(b["index"], b["kind"], b["name"], b["type"], b["size"], tuple(b["live"]),
                      b["parameter"], b["offset"], list(b["values"])) for b in data["buffers"]]
    by_index = {b.index: b for b in buffers}

    def thunk(t: dict) -> Thunk:
        return Thunk(t["kind"], t["name"], t["position"], [by_index[i] for i in t["reads"]],
                     [by_index[i] for i in t["writes"]], t["target"],
                     [[thunk(x) for x in body] for body in t["nested"]])
    assignment = BufferAssignment.__new__(BufferAssignment)
    assignment.buffers = buffers
    assignment.temp_bytes = _pack_saved(buffers)
    return assignment, ThunkSequence([thunk(t) for t in data["thunks"]], assignment)


def _pack_saved(buffers: list[Buffer]) -> int:
    """The arena size of temporaries whose offsets were already assigned."""
    temps = [b for b in buffers if b.kind == "temp"]
    return max((b.offset + b.size for b in temps), default=0)


# -- the GPU targets' plan ---------------------------------------------------------------------

def from_gpu(gpu_plan: dict, num_results: int) -> tuple[BufferAssignment, ThunkSequence]:
    """The plan of a GPU program (lowering/gpu/host.py's JSON) in this data model: device
    buffers, and one `kernel-launch` thunk per launch named with its kernel, grid and block
    (reads and writes from how the kernel uses each argument), `memcpy-d2d` per copy,
    `custom-call` per custom call, `while` and `conditional` thunks holding their regions'
    thunks. Launches and copies recorded in a command buffer stay thunks of their own, each
    naming its command buffer; the text shows them under it, as XLA prints a command
    buffer thunk."""
    params = gpu_plan["params"]
    first_output = len(params) - num_results
    buffers: dict[int, Buffer] = {}
    for number, vid in enumerate(params):
        kind = "output" if number >= first_output else "parameter"
        buffers[vid] = Buffer(len(buffers), kind, f"%arg{number}", _gpu_type(gpu_plan, vid),
                              gpu_plan["buffers"][str(vid)], (0, 0), number)
    reader = _GpuPlanReader(gpu_plan, buffers)
    thunks = reader.steps(gpu_plan["steps"])
    for b in buffers.values():
        if b.kind in ("parameter", "output"):
            b.live = (0, reader.position)
    assignment = BufferAssignment(list(buffers.values()))
    return assignment, GpuThunkSequence(thunks, assignment)


@dataclass
class GpuThunk(Thunk):
    command_buffer: str | None = None   # the command buffer recording this launch or copy

    def describe(self, assignment: BufferAssignment, indent: str = "") -> list[str]:
        lines = Thunk.describe(replace(self, nested=[]), assignment, indent)
        for number, body in enumerate(self.nested):
            lines.append(f"{indent}  region {number}:")
            lines.extend(_describe_gpu(body, assignment, indent + "    "))
        return lines


class GpuThunkSequence(ThunkSequence):
    def __str__(self) -> str:
        return "\n".join(_describe_gpu(self, self.assignment, "")) + "\n"


def _describe_gpu(thunks: list[Thunk], assignment: BufferAssignment, indent: str) -> list[str]:
    """Thunks in order, the members of each command buffer indented under a line for it."""
    lines, at = [], 0
    while at < len(thunks):
        group = getattr(thunks[at], "command_buffer", None)
        if group is None:
            lines.extend(thunks[at].describe(assignment, indent))
            at += 1
            continue
        end = at
        while end < len(thunks) and getattr(thunks[end], "command_buffer", None) == group:
            end += 1
        members = thunks[at:end]
        head = GpuThunk("command-buffer", group, members[0].position,
                        _unique(b for t in members for b in t.reads),
                        _unique(b for t in members for b in t.writes))
        lines.extend(head.describe(assignment, indent))
        for thunk in members:
            lines.extend(thunk.describe(assignment, indent + "  "))
        at = end
    return lines


class _GpuPlanReader:
    """The GPU plan's steps as thunks; positions count steps in program order."""

    def __init__(self, gpu_plan: dict, buffers: dict[int, Buffer]):
        self.plan, self.buffers = gpu_plan, buffers
        self.bindings = {int(k): v for k, v in gpu_plan.get("bindings", {}).items()}
        self.position = 0
        self.counter = 0

    def buffer(self, vid: int) -> Buffer | None:
        """The buffer a value id lives in: a control-flow value's, its first incoming."""
        seen = set()
        while vid not in self.buffers and vid in self.bindings and vid not in seen:
            seen.add(vid)
            if not self.bindings[vid]:
                return None
            vid = self.bindings[vid][0]
        b = self.buffers.get(vid)
        if b is not None and b.kind == "temp":
            b.live = (b.live[0], max(b.live[1], self.position))
        return b

    def use(self, vids) -> list[Buffer]:
        return _unique(b for b in map(self.buffer, vids) if b is not None)

    def steps(self, steps: list[dict], command_buffer: str | None = None) -> list[Thunk]:
        thunks = []
        for step in steps:
            self.position += 1
            thunk = self.step(step, command_buffer)
            if isinstance(thunk, list):
                thunks.extend(thunk)
            elif thunk is not None:
                thunks.append(thunk)
        return thunks

    def step(self, step: dict, command_buffer: str | None):
        op, position = step["op"], self.position
        if op in ("alloc", "upload"):
            vid = step["id"]
            self.buffers[vid] = Buffer(len(self.buffers), "temp" if op == "alloc" else "constant",
                                       f"%{vid}", _gpu_type(self.plan, vid), step["bytes"],
                                       (position, position))
        elif op == "copy":
            return GpuThunk("memcpy-d2d", "copy", position, self.use([step["src"]]),
                            self.use([step["dst"]]), command_buffer=command_buffer)
        elif op == "launch":
            memrefs = [a for a in step["args"] if a["kind"] == "memref"]
            name = (f"{step['kernel']} grid=({','.join(map(str, step['grid']))}) "
                    f"block=({','.join(map(str, step['block']))})")
            return GpuThunk("kernel-launch", name, position,
                            self.use(a["root"] for a in memrefs if "r" in a["access"]),
                            self.use(a["root"] for a in memrefs if "w" in a["access"]),
                            command_buffer=command_buffer)
        elif op == "download":
            return GpuThunk("memcpy-d2h", f"%{step['id']}", position, self.use([step["src"]]))
        elif op == "custom-call":
            return GpuThunk("custom-call", step["target"], position,
                            self.use(b["root"] for b in step["operands"]),
                            self.use(b["root"] for b in step["results"]), target=step["target"])
        elif op == "command-buffer":
            self.counter += 1
            return self.steps(step["steps"], f"command_buffer.{self.counter}")
        elif op in ("while", "for", "if", "switch"):
            self.counter += 1
            kind = "while" if op in ("while", "for") else "conditional"
            thunk = GpuThunk(kind, f"{kind}.{self.counter}", position)
            regions = {"while": lambda: [step["before"], step["after"]],
                       "for": lambda: [step["body"]]}.get(op, lambda: step["regions"])()
            thunk.nested = [self.steps(region["steps"]) for region in regions]
            for body in thunk.nested:
                for inner in body:
                    thunk.reads += [b for b in inner.reads if b not in thunk.reads]
                    thunk.writes += [b for b in inner.writes if b not in thunk.writes]
            return thunk
        return None


def _gpu_type(gpu_plan: dict, vid: int) -> str:
    m = gpu_plan["memrefs"].get(str(vid))
    if m is None:
        return "?"
    return "memref<" + "".join(f"{n}x" for n in m["sizes"]) + m["element"] + ">"
