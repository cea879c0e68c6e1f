"""Kiln's dialects (dialects/): the registered `check` ops, the `kiln` names, Shardy's removal,
and contexts that allow no unregistered dialect."""
from __future__ import annotations

import re

import numpy as np
import pytest
from torch_mlir import ir

import kiln
from kiln.context import make_context
from kiln.dialects import check, sdy
from kiln.dialects import kiln as names
from kiln.lowering import trust

CUSTOM = """func.func @main() {
  %a = stablehlo.constant dense<[1, 2]> : tensor<2xi32>
  %f = stablehlo.constant dense<1.0> : tensor<f32>
  check.expect_eq %a, %a : tensor<2xi32>
  check.expect_eq_const %a,
      dense<[1, 2]> : tensor<2xi32>
  check.expect_almost_eq %f, %f, tolerance = 0.1 : tensor<f32>
  check.expect_close %f, %f, max_ulp_difference = 3 : tensor<f32>, tensor<f32>
  func.return
}
"""


def _check_ops(module: ir.Module) -> list:
    body = module.body.operations[0].regions[0].blocks[0]
    return [op for op in body.operations if op.operation.name.startswith("check.")]


def _parse(text: str, ctx: ir.Context) -> ir.Module:
    with ctx:
        return ir.Module.parse(check.read_check_syntax(text, "t.mlir"))


def test_contexts_register_check_and_kiln_and_allow_nothing_else():
    ctx = make_context()
    assert not ctx.allow_unregistered_dialects
    assert ctx.is_dialect_loaded("check") and ctx.is_dialect_loaded("kiln")


def test_custom_syntax_parses_into_the_registered_ops():
    module = _parse(CUSTOM, make_context())
    ops = _check_ops(module)
    assert [type(op) for op in ops] == [check.ExpectEqOp, check.ExpectEqConstOp,
                                        check.ExpectAlmostEqOp, check.ExpectCloseOp]
    assert str(ops[2].operation.attributes["tolerance"]) == "1.000000e-01 : f64"


def test_custom_syntax_round_trips():
    ctx = make_context()
    module = _parse(CUSTOM, ctx)  # held: its ops die with it
    printed = [check.custom_syntax(op) for op in _check_ops(module)]
    assert printed[0] == "check.expect_eq %c, %c : tensor<2xi32>"
    assert printed[3] == ("check.expect_close %cst, %cst, max_ulp_difference = 3 : "
                          "tensor<f32>, tensor<f32>")
    # Printed back into a program, the ops read the same again.
    body = "\n".join(f"  {line}" for line in printed)
    again = CUSTOM.split("  check.")[0].replace("%a", "%c").replace("%f", "%cst") + body + \
        "\n  func.return\n}\n"
    module = _parse(again, ctx)
    assert [check.custom_syntax(op) for op in _check_ops(module)] == printed


def test_custom_syntax_keeps_line_numbers_and_positions():
    text = check.read_custom_syntax(CUSTOM, "t.mlir")
    assert text.count("\n") == CUSTOM.count("\n")
    assert text.splitlines()[8] == "  func.return"
    assert 'loc("-":5:3)' in text.splitlines()[4]


def test_generic_properties_become_attributes():
    text = ('  "check.expect_eq_const"(%0) <{value = dense<[6, 8]> : tensor<2xui8>}> : '
            "(tensor<2xui8>) -> ()")
    assert check.read_check_syntax(text, "t.mlir") == \
        '  "check.expect_eq_const"(%0) {value = dense<[6, 8]> : tensor<2xui8>} : (tensor<2xui8>) -> ()'


@pytest.mark.parametrize("statement, message", [
    ('"check.expect_eq"(%a) : (tensor<2xf32>) -> ()', "takes 2 tensor operand"),
    ('"check.expect_eq"(%a, %b) : (tensor<2xf32>, tensor<2xf64>) -> ()', "different types"),
    ('"check.expect_eq_const"(%a) {value = dense<1> : tensor<2xi32>} : (tensor<2xf32>) -> ()',
     "expects 'value' of type tensor<2xf32>"),
    ('"check.expect_almost_eq"(%a, %a) {tolerance = "x"} : (tensor<2xf32>, tensor<2xf32>) -> ()',
     "expects 'tolerance' to be a FloatAttr"),
    ('"check.expect_serialized_eq"(%a) : (tensor<2xf32>) -> ()', 'attribute "probe_id"'),
])
def test_verifier_errors_are_located_kiln_errors(statement, message):
    src = f"func.func @main(%a: tensor<2xf32>, %b: tensor<2xf64>) {{\n  {statement}\n  return\n}}\n"
    with pytest.raises(kiln.KilnError, match=re.escape(message)) as info:
        kiln.compile(src, filename="v.mlir")
    assert info.value.location == "v.mlir:2:3"


def test_unknown_check_op_in_custom_form():
    src = "func.func @main(%a: tensor<2xf32>) {\n  check.expect_maybe %a : tensor<2xf32>\n  return\n}\n"
    with pytest.raises(kiln.KilnError, match="unknown op 'check.expect_maybe'") as info:
        kiln.compile(src, filename="c.mlir")
    assert info.value.location == "c.mlir:2:3" and "check.expect_eq" in info.value.hint


@pytest.mark.parametrize("expected, passed", [("(3.0,5.0)", True), ("(3.0,5.5)", False)])
def test_complex_const_check_is_outlined_and_evaluated(expected, passed):
    exe = kiln.compile(f"""func.func @main() {{
      %c = stablehlo.constant dense<[(1.5,2.5)]> : tensor<1xcomplex<f32>>
      %0 = stablehlo.add %c, %c : tensor<1xcomplex<f32>>
      check.expect_eq_const %0, dense<[{expected}]> : tensor<1xcomplex<f32>>
      return
    }}""")
    assert [o.passed for o in exe.run_checks()[1]] == [passed]


