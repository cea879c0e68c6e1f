"""XLA's serialized HLO as an input (issue 28): HloModuleProto, the HloProto dumps XLA
writes (--xla_dump_hlo_as_proto) and HloSnapshot with its arguments, all made by JAX in a
process of its own (tests/py/hlo_proto/make_protos.py), detected by content, imported
through the HLO text importer's emitter and run against JAX's results."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kiln
from kiln.errors import KilnError
from kiln.frontend.detect import Format, detect
from kiln.frontend.hlo_proto import (hlo_proto_to_stablehlo, looks_like_hlo_proto,
                                     read_hlo_proto, snapshot_arguments)
from kiln.frontend.hlo_proto import hlo_subset_pb2 as pb

HERE = Path(__file__).parent
KINDS = {"module.pb": "HloModuleProto", "before.pb": "HloProto", "after.pb": "HloProto",
         "snapshot.pb": "HloSnapshot"}


@pytest.fixture(scope="module")
def protos(tmp_path_factory):
    out = tmp_path_factory.mktemp("hlo_proto")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    done = subprocess.run([sys.executable, str(HERE / "hlo_proto" / "make_protos.py"), str(out)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    inputs, results = np.load(out / "inputs.npz"), np.load(out / "results.npz")
    return (out, [inputs[f"arr_{i}"] for i in range(len(inputs.files))],
            [results[f"arr_{i}"] for i in range(len(results.files))])


@pytest.mark.parametrize("name", sorted(KINDS))
def test_each_kind_is_detected_by_content_and_matches_jax(protos, name):
    out, inputs, expected = protos
    data = (out / name).read_bytes()
    assert detect(data) is Format.HLO_PROTO
    assert read_hlo_proto(data).kind == KINDS[name]
    got = kiln.compile(data, filename=name)(*inputs)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


def test_a_proto_file_compiles_from_its_path(protos):
    out, inputs, expected = protos
    got = kiln.compile(out / "after.pb")(*inputs)
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-5)


def test_snapshot_arguments_and_recorded_result(protos):
    out, inputs, expected = protos
    data = (out / "snapshot.pb").read_bytes()
    args = snapshot_arguments(data)
    assert len(args) == len(inputs)
    for a, i in zip(args, inputs):
        np.testing.assert_array_equal(a, i)
    got = kiln.compile(data)(*args)
    snapshot = pb.HloSnapshot()
    snapshot.ParseFromString(data)
    from kiln.frontend.hlo_proto.convert import shape_of
    from kiln.frontend.hlo_proto.literals import literal_leaves
    recorded = literal_leaves(snapshot.result, shape_of(snapshot.result.shape, "result"), "result")
    for g, r in zip(got, recorded):  # XLA's own result of the recorded run
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)


def test_snapshot_runs_with_its_own_arguments_from_the_command_line(protos, capsys):
    out, _, expected = protos
    from kiln.cli.main import main
    result = out / "result.npz"
    assert main(["run", str(out / "snapshot.pb"), "--output", str(result)]) == 0
    saved = np.load(result)
    for i, e in enumerate(expected):
        np.testing.assert_allclose(saved[f"arr_{i}"], e, rtol=1e-5, atol=1e-5)


def test_translate_prints_stablehlo_of_a_proto(protos, capsys):
    out, _, _ = protos
    from kiln.cli.translate import main
    assert main(["--hlo-to-stablehlo", str(out / "module.pb")]) == 0
    text = capsys.readouterr().out
    assert "func.func @main" in text and "stablehlo.while" in text and "stablehlo.scatter" in text


def test_proto_and_text_import_to_the_same_stablehlo(protos):
    # The same module as XLA prints it (HLO text) and as XLA serializes it: one emitter, the
    # proto's fields written as the text's attributes, so the two imports agree op for op.
    out, _, _ = protos
    from kiln.frontend.hlo import hlo_to_stablehlo
    from_proto = hlo_proto_to_stablehlo((out / "module.pb").read_bytes())
    from_text = hlo_to_stablehlo((out / "module.hlo").read_text())
    assert from_proto == from_text
    for op in ("stablehlo.dot_general", "stablehlo.gather", "stablehlo.scatter", "stablehlo.sort",
               "stablehlo.while", "stablehlo.convolution", "stablehlo.reduce_window", "bf16"):
        assert op in from_proto, op


def test_text_and_garbage_are_not_protos(protos):
    out, _, _ = protos
    assert not looks_like_hlo_proto(b"module {\n}\n")
    assert not looks_like_hlo_proto(b"\nHloModule m\nENTRY e { ROOT p = f32[] parameter(0) }")
    assert not looks_like_hlo_proto(b"\x0a\x05hello")  # parses, but is no module
    truncated = (out / "module.pb").read_bytes()[:-7]
    assert not looks_like_hlo_proto(truncated)


def test_a_broken_module_is_a_located_error(protos):
    out, _, _ = protos
    module = pb.HloModuleProto()
    module.ParseFromString((out / "module.pb").read_bytes())
    entry = next(c for c in module.computations if c.name == module.entry_computation_name)
    victim = next(i for i in entry.instructions if i.operand_ids)
    victim.operand_ids[0] = 987654321
    with pytest.raises(KilnError) as info:
        kiln.compile(module.SerializeToString(), filename="broken.pb")
    assert "operand id 987654321" in info.value.message
    assert f"instruction '{victim.name}'" in info.value.location
    assert info.value.location.startswith("broken.pb")


def test_snapshot_arguments_of_a_module_proto_is_an_error(protos):
    out, _, _ = protos
    with pytest.raises(KilnError, match="carries no arguments"):
        snapshot_arguments((out / "module.pb").read_bytes())
