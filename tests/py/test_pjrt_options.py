"""The Python side of Kiln's PJRT plugin, in process: the .proto reader (kiln/pjrt/protos.py),
compile options as jaxlib serializes them, the device assignment Kiln reports back, element
types, and the allowlist of XLA:CPU lowering rules."""
from __future__ import annotations

import numpy as np
import pytest

from kiln.errors import KilnError
from kiln.pjrt import element_types, protos
from kiln.pjrt.compile_options import parse_compile_options

jax = pytest.importorskip("jax")
from jax._src.lib import xla_client as xc  # noqa: E402


def jaxlib_options(replicas: int, partitions: int, assignment=None) -> bytes:
    options = xc.CompileOptions()
    build = options.executable_build_options
    build.num_replicas, build.num_partitions = replicas, partitions
    if assignment is not None:
        build.device_assignment = xc.DeviceAssignment.create(np.array(assignment, np.int32))
    return options.SerializeAsString()


def test_default_options_are_one_device():
    options = parse_compile_options(jaxlib_options(1, 1), num_devices=1)
    assert (options.num_replicas, options.num_partitions, options.device_ids) == (1, 1, [0])


def test_device_assignment_from_jaxlib():
    options = parse_compile_options(jaxlib_options(2, 2, [[3, 1], [0, 2]]), num_devices=4)
    assert options.devices == ((3, 1), (0, 2))
    assert options.device_ids == [3, 1, 0, 2]  # replica-major


def test_serialized_device_assignment_reads_back_in_jaxlib():
    """The DeviceAssignmentProto Kiln reports is the one jaxlib itself serializes."""
    assignment = [[2, 0], [1, 3]]
    ours = parse_compile_options(jaxlib_options(2, 2, assignment), 4).serialized_device_assignment()
    theirs = xc.DeviceAssignment.create(np.array(assignment, np.int32)).serialize()
    assert ours == theirs


def test_too_many_devices_is_a_clear_error():
    with pytest.raises(KilnError, match="KILN_DEVICES"):
        parse_compile_options(jaxlib_options(1, 4), num_devices=2)
    with pytest.raises(KilnError, match="does not exist"):
        parse_compile_options(jaxlib_options(1, 2, [[0, 5]]), num_devices=2)


def test_damaged_options_are_a_clear_error():
    with pytest.raises(KilnError, match="unreadable compile options"):
        parse_compile_options(b"\x1a\xff\xff\xff", num_devices=1)


def test_proto_reader_builds_nested_messages():
    classes = protos.messages("compile_options.proto")
    assignment = classes["kiln.pjrt.DeviceAssignmentProto"](replica_count=1, computation_count=2)
    assignment.computation_devices.add(replica_device_ids=[4])
    again = classes["kiln.pjrt.DeviceAssignmentProto"].FromString(assignment.SerializeToString())
    assert list(again.computation_devices[0].replica_device_ids) == [4]


def test_proto_reader_refuses_what_it_does_not_know(tmp_path):
    with pytest.raises(KilnError, match="unsupported .proto construct 'enum'"):
        protos._parse('syntax = "proto3";\nenum E { A = 0; }', "x.proto")
    with pytest.raises(KilnError, match="unknown message type 'Missing'"):
        protos._parse('syntax = "proto3";\nmessage M { Missing m = 1; }', "x.proto")
    with pytest.raises(KilnError, match="x.proto:2"):
        protos._parse('syntax = "proto3";\nmessage M { int32 a = 1; } @', "x.proto")


def test_element_types_round_trip_and_refuse_others():
    for code, dtype in element_types.DTYPES.items():
        assert element_types.code_of(dtype, "x") == code
    assert element_types.code_of(np.float32, "x") == 11 and element_types.code_of(np.bool_, "x") == 1
    with pytest.raises(KilnError, match="cannot be returned through PJRT"):
        element_types.code_of(np.dtype("U3"), "result 0")
    with pytest.raises(KilnError, match="PJRT element type 23"):  # TOKEN
        element_types.dtype_of(23)


def test_cpu_rule_allowlist_names_real_primitives():
    """Every primitive the plugin takes XLA:CPU's rule for has one (a renamed primitive in a
    newer jax would otherwise silently fall back to the generic rule)."""
    import jax._src.lax.linalg  # noqa: F401
    from jax._src.interpreters import mlir
    from kiln.pjrt.lowering import CPU_RULES

    cpu_rules = {p.name for p in mlir._platform_specific_lowerings["cpu"]}
    assert set(CPU_RULES) <= cpu_rules
    assert {"debug_callback", "debug_print"} & set(CPU_RULES) == set()


def options_with(overrides) -> bytes:
    options = xc.CompileOptions()
    options.env_option_overrides = list(overrides.items())
    return options.SerializeAsString()


def test_compiler_options_are_checked_as_xla_checks_them():
    """jax.jit(..., compiler_options=...): a name outside XLA's xla_* is refused, a bool
    option's value is checked, XLA's own names are taken with a note that they do nothing."""
    with pytest.raises(KilnError, match="No such compile option: 'invalid_key'"):
        parse_compile_options(options_with({"invalid_key": "invalid_value"}), num_devices=1)
    with pytest.raises(KilnError, match="'invalid_value' is not a valid bool value"):
        parse_compile_options(options_with({"xla_embed_ir_in_executable": "invalid_value"}), 1)
    with pytest.raises(KilnError, match="takes a bool"):
        parse_compile_options(options_with({"xla_embed_ir_in_executable": 3}), 1)
    with pytest.warns(UserWarning, match="'xla_dump_max_hlo_modules' has no effect"):
        options = parse_compile_options(options_with({"xla_dump_max_hlo_modules": 200,
                                                      "xla_embed_ir_in_executable": "true"}), 1)
    assert options.device_ids == [0]
