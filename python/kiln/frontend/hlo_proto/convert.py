"""XLA's HloModuleProto -> the HLO text importer's model (kiln.frontend.hlo.parser.Module).

The text importer keeps each instruction's attributes as the text HLO would print for them
(`dimensions={0,1}`, `window={size=3x3 pad=1_1x1_1}`); this module writes the proto's typed
fields in that same form, so one emitter (kiln.frontend.hlo.emitter) serves both formats and
every attribute is checked the same way. Constants travel as arrays (Instruction.literal),
never through text. Locations name the computation and instruction, since a proto has no
lines.
"""
from __future__ import annotations

import numpy as np

from kiln.errors import KilnError

from ..hlo.lexer import Scanner
from ..hlo.parser import Attr, Computation, Instruction, Module
from . import hlo_subset_pb2 as pb
from .literals import literal_leaves, shape_of


# Ops whose `dimensions` is meaningful even when empty (reducing over no dimension, ...).
_EMPTY_DIMENSIONS_MEAN_SOMETHING = {"reduce", "transpose", "reverse", "broadcast"}
# Ops with one called computation, printed as to_apply=.
_TO_APPLY = {"reduce", "reduce-window", "map", "sort", "all-reduce", "all-reduce-start",
             "reduce-scatter", "scatter", "call", "collective-reduce"}
_CALLS = {"fusion", "async-start", "async-update", "async-done"}


class ProtoListing(Scanner):
    """Locations for instructions read from a proto: position k is the k-th instruction,
    reported as `FILE: computation 'c', instruction 'i'` (MLIR locations use line k)."""

    def __init__(self, filename: str):
        super().__init__("", filename)
        self.names: list[tuple[str, str]] = []

    def add(self, computation: str, instruction: str) -> int:
        self.names.append((computation, instruction))
        return len(self.names) - 1

    def line_col(self, pos=None):
        return (pos or 0) + 1, 1

    def where(self, pos=None) -> str:
        if pos is None or not 0 <= pos < len(self.names):
            return self.filename
        comp, ins = self.names[pos]
        return f"{self.filename}: computation '{comp}', instruction '{ins}'"


def _ints(values) -> str:
    return "{" + ",".join(str(int(v)) for v in values) + "}"


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _quoted(text: str) -> str:
    """A quoted HLO string with the escapes the text lexer reads back (lexer.unescape)."""
    out = [_ESCAPES.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 32 else ch) for ch in text]
    return '"' + "".join(out) + '"'


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _window(window) -> str:
    dims = list(window.dimensions)
    if not dims:
        return "{}"
    x = lambda values: "x".join(str(v) for v in values)  # noqa: E731
    parts = [f"size={x(d.size for d in dims)}",
             f"stride={x(d.stride or 1 for d in dims)}",
             f"pad={x(f'{d.padding_low}_{d.padding_high}' for d in dims)}",
             f"lhs_dilate={x(d.base_dilation or 1 for d in dims)}",
             f"rhs_dilate={x(d.window_dilation or 1 for d in dims)}",
             f"rhs_reversal={x(int(d.window_reversal) for d in dims)}"]
    return "{" + " ".join(parts) + "}"


def _dim_labels(d) -> str:
    """ConvolutionDimensionNumbers as HLO's dim_labels (b01f_01io->b01f)."""
    def labels(rank, named, spatial):
        out = ["?"] * rank
        for letter, dim in named:
            out[dim] = letter
        for i, dim in enumerate(spatial):
            out[dim] = str(i)
        return "".join(out)
    n = len(d.input_spatial_dimensions) + 2
    return (labels(n, [("b", d.input_batch_dimension), ("f", d.input_feature_dimension)],
                   d.input_spatial_dimensions) + "_"
            + labels(n, [("i", d.kernel_input_feature_dimension),
                         ("o", d.kernel_output_feature_dimension)], d.kernel_spatial_dimensions)
            + "->"
            + labels(n, [("b", d.output_batch_dimension), ("f", d.output_feature_dimension)],
                     d.output_spatial_dimensions))