@pytest.mark.parametrize("statement, op, column", [
    ('%0 = "foo.bar"(%a) : (tensor<2xf32>) -> tensor<2xf32>', "foo.bar", 8),
    ("%0 = foo.bar %a : tensor<2xf32>", "foo.bar", 8),
    ('%0 = "kiln.region"(%a) : (tensor<2xf32>) -> tensor<2xf32>', "kiln.region", 8),
    ('%0 = "check.expect_sometimes"(%a) : (tensor<2xf32>) -> tensor<2xf32>', "check.expect_sometimes", 8),
])
def test_unknown_op_is_a_located_error_with_a_hint(statement, op, column):
    src = (f"func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {{\n  {statement}\n"
           "  return %0 : tensor<2xf32>\n}\n")
    with pytest.raises(kiln.KilnError, match=f"unknown op '{op}'") as info:
        kiln.compile(src, filename="u.mlir")
    assert info.value.location == f"u.mlir:2:{column}"
    assert "StableHLO" in info.value.hint


def test_unknown_op_in_bytecode_is_a_kiln_error():
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = True
    with ctx:
        module = ir.Module.parse('"foo.bar"() : () -> ()')
    with pytest.raises(kiln.KilnError, match="unknown dialect 'foo'") as info:
        kiln.compile(module)
    assert "StableHLO" in info.value.hint


def test_kiln_opaque_type_is_registered():
    # HLO's opaque element type (kiln.layout) must parse without unregistered dialects.
    ctx = make_context()
    assert str(ir.Type.parse("tensor<!kiln.opaque>", ctx)) == "tensor<!kiln.opaque>"
    with pytest.raises(ir.MLIRError):
        ir.Type.parse("!kiln.handle", ctx)


def test_the_trust_boundary_admits_front_end_attributes_only():
    internal = [names.CHECKS, names.USER_RESULTS, names.RESULT_SOURCES, names.SCALARIZE,
                names.OUTLINED_CONTRACTION, names.CUSTOM_CALL_SITE, names.CUSTOM_CALL_TARGET]
    ctx = make_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.parse("func.func @main(%x: tensor<f32>) -> tensor<f32> {\n"
                                 "  return %x : tensor<f32>\n}")
        func = module.body.operations[0].operation
        func.attributes[names.FUSION_KIND] = ir.StringAttr.get("x")  # a front end's (where
        trust.check_input(module)  # each may sit: tests/py/test_trust_allowlist.py)
        for name in internal:
            func.attributes[name] = ir.UnitAttr.get()
            with pytest.raises(kiln.KilnError, match=f"attribute '{name}'"):
                trust.check_input(module)
            del func.attributes[name]


# -- Shardy ------------------------------------------------------------------------------------
SHARDED = """module @jit_f attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func public @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>})
      -> (tensor<8xf32> {jax.result_info = "result", sdy.sharding = #sdy.sharding<@mesh, [{}]>}) {
    %0 = sdy.sharding_constraint %arg0 <@mesh, [{"y"}]> : tensor<8xf32>
    %1 = stablehlo.sine %0 : tensor<8xf32>
    return %1 : tensor<8xf32>
  }
}
"""


def _jaxlib():
    pytest.importorskip("jax")
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib import _jax
    return jax_mlir, _jax


def test_shardy_cannot_be_parsed_by_kiln_itself():
    with pytest.raises(kiln.KilnError, match="unknown op 'sdy.mesh'") as info:
        kiln.compile(SHARDED, filename="s.mlir")
    assert info.value.location == "s.mlir:2:3" and "exp.serialize()" in info.value.hint


def test_shardy_is_stripped_in_jaxlibs_context():
    jax_mlir, _ = _jaxlib()
    with jax_mlir.make_ir_context():
        module = jax_mlir.ir.Module.parse(SHARDED)
        assert sdy.has_shardy(module)
        sdy.strip_shardy(module, jax_mlir.ir)
        assert not sdy.has_shardy(module)
        text = str(module)
    assert "sdy" not in text and 'jax.result_info = "result"' in text


def _sharded_export():
    """A JAX export over a 2x2 mesh (an abstract one: no devices needed) with Shardy's mesh,
    argument shardings and a sharding constraint."""
    jax = pytest.importorskip("jax")
    pytest.importorskip("flatbuffers", reason="jax's Exported.serialize() needs flatbuffers")
    from jax.sharding import AbstractMesh, AxisType, NamedSharding, PartitionSpec
    mesh = AbstractMesh((2, 2), ("x", "y"), axis_types=(AxisType.Auto, AxisType.Auto))

    def f(a):
        return jax.numpy.sin(jax.lax.with_sharding_constraint(
            a, NamedSharding(mesh, PartitionSpec("y")))) + 1

    arg = jax.ShapeDtypeStruct((8,), np.float32, sharding=NamedSharding(mesh, PartitionSpec("x")))
    return jax.export.export(jax.jit(f), platforms=["cpu"])(arg)


def test_sharded_jax_export_compiles_and_runs(tmp_path):
    exp = _sharded_export()
    assert "sdy.sharding_constraint" in exp.mlir_module()
    x = np.linspace(0, 1, 8, dtype=np.float32)
    for data in (bytes(exp.serialize()), bytes(exp.mlir_module_serialized)):
        np.testing.assert_allclose(np.asarray(kiln.compile(data)(x)).reshape(8), np.sin(x) + 1, rtol=1e-6)
    path = tmp_path / "sharded.bin"
    path.write_bytes(exp.serialize())
    assert "sdy" not in str(kiln.load(str(path)))
