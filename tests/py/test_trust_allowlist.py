"""The input allowlist and the lowered-code check (lowering/input_allowlist.py,
lowering/llvm_function_attributes.py, lowering/trust.py), and the program-side errors of
issue 25's class 8: each input here once ran code, crashed the process or gave an
InternalError; now each is a result or a located KilnError."""
from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import numpy as np
import pytest
from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo

import kiln
from kiln.context import make_context
from kiln.errors import InternalError
from kiln.lowering import input_allowlist
from kiln.lowering.trust import check_input, check_lowered
from kiln.runtime.jax_checks import format_assertion

ADD = ("func.func @main(%x: tensor<2xf32>) -> tensor<2xf32>{ATTRS} {{\n"
       "  %0 = stablehlo.add %x, %x : tensor<2xf32>\n"
       "  return %0 : tensor<2xf32>\n}}")
X = np.array([1.0, -2.0], np.float32)


def _program(attributes: str) -> str:
    return ADD.format(ATTRS=f" attributes {{{attributes}}}" if attributes else "")


def _bytecode(text: str) -> bytes:
    with make_context():
        module = ir.Module.parse(text)
        buf = io.BytesIO()
        module.operation.write_bytecode(buf)
    return buf.getvalue()


def _portable_artifact(text: str) -> bytes:
    return _stablehlo.serialize_portable_artifact_str(text, _stablehlo.get_current_version())


def _jax_export(text: str) -> bytes:
    jax = pytest.importorskip("jax")
    exported = jax.export.export(jax.jit(lambda x: x + x))(np.zeros(2, np.float32))
    forged = dataclasses.replace(exported, mlir_module_serialized=_portable_artifact(text))
    return bytes(forged.serialize())


# -- class 1: native code named by the program -------------------------------------------------
PROBE_STACK = 'passthrough = [["probe-stack", "abort"], ["stack-probe-size", "1"]]'


@pytest.mark.parametrize("form", ["text", "bytecode", "portable", "jax"])
def test_passthrough_never_reaches_llvm_in_any_form(form):
    # It made LLVM call libc's abort() in main's prologue: SIGABRT in the caller.
    text = _program(PROBE_STACK)
    source = {"text": lambda: text, "bytecode": lambda: _bytecode(text),
              "portable": lambda: _portable_artifact(text), "jax": lambda: _jax_export(text)}[form]()
    with pytest.raises(kiln.KilnError, match=r"attribute 'passthrough' on @\w*main is not allowed") as info:
        kiln.compile(source, isolate=False)
    assert not isinstance(info.value, InternalError)
    assert "steer LLVM" in info.value.hint


@pytest.mark.parametrize("attribute", [
    "CConv = 7 : i64", "linkage = 3 : i64", "personality = @main", 'section = "x"',
    'garbage_collector = "x"', "llvm.emit_c_interface", "frame_pointer = 1 : i64",
    "no_inline",   # an inherent attribute of func.func that LLVM would honour
])
def test_llvm_function_attributes_are_refused_on_input(attribute):
    # Integer CConv/linkage crashed LLVM; with isolate=False that killed the caller.
    with pytest.raises(kiln.KilnError, match="is not allowed in an input program") as info:
        kiln.compile(_program(attribute), filename="evil.mlir", isolate=False)
    assert info.value.location == "evil.mlir:1:1"


@pytest.mark.parametrize("attrs", ["{llvm.noalias}", '{llvm.align = 16 : i64}', '{foo.bar = 1}'])
def test_unknown_argument_attributes_are_refused(attrs):
    src = (f"func.func @main(%x: tensor<2xf32> {attrs}) -> tensor<2xf32> {{\n"
           "  return %x : tensor<2xf32>\n}")
    with pytest.raises(kiln.KilnError, match=r"attribute '[\w.]+' on argument 0 of @main"):
        kiln.compile(src, isolate=False)