def _replica_groups(ins) -> str | None:
    devices = ins.collective_device_list
    if ins.HasField("collective_device_list") and devices.HasField("iota_replica_group_list"):
        iota = devices.iota_replica_group_list
        text = (f"[{iota.num_replica_groups},{iota.num_devices_per_group}]"
                f"<=[{','.join(str(d) for d in iota.iota_reshape_dims)}]")
        if list(iota.iota_transpose_perm):
            text += f"T({','.join(str(p) for p in iota.iota_transpose_perm)})"
        return text
    groups = list(devices.replica_groups) or list(ins.replica_groups)
    if not groups:
        return None
    return "{" + ",".join(_ints(g.replica_ids) for g in groups) + "}"


def _attributes(ins, opcode: str, called: list[str]) -> dict[str, str]:
    """The instruction's proto fields as HLO attribute text, per field the opcode uses."""
    a: dict[str, str] = {}
    dims = list(ins.dimensions)
    if opcode == "iota":
        a["iota_dimension"] = str(dims[0] if dims else 0)
    elif dims or opcode in _EMPTY_DIMENSIONS_MEAN_SOMETHING:
        a["dimensions"] = _ints(dims)
    if opcode == "get-tuple-element":
        a["index"] = str(ins.tuple_index)
    if ins.slice_dimensions:
        a["slice"] = "{" + ",".join(f"[{s.start}:{s.limit}:{s.stride or 1}]"
                                    for s in ins.slice_dimensions) + "}"
    if ins.HasField("padding_config"):
        a["padding"] = "x".join(f"{p.edge_padding_low}_{p.edge_padding_high}_{p.interior_padding}"
                                for p in ins.padding_config.dimensions)
    if ins.HasField("window"):
        a["window"] = _window(ins.window)
    if ins.HasField("convolution_dimension_numbers"):
        a["dim_labels"] = _dim_labels(ins.convolution_dimension_numbers)
        a["feature_group_count"] = str(ins.feature_group_count or 1)
        a["batch_group_count"] = str(ins.batch_group_count or 1)
    if ins.HasField("dot_dimension_numbers"):
        d = ins.dot_dimension_numbers
        for key, values in (("lhs_batch_dims", d.lhs_batch_dimensions),
                            ("rhs_batch_dims", d.rhs_batch_dimensions),
                            ("lhs_contracting_dims", d.lhs_contracting_dimensions),
                            ("rhs_contracting_dims", d.rhs_contracting_dimensions)):
            if values:
                a[key] = _ints(values)
    if ins.HasField("precision_config") and any(ins.precision_config.operand_precision):
        # (all DEFAULT is left out, as XLA's printer does)
        names = [pb.PrecisionConfig.Precision.Name(p).lower()
                 for p in ins.precision_config.operand_precision]
        a["operand_precision"] = "{" + ",".join(names) + "}"
    if ins.HasField("gather_dimension_numbers"):
        g = ins.gather_dimension_numbers
        for key in ("offset_dims", "collapsed_slice_dims", "start_index_map",
                    "operand_batching_dims", "start_indices_batching_dims"):
            a[key] = _ints(getattr(g, key))
        a["index_vector_dim"] = str(g.index_vector_dim)
        a["slice_sizes"] = _ints(ins.gather_slice_sizes)
    if ins.HasField("scatter_dimension_numbers"):
        s = ins.scatter_dimension_numbers
        for key in ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
                    "input_batching_dims", "scatter_indices_batching_dims"):
            a[key] = _ints(getattr(s, key))
        a["index_vector_dim"] = str(s.index_vector_dim)
    if opcode in ("gather", "scatter"):
        a["indices_are_sorted"] = _bool(ins.indices_are_sorted)
    if opcode == "scatter":
        a["unique_indices"] = _bool(ins.unique_indices)
    if ins.comparison_direction:
        a["direction"] = ins.comparison_direction
    if ins.comparison_type:
        a["type"] = ins.comparison_type
    if opcode == "reduce-precision":
        a["exponent_bits"], a["mantissa_bits"] = str(ins.exponent_bits), str(ins.mantissa_bits)
    if ins.dynamic_slice_sizes:
        a["dynamic_slice_sizes"] = _ints(ins.dynamic_slice_sizes)
    if opcode == "rng":
        a["distribution"] = {pb.RNG_UNIFORM: "rng_uniform", pb.RNG_NORMAL: "rng_normal"}.get(
            ins.distribution, "rng_invalid")
    if opcode == "rng-bit-generator":
        a["algorithm"] = pb.RandomAlgorithm.Name(ins.rng_algorithm).lower()
    if opcode == "fft":
        a["fft_type"] = pb.FftType.Name(ins.fft_type)
        a["fft_length"] = _ints(ins.fft_length)
    if ins.HasField("triangular_solve_options"):
        t = ins.triangular_solve_options
        a["left_side"], a["lower"] = _bool(t.left_side), _bool(t.lower)
        a["unit_diagonal"] = _bool(t.unit_diagonal)
        a["transpose_a"] = pb.TriangularSolveOptions.Transpose.Name(t.transpose_a)
    if opcode == "cholesky":
        a["lower"] = _bool(ins.cholesky_options.lower)
    if opcode.startswith("batch-norm"):
        a["epsilon"] = repr(float(np.float32(ins.epsilon)))
        a["feature_index"] = str(ins.feature_index)
    if opcode == "topk":
        a["k"], a["largest"] = str(ins.k), _bool(ins.largest)
    if opcode == "sort" and ins.is_stable:
        a["is_stable"] = "true"
    if opcode == "custom-call":
        a["custom_call_target"] = _quoted(ins.custom_call_target)
        if ins.custom_call_api_version:
            a["api_version"] = pb.CustomCallApiVersion.Name(ins.custom_call_api_version)
        if ins.custom_call_has_side_effect:
            a["custom_call_has_side_effect"] = "true"
        if ins.constrain_layout:
            a["operand_layout_constraints"] = "{" + ", ".join(
                str(shape_of(s, ins.name)) for s in ins.operand_shapes_with_layout) + "}"
        if called:
            a["called_computations"] = "{" + ", ".join(called) + "}"
    if ins.backend_config and opcode != "fusion":
        a["backend_config"] = _quoted(ins.backend_config.decode("utf-8", errors="replace"))
    groups = _replica_groups(ins)
    if groups is not None:
        a["replica_groups"] = groups
    if ins.source_target_pairs:
        a["source_target_pairs"] = "{" + ",".join(f"{{{p.source},{p.target}}}"
                                                  for p in ins.source_target_pairs) + "}"
    if ins.channel_id > 0:
        a["channel_id"] = str(ins.channel_id)
    if ins.use_global_device_ids:
        a["use_global_device_ids"] = "true"
    if ins.is_host_transfer:
        a["is_host_transfer"] = "true"
    if ins.infeed_config:
        a["infeed_config"] = _quoted(ins.infeed_config.decode("utf-8", errors="replace"))
    if ins.outfeed_config:
        a["outfeed_config"] = _quoted(ins.outfeed_config.decode("utf-8", errors="replace"))
    if opcode == "fusion":
        a["kind"] = ins.fusion_kind or "kLoop"
    return a


