"""HLO forms XLA writes that Kiln used to refuse (issue 32), run with numbers: replica groups
in the mesh, transposed-iota and unequal-size spellings, ragged-all-to-all on threads and
under mpiexec, create-token, and bounded dynamic dimensions (f32[<=N])."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kiln
from kiln.errors import KilnError
from kiln.frontend.hlo import hlo_to_stablehlo, stablehlo_to_hlo

HERE = Path(__file__).parent

ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""
ODD = """odd {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  p = f32[] multiply(a, b)
  s = f32[] add(a, b)
  ROOT t = f32[] add(p, s)
}
"""


def _all_reduce_program(groups: str, replicas: int = 8, combiner: str = "add") -> str:
    return (f"HloModule m, replica_count={replicas}\n\n{ADD}\n{ODD}\nENTRY main {{\n"
            f"  p = f32[2] parameter(0)\n"
            f"  ROOT r = f32[2] all-reduce(p), replica_groups={groups}, to_apply={combiner}\n}}\n")


def _run_replicas(hlo: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    exe = kiln.compile(hlo, filename="forms.hlo")
    return [r[0] for r in exe.run_devices([[x] for x in inputs])]


def _expect_group_sums(got, xs, groups):
    for group in groups:
        total = sum(xs[d] for d in group)
        for d in group:
            np.testing.assert_array_equal(got[d], total, err_msg=f"device {d} of {group}")


XS = [np.array([d + 1, 10 * (d + 1)], np.float32) for d in range(8)]


@pytest.mark.parametrize("spelling,groups", [
    # JAX's mesh form: groups vary along the named axes, the others fixed.
    ("mesh['axis_0'=2,'axis_1'=4] {'axis_1'}", [[0, 1, 2, 3], [4, 5, 6, 7]]),
    ("mesh['axis_0'=2,'axis_1'=4] {'axis_0'}", [[0, 4], [1, 5], [2, 6], [3, 7]]),
    ("mesh['a'=2,'b'=2,'c'=2] {'c','a'}", [[0, 4, 1, 5], [2, 6, 3, 7]]),
    # XLA's iota form with a transpose.
    ("[2,4]<=[4,2]T(1,0)", [[0, 2, 4, 6], [1, 3, 5, 7]]),
    ("[4,2]<=[2,2,2]T(2,1,0)", [[0, 4], [2, 6], [1, 5], [3, 7]]),
    # Groups of unequal sizes (all-reduce only).
    ("{{0,2,4},{1,3,5,6},{7}}", [[0, 2, 4], [1, 3, 5, 6], [7]]),
])
def test_replica_group_spellings_import_export_and_run(spelling, groups):
    hlo = _all_reduce_program(spelling)
    _expect_group_sums(_run_replicas(hlo, XS), XS, groups)
    # Exported back, the groups are explicit lists; running that gives the same sums.
    again = stablehlo_to_hlo(hlo_to_stablehlo(hlo))
    listed = "replica_groups={" + ",".join("{" + ",".join(map(str, g)) + "}" for g in groups) + "}"
    assert listed in again
    _expect_group_sums(_run_replicas(again, XS), XS, groups)


def test_unequal_groups_need_a_combiner_the_runtime_reduces():
    # A combiner only compiled code can run stacks each group's operands: one shape for every
    # device, which groups of different sizes cannot give. A located error, not a wrong answer.
    hlo = _all_reduce_program("{{0,1,2},{3}}", replicas=4, combiner="odd")
    with pytest.raises(KilnError, match="unequal size"):
        kiln.compile(hlo, filename="forms.hlo")


@pytest.mark.parametrize("bad,message", [
    ("mesh['x'=2,'x'=2] {'x'}", "appears twice"),
    ("mesh['x'=4] {'y'}", "the mesh has"),
    ("mesh['x':(1)2] {'x'}", "not of the form"),
    # explicit groups that are not lists of device numbers used to vanish silently
    ("{{-2,1}}", "non-negative integers"),
    ("{{0,a},{1,2}}", "non-negative integers"),
])
def test_bad_mesh_groups_are_located_errors(bad, message):
    with pytest.raises(KilnError, match=message) as info:
        hlo_to_stablehlo(_all_reduce_program(bad, replicas=4), "mesh.hlo")
    assert info.value.location.startswith("mesh.hlo:")


def test_unequal_groups_are_refused_where_xla_refuses_them():
    hlo = ("HloModule m, replica_count=4\n\nENTRY main {\n  p = f32[2] parameter(0)\n"
           "  ROOT g = f32[4] all-gather(p), dimensions={0}, replica_groups={{0,1},{2},{3}}\n}\n")
    with pytest.raises(KilnError, match="only all-reduce accepts groups of different sizes"):
        hlo_to_stablehlo(hlo, "gather.hlo")


# ---- ragged-all-to-all --------------------------------------------------------------------------

RAGGED = """HloModule m, replica_count={n}