def test_xla_metadata_kiln_does_not_keep_is_dropped_and_the_program_runs():
    src = ('module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32, '
           'mhlo.future_thing = "x", xla.meta = 1 : i64} {\n'
           'func.func @main(%x: tensor<2xf32> {mhlo.sharding = "{replicated}", jax.new_arg = 1 : i64,'
           ' tf.something = "y"}) -> (tensor<2xf32> {jax.result_info = "r", sdy.sharding = "s"})'
           ' attributes {mhlo.frontend_attributes = {a = "b"}, jax.unknown = true} {\n'
           '  %0 = stablehlo.add %x, %x {mhlo.sharding = "{replicated}", tf.note = "n"} : tensor<2xf32>\n'
           '  return %0 : tensor<2xf32>\n}\n}')
    exe = kiln.compile(src)
    np.testing.assert_array_equal(exe(X)[0], X + X)
    imported = exe.ir("verify")
    for dropped in ("mhlo.future_thing", "xla.meta", "jax.new_arg", "tf.something",
                    "sdy.sharding", "jax.unknown", "tf.note"):
        assert dropped not in imported
    for kept in ("mhlo.sharding", "mhlo.frontend_attributes"):
        assert kept in imported


@pytest.mark.parametrize("attribute, match", [
    ("foo.bar = 1 : i64", "attribute 'foo.bar' on @main is not allowed"),
    ("kiln.checks = []", "attribute 'kiln.checks' on @main is not allowed"),
    ("kiln.layout = \"{0}\"", "attribute 'kiln.layout' on @main is not allowed"),  # args only
])
def test_other_attributes_are_refused_with_their_location(attribute, match):
    with pytest.raises(kiln.KilnError, match=match) as info:
        kiln.compile(_program(attribute), filename="p.mlir", isolate=False)
    assert info.value.location == "p.mlir:1:1"


@pytest.mark.parametrize("module_attrs, match", [
    ('mhlo.num_partitions = "two"', "'mhlo.num_partitions' on 'builtin.module' must be an integer"),
    ("kiln.jax.info = 3 : i64", "kiln.jax.info attribute is not a calling convention"),
    ('kiln.jax.info = "{not json"', "kiln.jax.info attribute is not a calling convention"),
])
def test_kept_attributes_of_the_wrong_kind_are_refused(module_attrs, match):
    src = f"module attributes {{{module_attrs}}} {{\n{_program('')}\n}}"
    with pytest.raises(kiln.KilnError, match=match):
        kiln.compile(src, isolate=False)


def test_layout_notes_of_xlas_hlo_import_are_kept_only_in_their_form():
    """torch_xla's and TensorFlow's StableHLO carry XLA's `result_layout` and `xla_shape` on
    ops whose layout is not the default: kept (they do not change the values), of their kind
    only."""
    note = '{result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[3,2]{0,1}"}'
    src = ("func.func @main(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {\n"
           f"  %0 = stablehlo.transpose %x, dims = [1, 0] {note} : (tensor<2x3xf32>) -> tensor<3x2xf32>\n"
           "  return %0 : tensor<3x2xf32>\n}")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(kiln.compile(src, isolate=False)(x)[0], x.T)
    for bad, match in [("result_layout = \"{0,1}\"", "'result_layout' .* must be a 1-D integer"),
                       ("xla_shape = 3 : i64", "'xla_shape' .* must be a string")]:
        with pytest.raises(kiln.KilnError, match=match):
            kiln.compile(src.replace(note, "{" + bad + "}"), isolate=False)