def _called(ins, opcode: str, names: list[str], fail) -> dict[str, str]:
    """called_computation_ids as the attribute HLO text names them, per opcode."""
    if not names:
        return {}
    if opcode in _TO_APPLY:
        return {"to_apply": names[0]}
    if opcode in _CALLS:
        return {"calls": names[0]}
    if opcode == "while":
        if len(names) != 2:
            fail(f"while calls {len(names)} computations, expected a body and a condition")
        return {"body": names[0], "condition": names[1]}  # XLA's order: body, condition
    if opcode == "select-and-scatter":
        if len(names) != 2:
            fail(f"select-and-scatter calls {len(names)} computations, expected 2")
        return {"select": names[0], "scatter": names[1]}
    if opcode == "conditional":
        return {"branch_computations": "{" + ", ".join(names) + "}"}
    if opcode == "custom-call":
        return {}  # written as called_computations= with the other custom-call fields
    return {"to_apply": names[0]}


def to_module(proto, filename: str) -> Module:
    """An HloModuleProto as the text parser's Module."""
    listing = ProtoListing(filename)
    if not proto.computations:
        raise KilnError("the HLO module proto has no computations", location=filename)
    comp_names: dict[int, str] = {}
    for c in proto.computations:
        if c.name in comp_names.values() or not c.name or c.id in comp_names:
            raise KilnError(f"computation '{c.name}' (id {c.id}) has an empty or repeated name "
                            "or id", location=filename)
        comp_names[c.id] = c.name
    computations: dict[str, Computation] = {}
    for c in proto.computations:
        computations[c.name] = _computation(c, comp_names, listing)
    entry = proto.entry_computation_name or comp_names.get(proto.entry_computation_id, "")
    if entry not in computations:
        raise KilnError(f"the entry computation '{entry}' is not among the module's "
                        "computations", location=filename)
    computations[entry].is_entry = True
    attrs = _module_attrs(proto, filename)
    return Module(proto.name or "hlo_module", attrs, computations, entry, listing)