ENTRY main {{
  input = f32[{rows},2] parameter(0)
  output = f32[{out_rows},2] parameter(1)
  input_offsets = s32[{k}] parameter(2)
  send_sizes = s32[{k}] parameter(3)
  output_offsets = s32[{k}] parameter(4)
  recv_sizes = s32[{k}] parameter(5)
  ROOT ra2a = f32[{out_rows},2] ragged-all-to-all(input, output, input_offsets, send_sizes, output_offsets, recv_sizes), replica_groups={groups}
}}
"""


def _ragged_reference(args, groups):
    """lax.ragged_all_to_all's documented semantics, written out as in its docstring: entry i
    of a member's offsets goes to member i // per_member; the receiver writes what it gets at
    the sender's output_offsets entry for it."""
    results = [a[1].copy() for a in args]
    for group in groups:
        per = len(args[group[0]][2]) // len(group)
        for s_pos, sender in enumerate(group):
            data, _, in_off, send, out_off, _ = args[sender]
            for i in range(len(in_off)):
                receiver = group[i // per]
                rows = data[in_off[i]:in_off[i] + send[i]]
                results[receiver][out_off[i]:out_off[i] + send[i]] = rows
    return results


def _ragged_case():
    """4 replicas in groups {0,2} and {1,3}, two slices per member (k = 4)."""
    rng = np.random.default_rng(3)
    groups = [[0, 2], [1, 3]]
    args = [None] * 4
    sizes = {}  # (sender, entry) -> rows sent
    for group in groups:
        for sender in group:
            sizes[sender] = rng.integers(0, 3, size=4)
    for group in groups:
        for pos, d in enumerate(group):
            send = sizes[d].astype(np.int32)
            in_off = np.concatenate([[0], np.cumsum(send)[:-1]]).astype(np.int32)
            # recv_sizes[k]: what member k // 2 sends in its entry for this device's slot.
            recv = np.array([sizes[group[k // 2]][pos * 2 + k % 2] for k in range(4)], np.int32)
            args[d] = [rng.standard_normal((8, 2)).astype(np.float32),
                       np.full((8, 2), -1.0, np.float32), in_off, send, None, recv]
    for group in groups:
        for pos, d in enumerate(group):
            out_off = np.zeros(4, np.int32)
            for i in range(4):  # where this sender's entry i lands on its receiver
                receiver_pos, slot = i // 2, pos * 2 + i % 2
                receiver = group[receiver_pos]
                out_off[i] = int(np.sum(args[receiver][5][:slot]))
            args[d][4] = out_off
    return args, groups


def test_ragged_all_to_all_docstring_example_on_threads():
    hlo = RAGGED.format(n=2, rows=3, out_rows=4, k=2, groups="{{0,1}}").replace(",2]", "]")
    i32 = lambda *v: np.array(v, np.int32)  # noqa: E731
    d0 = [np.array([1, 2, 2], np.float32), np.zeros(4, np.float32), i32(0, 1), i32(1, 2),
          i32(0, 0), i32(1, 1)]
    d1 = [np.array([3, 4, 0], np.float32), np.zeros(4, np.float32), i32(0, 1), i32(1, 1),
          i32(1, 2), i32(2, 1)]
    exe = kiln.compile(hlo, filename="ragged.hlo")
    (r0,), (r1,) = exe.run_devices([d0, d1])
    np.testing.assert_array_equal(r0, [1, 3, 0, 0])  # the values JAX's docstring gives
    np.testing.assert_array_equal(r1, [2, 2, 4, 0])


def test_ragged_all_to_all_as_jax_exports_it(tmp_path):
    # jax.export of lax.ragged_all_to_all in shard_map (XLA:CPU cannot run it, so the
    # expected values are those of JAX's docstring example).
    out = tmp_path / "ragged.jax"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    done = subprocess.run([sys.executable, str(HERE / "hlo_forms" / "export_ragged.py"), str(out)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    exe = kiln.compile(out.read_bytes(), filename="ragged.jax")
    assert exe.num_devices == 2
    i32 = lambda *rows: np.array(rows, np.int32)  # noqa: E731
    got = exe(np.array([[1, 2, 2], [3, 4, 0]], np.float32), np.zeros((2, 4), np.float32),
                 i32([0, 1], [0, 1]), i32([1, 2], [1, 1]), i32([0, 0], [1, 2]),
                 i32([1, 1], [2, 1]))  # a JAX export returns its pytree: one array
    np.testing.assert_array_equal(got, [[1, 3, 0, 0], [2, 2, 4, 0]])


def test_ragged_all_to_all_groups_and_several_slices_per_member():
    args, groups = _ragged_case()
    hlo = RAGGED.format(n=4, rows=8, out_rows=8, k=4, groups="{{0,2},{1,3}}")
    exe = kiln.compile(hlo, filename="ragged.hlo")
    got = [r[0] for r in exe.run_devices(args)]
    for g, e in zip(got, _ragged_reference(args, groups)):
        np.testing.assert_array_equal(g, e)


def test_ragged_all_to_all_with_mismatched_sizes_is_an_error():
    args, _ = _ragged_case()
    args[0][5] = args[0][5] + 1  # device 0 expects rows nobody sends
    exe = kiln.compile(RAGGED.format(n=4, rows=8, out_rows=8, k=4, groups="{{0,2},{1,3}}"),
                       filename="ragged.hlo")
    with pytest.raises(KilnError, match="recv_sizes"):
        exe.run_devices(args)


def test_ragged_all_to_all_under_mpiexec(tmp_path):
    # Two ranks, two devices each: groups {0,2} and {1,3} cross the ranks.
    args, groups = _ragged_case()
    program = tmp_path / "ragged.hlo"
    program.write_text(RAGGED.format(n=4, rows=8, out_rows=8, k=4, groups="{{0,2},{1,3}}"))
    np.savez(tmp_path / "args.npz", **{f"d{d}_{i}": a for d, arrays in enumerate(args)
                                       for i, a in enumerate(arrays)})
    bin_dir = Path(sys.executable).parent
    mpiexec = shutil.which("mpiexec") or str(bin_dir / "mpiexec")
    done = subprocess.run([mpiexec, "-n", "2", "-iface", "lo", sys.executable,
                           str(HERE / "hlo_forms" / "run_devices_mpi.py"), str(program),
                           str(tmp_path / "args.npz"), str(tmp_path / "out.npz")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    got = np.load(tmp_path / "out.npz")
    for d, expected in enumerate(_ragged_reference(args, groups)):
        np.testing.assert_array_equal(got[f"d{d}"], expected)


# ---- bounded dynamic dimensions ------------------------------------------------------------------

def _run_on_xla(hlo: str, args: list[np.ndarray]) -> list[np.ndarray]:
    """XLA:CPU's own results for an HLO program (through jaxlib's PjRt client): a bounded
    result comes back at its bound, its data first (past the size XLA leaves garbage)."""
    import re
    jax = pytest.importorskip("jax")
    from jax._src import xla_bridge
    from jax._src.lib import xla_client
    text = hlo_to_stablehlo(hlo)
    text = re.sub(r' \{kiln\.layout = "[^"]*"\}', "", text)
    text = re.sub(r"attributes \{[^}]*\} ", "", text, count=1)
    client = xla_bridge.get_backend("cpu")
    device = client.local_devices()[0]
    exe = client.compile_and_load(text, xla_client.DeviceList((device,)),
                                  xla_client.CompileOptions())
    out = exe.execute_sharded([jax.device_put(a, device) for a in args])
    return [np.asarray(r[0]) for r in out.disassemble_into_single_device_arrays()]


BOUNDED = f"""HloModule bounded

{ADD}
ENTRY main {{
  x = f32[8,3] parameter(0)
  w = f32[8,2] parameter(1)
  n = s32[] parameter(2)
  y = f32[<=8,3] set-dimension-size(x, n), dimensions={{0}}
  v = f32[<=8,2] set-dimension-size(w, n), dimensions={{0}}
  e = f32[<=8,3] multiply(y, y)
  z = f32[] constant(0)
  col = f32[3] reduce(e, z), dimensions={{0}}, to_apply=add
  row = f32[<=8] reduce(e, z), dimensions={{1}}, to_apply=add
  t = f32[3,<=8] transpose(e), dimensions={{1,0}}
  d = f32[3,2] dot(t, v), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  b = f32[<=8,3,2] broadcast(row), dimensions={{0}}
  m = s32[] get-dimension-size(b), dimensions={{0}}
  ROOT out = (f32[3], f32[<=8], f32[3,2], s32[], f32[<=8,3,2]) tuple(col, row, d, m, b)
}}
"""


@pytest.mark.parametrize("n", [0, 3, 8])
def test_bounded_dims_run_at_their_bound_like_xla(n):
    rng = np.random.default_rng(n)
    args = [rng.standard_normal((8, 3)).astype(np.float32),
            rng.standard_normal((8, 2)).astype(np.float32), np.int32(n)]
    got = kiln.compile(BOUNDED, filename="bounded.hlo")(*args)
    xla = _run_on_xla(BOUNDED, args)
    col, row, d, m, b = got
    assert int(m) == n == int(xla[3])
    np.testing.assert_allclose(col, xla[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(d, xla[2], rtol=1e-5, atol=1e-6)
    # Bounded results: XLA's shape (the bound), the same data up to the size, zeros after.
    assert row.shape == xla[1].shape == (8,) and b.shape == xla[4].shape == (8, 3, 2)
    np.testing.assert_allclose(row[:n], xla[1][:n], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b[:n], xla[4][:n], rtol=1e-5, atol=1e-6)
    assert not row[n:].any() and not b[n:].any()
    # ... and the numbers themselves.
    x = args[0][:n]
    np.testing.assert_allclose(col, (x * x).sum(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(d, (x * x).T @ args[1][:n], rtol=1e-5, atol=1e-5)


def test_a_size_past_the_bound_is_clamped_to_it():
    args = [np.ones((8, 3), np.float32), np.ones((8, 2), np.float32), np.int32(11)]
    col, row, d, m, b = kiln.compile(BOUNDED, filename="bounded.hlo")(*args)
    assert int(m) == 8
    np.testing.assert_array_equal(col, np.full(3, 8.0))


def test_a_constant_size_gives_the_exact_shape():
    hlo = ("HloModule m\n\nENTRY main {\n  x = f32[6,4] parameter(0)\n"
           "  c = s32[] constant(3)\n"
           "  y = f32[<=6,4] set-dimension-size(x, c), dimensions={0}\n"
           "  ROOT t = f32[<=6,4] tanh(y)\n}\n")
    x = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    (got,) = kiln.compile(hlo, filename="constant.hlo")(x)
    assert got.shape == (3, 4)
    np.testing.assert_allclose(got, np.tanh(x[:3]), rtol=1e-6)


def test_an_op_with_no_padding_rule_is_a_located_error():
    hlo = (f"HloModule m\n\n{ADD}\nENTRY main {{\n  x = f32[6] parameter(0)\n"
           "  n = s32[] parameter(1)\n"
           "  y = f32[<=6] set-dimension-size(x, n), dimensions={0}\n"
           "  ROOT r = f32[<=6] reverse(y), dimensions={0}\n}\n")
    with pytest.raises(KilnError, match="reverse: this op on a bounded dynamic dimension") as info:
        kiln.compile(hlo, filename="reverse.hlo")
    assert info.value.location.startswith("reverse.hlo:")


BOUNDED_ARGUMENT = f"""HloModule bounded_argument

{ADD}
ENTRY main {{
  x = f32[<=8,3] parameter(0)
  n = s32[] get-dimension-size(x), dimensions={{0}}
  y = f32[<=8,3] negate(x)
  z = f32[] constant(0)
  s = f32[3] reduce(y, z), dimensions={{0}}, to_apply=add
  ROOT t = (f32[<=8,3], s32[], f32[3]) tuple(y, n, s)
}}
"""


def test_bounded_arguments_take_any_size_up_to_the_bound():
    exe = kiln.compile(BOUNDED_ARGUMENT, filename="argument.hlo")
    for rows in (5, 8, 1):
        x = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)
        y, n, s = exe(x)
        assert int(n) == rows
        np.testing.assert_array_equal(y, -x)
        np.testing.assert_array_equal(s, -x.sum(0))


def test_spaces_inside_dimensions_as_xla_writes_them():
    hlo = ("HloModule m\n\nENTRY main (x: f32[2, 3]) -> f32[3, <=2] {\n"
           "  x = f32[2, 3] parameter(0)\n"
           "  t = f32[3, 2] transpose(f32[2, 3] x), dimensions={1,0}\n"
           "  n = s32[] constant(1)\n"
           "  ROOT y = f32[3, <= 2] set-dimension-size(t, n), dimensions={1}\n}\n")
    assert "tensor<3x?xf32, #stablehlo.bounds<?, 2>>" in hlo_to_stablehlo(hlo)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (got,) = kiln.compile(hlo, filename="spaced.hlo")(x)
    np.testing.assert_array_equal(got, x.T[:, :1])


# ---- create-token --------------------------------------------------------------------------------

def test_create_token_imports_as_xla_does_and_runs():
    hlo = ("HloModule m\n\nENTRY main {\n  x = f32[3] parameter(0)\n"
           "  a = token[] after-all()\n  b = token[] create-token()\n"
           "  j = token[] after-all(a, b)\n"
           "  ROOT y = f32[3] add-dependency(x, j)\n}\n")
    mlir = hlo_to_stablehlo(hlo)
    assert mlir.count("stablehlo.create_token") == 2 and "stablehlo.after_all" in mlir
    exported = stablehlo_to_hlo(mlir)
    assert exported.count("after-all()") == 2  # HLO's spelling of a fresh token
    x = np.array([1.5, -2.0, 3.25], np.float32)
    for program in (hlo, exported):
        (got,) = kiln.compile(program, filename="token.hlo")(x)
        np.testing.assert_array_equal(got, x)


def test_create_token_with_operands_is_an_error():
    hlo = ("HloModule m\n\nENTRY main {\n  a = token[] after-all()\n"
           "  ROOT b = token[] create-token(a)\n}\n")
    with pytest.raises(KilnError, match="create-token takes no operands"):
        hlo_to_stablehlo(hlo, "token.hlo")


def test_a_bounded_argument_resized_at_run_time():
    hlo = (f"HloModule m\n\n{ADD}\nENTRY main {{\n  x = f32[<=8,3] parameter(0)\n"
           "  k = s32[] parameter(1)\n"
           "  y = f32[<=8,3] set-dimension-size(x, k), dimensions={0}\n"
           "  z = f32[] constant(0)\n"
           "  s = f32[3] reduce(y, z), dimensions={0}, to_apply=add\n"
           "  n = s32[] get-dimension-size(y), dimensions={0}\n"
           "  ROOT t = (f32[3], s32[]) tuple(s, n)\n}\n")
    exe = kiln.compile(hlo, filename="resized.hlo")
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    for k, rows in ((2, 2), (5, 5), (7, 5)):  # past the data it has: clamped to it
        s, n = exe(x, np.int32(k))
        assert int(n) == rows
        np.testing.assert_array_equal(s, x[:rows].sum(0))


@pytest.mark.parametrize("attribute", ["bogus_attr={1}", "reqlica_groups={{0,1}}", "dimensions={0}"])
def test_an_attribute_nothing_reads_is_a_located_error(attribute):
    """XLA's parser refuses attributes an opcode does not have; ignoring one (a misspelt
    replica_groups, say) would run the program with another meaning."""
    hlo = ("HloModule m\n\nENTRY main {\n  p = f32[4] parameter(0)\n"
           f"  ROOT a = f32[4] add(p, p), {attribute}, metadata={{op_name=\"x\"}}\n}}\n")
    with pytest.raises(KilnError, match="unexpected attribute") as info:
        hlo_to_stablehlo(hlo, "attrs.hlo")
    assert info.value.location.startswith("attrs.hlo:5:")