def test_values_the_bindings_cannot_read_are_judged_without_reading_them():
    # A complex dense value aborts the process when the bindings read it (dialects/check.py):
    # the allowlist reads kinds through MLIR's C API instead.
    value = "dense<(1.0, 2.0)> : tensor<complex<f32>>"
    exe = kiln.compile(_program(f"mhlo.weird = {value}"), isolate=False)  # dropped
    np.testing.assert_array_equal(exe(X)[0], X + X)
    with pytest.raises(kiln.KilnError, match="'foo.weird' on @main is not allowed"):
        kiln.compile(_program(f"foo.weird = {value}"), isolate=False)
    with pytest.raises(kiln.KilnError, match="'mhlo.num_partitions' on 'builtin.module' must be"):
        kiln.compile(f"module attributes {{mhlo.num_partitions = {value}}} {{\n{_program('')}\n}}",
                     isolate=False)


@pytest.mark.parametrize("properties", ["arg_attrs = [{llvm.noalias}]", "no_inline",
                                        "res_attrs = [{llvm.noundef}]"])
def test_call_attributes_that_reach_llvm_are_refused(properties):
    src = ("func.func private @f(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
           "  return %x : tensor<2xf32>\n}\n"
           "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
           f'  %0 = "func.call"(%x) <{{callee = @f, {properties}}}> : (tensor<2xf32>) -> tensor<2xf32>\n'
           "  return %0 : tensor<2xf32>\n}")
    with pytest.raises(kiln.KilnError, match=r"attribute '\w+' on 'func.call' is not allowed") as info:
        kiln.compile(src, filename="c.mlir", isolate=False)
    assert info.value.location == "c.mlir:5:8"


def test_the_conversion_cast_of_builtin_is_refused():
    src = ("func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
           "  %p = builtin.unrealized_conversion_cast %x : tensor<2xf32> to i64\n"
           "  return %x : tensor<2xf32>\n}")
    with pytest.raises(kiln.KilnError, match="'builtin.unrealized_conversion_cast' is not allowed"):
        kiln.compile(src, isolate=False)


def test_the_table_names_each_kept_attribute_once_with_its_places():
    for name, accepted in input_allowlist.ACCEPTED.items():
        assert accepted.places, name
        assert not name.startswith("llvm."), name
    assert "passthrough" not in input_allowlist.ACCEPTED


# -- internal runtime targets --------------------------------------------------------------
@pytest.mark.parametrize("target, config", [
    ("kiln.collective.all_reduce", 'backend_config = "{not json"'),
    ("kiln.collective.all_gather", 'backend_config = "{\\22groups\\22: 7}"'),
    ("kiln.fft", 'mhlo.backend_config = {fft_type = "FFT"}'),
    ("kiln.spmd.something", ""),
    ("kiln.stochastic_convert", ""),
])
def test_internal_targets_are_not_callable_by_programs(target, config):
    # They failed with JSONDecodeError/KeyError/ValueError (InternalError) in the runtime.
    attrs = f" {{{config}}}" if config else ""
    src = ("func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
           f"  %0 = stablehlo.custom_call @{target}(%x){attrs} : (tensor<2xf32>) -> tensor<2xf32>\n"
           "  return %0 : tensor<2xf32>\n}")
    with pytest.raises(kiln.KilnError, match=f"@{target} names one of Kiln's internal") as info:
        kiln.compile(src, filename="t.mlir", isolate=False)
    assert info.value.location == "t.mlir:2:8"


@pytest.mark.parametrize("call", [
    # the lowering would keep a program's backend_config, which the runtime trusts
    '%0 = stablehlo.custom_call @kiln.collective.collective_broadcast_dynamic(%x, %r) '
    '{backend_config = "{}"} : (tensor<2xf32>, tensor<1xi32>) -> tensor<2xf32>',
    '%0 = stablehlo.custom_call @kiln.collective.collective_broadcast_dynamic(%x) '
    ': (tensor<2xf32>) -> tensor<2xf32>',
    '%0 = stablehlo.custom_call @kiln.collective.collective_broadcast_dynamic(%x, %r) '
    ': (tensor<2xf32>, tensor<1xi32>) -> tensor<3xf32>',
])
def test_the_front_ends_dynamic_broadcast_form_is_checked(call):
    # frontend/newer.py writes newer StableHLO's collective_broadcast(has_dynamic_root) as
    # this call: the one internal target an input may hold, in exactly that form.
    ret = "tensor<3xf32>" if "-> tensor<3xf32>" in call else "tensor<2xf32>"
    src = (f"func.func @main(%x: tensor<2xf32>, %r: tensor<1xi32>) -> {ret} {{\n  {call}\n"
           f"  return %0 : {ret}\n}}")
    with pytest.raises(kiln.KilnError, match="collective_broadcast_dynamic is malformed"):
        kiln.compile(src, isolate=False)