def _computation(c, comp_names, listing: ProtoListing) -> Computation:
    by_id = {i.id: i for i in c.instructions}
    if len(by_id) != len(c.instructions):
        raise KilnError(f"computation '{c.name}' repeats an instruction id",
                        location=listing.filename)
    comp = Computation(c.name, pos=len(listing.names))
    for ins in c.instructions:
        pos = listing.add(c.name, ins.name)
        where = listing.where(pos)

        def fail(msg, where=where):
            raise KilnError(f"{ins.opcode} '{ins.name}': {msg}", location=where)
        if not ins.opcode:
            fail("instruction without an opcode")
        operands = []
        for oid in ins.operand_ids:
            if oid not in by_id:
                fail(f"operand id {oid} is not an instruction of computation '{c.name}'")
            operands.append(by_id[oid].name)
        called = []
        for cid in ins.called_computation_ids:
            if cid not in comp_names:
                fail(f"calls computation id {cid}, which the module does not have")
            called.append(comp_names[cid])
        attrs = _attributes(ins, ins.opcode, called)
        attrs.update(_called(ins, ins.opcode, called, fail))
        if ins.opcode == "conditional" and ins.operand_ids and \
                by_id[ins.operand_ids[0]].shape.element_type == pb.PRED:
            if len(called) != 2:
                fail(f"a conditional on a pred calls {len(called)} computations, expected 2")
            attrs.pop("branch_computations")
            attrs["true_computation"], attrs["false_computation"] = called[0], called[1]
        shape = shape_of(ins.shape, where)
        payload, literal = None, None
        if ins.opcode == "parameter":
            payload = str(ins.parameter_number)
        elif ins.opcode == "constant":
            literal = literal_leaves(ins.literal, shape, where)
        comp.instructions.append(Instruction(
            ins.name, shape, ins.opcode, operands,
            [shape_of(by_id[o].shape, where) for o in ins.operand_ids],
            {k: Attr(v, pos) for k, v in attrs.items()}, pos,
            is_root=ins.id == c.root_id, payload=payload, literal=literal))
    if comp.instructions and not any(i.is_root for i in comp.instructions):
        comp.instructions[-1].is_root = True
    return comp


def _module_attrs(proto, filename: str) -> dict[str, Attr]:
    attrs: dict[str, Attr] = {}
    counts = proto.device_assignment
    if proto.HasField("device_assignment"):
        if counts.replica_count > 1:
            attrs["replica_count"] = Attr(str(counts.replica_count), 0)
        if counts.computation_count > 1:
            attrs["num_partitions"] = Attr(str(counts.computation_count), 0)
    program = proto.host_program_shape
    if proto.HasField("host_program_shape"):
        params = ", ".join(str(shape_of(p, filename)) for p in program.parameters)
        attrs["entry_computation_layout"] = Attr(
            f"{{({params})->{shape_of(program.result, filename)}}}", 0)
    entries = proto.input_output_alias.entries
    if entries:
        attrs["input_output_alias"] = Attr("{ " + ", ".join(
            f"{_ints(e.output_shape_index)}: ({e.parameter_number}, "
            f"{_ints(e.parameter_shape_index)})" for e in entries) + " }", 0)
    return attrs