# -- the far end: the LLVM-dialect module before it is linked ------------------------------
def _lowered(function_attributes: str, keywords: str = "") -> ir.Module:
    return ir.Module.parse(f"llvm.func {keywords}@f() attributes {{{function_attributes}}} "
                           "{\n  llvm.return\n}")


@pytest.mark.parametrize("keywords", ["fastcc ", "weak ", "linkonce "])
def test_lowered_linkage_and_calling_convention_are_kilns(keywords):
    with make_context():
        with pytest.raises(kiln.KilnError, match="which Kiln's passes do not set"):
            check_lowered(_lowered("", keywords))


@pytest.mark.parametrize("attributes", [
    'passthrough = [["probe-stack", "abort"]]', 'passthrough = ["noinline"]', "personality = @f",
    'garbage_collector = "shadow-stack"', 'section = ".init"',
    'llvm.passthrough = [["probe-stack", "getpid"]]', "foo.bar = 1 : i64",
])
def test_lowered_functions_carry_only_the_attributes_kiln_sets(attributes):
    with make_context():
        with pytest.raises(kiln.KilnError, match="which Kiln's passes do not set"):
            check_lowered(_lowered(attributes))


def test_lowered_functions_with_kilns_own_attributes_pass():
    with make_context():
        check_lowered(_lowered('passthrough = [["prefer-vector-width", "512"]], '
                               "llvm.emit_c_interface", "internal "))


def test_lowered_argument_attributes_are_checked():
    with make_context():
        module = ir.Module.parse("llvm.func @f(%a: !llvm.ptr {llvm.noalias}) {\n  llvm.return\n}")
        with pytest.raises(kiln.KilnError, match="arg_attrs entry 'llvm.noalias'"):
            check_lowered(module)


# -- class 8 on the program side -----------------------------------------------------------
def test_shape_assertion_messages_are_not_format_strings():
    assert format_assertion("{0.__class__.__mro__} is {0}, {{x}} {1} {0:>99999}", [7]) == \
        "{0.__class__.__mro__} is 7, {x} {1} {0:>99999}"
    assert format_assertion("{0} {1}", [np.int64(3), 2.5]) == "3 {1}"  # integers only
    assert format_assertion("{99999999999999999999}", [1]) == "{99999999999999999999}"


def test_shape_assertion_from_a_program_reports_its_message_literally():
    src = ("func.func @main(%d: tensor<i64>) -> tensor<i64> {\n"
           "  %c = stablehlo.constant dense<3> : tensor<i64>\n"
           "  %ok = stablehlo.compare EQ, %d, %c : (tensor<i64>, tensor<i64>) -> tensor<i1>\n"
           "  stablehlo.custom_call @shape_assertion(%ok, %d) {api_version = 2 : i32, "
           'error_message = "got {0}, {0.__class__.__mro__}", has_side_effect = true} '
           ": (tensor<i1>, tensor<i64>) -> ()\n"
           "  return %d : tensor<i64>\n}")
    exe = kiln.compile(src)
    assert int(exe(np.int64(3))[0]) == 3
    with pytest.raises(kiln.KilnError, match=r"got 5, \{0\.__class__\.__mro__\}") as info:
        exe(np.int64(5))
    assert not isinstance(info.value, InternalError)


@pytest.mark.parametrize("bound, passes", [
    ("max_ulp_difference = 18446744073709551615", True),   # 2^64-1: any distance but infinity
    ("max_ulp_difference = -1", True),                     # the same bits
    ("min_ulp_difference = 5, max_ulp_difference = 9223372036854775807", False),
])
def test_ulp_bounds_use_the_whole_unsigned_range(bound, passes):
    src = ("func.func @main() {\n"
           "  %0 = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>\n"
           "  %1 = stablehlo.constant dense<[1.0, 2.5]> : tensor<2xf32>\n"
           f"  check.expect_close %0, %1, {bound} : tensor<2xf32>, tensor<2xf32>\n"
           "  func.return\n}")
    exe = kiln.compile(src, filename="ulp.mlir")
    if passes:
        exe()
    else:
        with pytest.raises(kiln.CheckFailure, match=r"ulp.mlir:4:3: FAILED"):
            exe()


@pytest.mark.parametrize("src, match", [
    ('func.func @"ma\\FFin"(%x: tensor<2xf32>) -> tensor<2xf32> {\n  return %x : tensor<2xf32>\n}',
     "'sym_name' of 'func.func' holds a string that is not valid UTF-8"),
    ("func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
     '  %0 = stablehlo.custom_call @"t\\FF"(%x) : (tensor<2xf32>) -> tensor<2xf32>\n'
     "  return %0 : tensor<2xf32>\n}", "custom-call target of 'stablehlo.custom_call'"),
    ('func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32> {jax.result_info = "r\\FF"}) {\n'
     "  return %x : tensor<2xf32>\n}", "'res_attrs' of 'func.func' holds a string"),
    ('func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> attributes '
     '{mhlo.frontend_attributes = {"k\\FF" = "v"}} {\n  return %x : tensor<2xf32>\n}',
     "'mhlo.frontend_attributes' of 'func.func' holds a string"),
    ('func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> attributes {"mhlo.\\FF" = 1} {\n'
     "  return %x : tensor<2xf32>\n}", "an attribute name on 'func.func' is not valid UTF-8"),
])
def test_names_and_strings_that_are_not_utf8_are_located_errors(src, match):
    with pytest.raises(kiln.KilnError, match=match) as info:
        kiln.compile(src, filename="u.mlir", isolate=False)
    assert not isinstance(info.value, InternalError)
    assert info.value.location.startswith("u.mlir:")


def test_mlir_bytecode_named_mlir_runs(tmp_path):
    path = tmp_path / "model.mlir"
    path.write_bytes(_bytecode(_program("")))
    np.testing.assert_array_equal(kiln.compile(path)(X)[0], X + X)


def test_a_long_module_name_still_dumps(tmp_path):
    src = f"module @{'m' * 300} {{\n{_program('')}\n}}"
    exe = kiln.compile(src, dump_dir=tmp_path)
    np.testing.assert_array_equal(exe(X)[0], X + X)
    dumps = list(Path(tmp_path).iterdir())
    assert dumps and all(len(p.name) < 200 for p in dumps)
    assert any(p.name.endswith(".before_optimizations.mlir") for p in dumps)


def test_check_input_accepts_what_a_jax_export_holds():
    # The table is what JAX writes (jax/_src/interpreters/mlir.py): a real export passes.
    jax = pytest.importorskip("jax")
    exported = jax.export.export(jax.jit(lambda x: {"y": x * 2}))(np.zeros(2, np.float32))
    exe = kiln.compile(bytes(exported.serialize()))
    np.testing.assert_array_equal(exe(X)["y"], X * 2)
    with make_context() as ctx:
        module = ir.Module.parse(exported.mlir_module(), ctx)
        check_input(module)
        assert "jax.result_info" in str(module)


def test_gpu_kernels_are_checked_the_same_way():
    # lowering/gpu/ptx.py checks each kernel function before it becomes LLVM IR.
    from kiln.lowering.llvm_function_attributes import check_device_function_attributes
    with make_context():
        kernel = _lowered("gpu.kernel, nvvm.kernel, nvvm.maxntid = array<i32: 256, 1, 1>")
        check_device_function_attributes(kernel.body.operations[0].operation)
        for bad in ('nvvm.kernel, passthrough = [["probe-stack", "abort"]]',
                    "rocdl.kernel", "nvvm.minctasm = 2 : i32"):
            with pytest.raises(kiln.KilnError, match="which Kiln's passes do not set"):
                check_device_function_attributes(_lowered(bad).body.operations[0].operation)


SHARDING_2 = '{\\22tiles\\22: [2], \\22devices\\22: [0, 1]}'


@pytest.mark.parametrize("call, match", [
    # the JAX reader's form (dialects/sdy.py) with a sharding that is not one
    ('stablehlo.custom_call @kiln.spmd.to_local(%x) {kiln.sharding = "{not json"} '
     ": (tensor<4xf32>) -> tensor<2xf32>", "'kiln.sharding' on 'stablehlo.custom_call' must be"),
    ('stablehlo.custom_call @kiln.spmd.to_local(%x) {kiln.sharding = '
     '"{\\22tiles\\22: [3], \\22devices\\22: [0, 1]}"} : (tensor<4xf32>) -> tensor<2xf32>',
     "must be a sharding"),
    ("stablehlo.custom_call @kiln.spmd.to_local(%x) : (tensor<4xf32>) -> tensor<2xf32>",
     "@kiln.spmd.to_local is malformed"),
    (f'stablehlo.custom_call @kiln.spmd.to_global(%x, %x) {{kiln.sharding = "{SHARDING_2}"}} '
     ": (tensor<4xf32>, tensor<4xf32>) -> tensor<2xf32>", "@kiln.spmd.to_global is malformed"),
])
def test_the_jax_readers_shard_map_markers_are_checked(call, match):
    src = (f"func.func @main(%x: tensor<4xf32>) -> tensor<2xf32> {{\n  %0 = {call}\n"
           "  return %0 : tensor<2xf32>\n}")
    with pytest.raises(kiln.KilnError, match=match):
        kiln.compile(src, isolate=False)


def test_a_well_formed_shard_map_marker_passes_the_input_check():
    src = (f'func.func @main(%x: tensor<4xf32> {{kiln.sharding = "{SHARDING_2}"}}) -> tensor<2xf32> {{\n'
           f'  %0 = stablehlo.custom_call @kiln.spmd.to_local(%x) {{kiln.sharding = "{SHARDING_2}"}}'
           " : (tensor<4xf32>) -> tensor<2xf32>\n  return %0 : tensor<2xf32>\n}")
    with make_context():
        check_input(ir.Module.parse(src))


def test_backend_config_values_the_bindings_cannot_read_are_refused():
    # Handing a complex elements value to a Python target aborted the process (isolate=False).
    kiln.register_custom_call("trust_allowlist_echo",
                              lambda results, operands, **_: results[0].__setitem__(..., operands[0]))
    call = ("func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
            "  %0 = stablehlo.custom_call @trust_allowlist_echo(%x) {api_version = 4 : i32, "
            "mhlo.backend_config = {c = VALUE}} : (tensor<2xf32>) -> tensor<2xf32>\n"
            "  return %0 : tensor<2xf32>\n}")
    with pytest.raises(kiln.KilnError, match="'mhlo.backend_config' on 'stablehlo.custom_call' "
                                             "must be a dictionary of plain values"):
        kiln.compile(call.replace("VALUE", "dense<(1.0, 2.0)> : tensor<complex<f32>>"),
                     isolate=False)
    exe = kiln.compile(call.replace("VALUE", "dense<[1.0, 2.0]> : tensor<2xbf16>"), isolate=False)
    np.testing.assert_array_equal(exe(X)[0], X)
