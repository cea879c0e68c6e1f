"""AOT executables (.kx) and the persistent compile cache."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import kiln
from kiln import KilnError

MLP = Path(__file__).resolve().parents[2] / "examples" / "mlp.mlir"
AFFINE = """func.func @main(%x: tensor<3x4xf32>, %w: tensor<4x2xf32>) -> tensor<3x2xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  %1 = stablehlo.tanh %0 : tensor<3x2xf32>
  return %1 : tensor<3x2xf32>
}"""
DYNAMIC = """func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {
  %0 = stablehlo.exponential %x : tensor<?xf32>
  return %0 : tensor<?xf32>
}"""


def _kiln(*args, env=None):
    return subprocess.run([sys.executable, "-m", "kiln.cli.main", *map(str, args)],
                          capture_output=True, text=True, timeout=600, env=env)


def test_save_and_load_give_the_same_results(tmp_path, rng):
    exe = kiln.compile(AFFINE)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    w = rng.standard_normal((4, 2)).astype(np.float32)
    exe.save(tmp_path / "affine.kx")
    loaded = kiln.load_executable(tmp_path / "affine.kx")
    assert set(loaded.origins.values()) == {"file"}
    np.testing.assert_allclose(loaded(x, w)[0], np.tanh(x @ w), rtol=1e-5, atol=1e-6)
    assert loaded.arg_specs == exe.arg_specs and loaded.result_specs == exe.result_specs
    # The plan travels with the code.
    assert str(loaded.buffer_assignment()) == str(exe.buffer_assignment())
    assert [t.kind for t in loaded.thunks()] == [t.kind for t in exe.thunks()]
    # ... and so does the module, for introspection.
    assert "stablehlo.tanh" in loaded.ir()


def test_the_file_holds_code_plan_signature_and_metadata(tmp_path):
    kiln.compile(AFFINE).save(tmp_path / "affine.kx")
    with zipfile.ZipFile(tmp_path / "affine.kx") as archive:
        names = set(archive.namelist())
        manifest = json.loads(archive.read("manifest.json"))
        assert "allocation 0" in archive.read("compiled/0.buffer-assignment.txt").decode()
    assert {"manifest.json", "module.mlirbc", "compiled/0.kart",
            "compiled/0.thunk-sequence.txt"} <= names
    assert manifest["target"] == "cpu" and manifest["entry"] == "main"
    assert manifest["kiln"].startswith(kiln.__version__)
    assert manifest["cpu"]["name"] and manifest["cpu"]["features"]
    assert manifest["arguments"] == [[[3, 4], "f32"], [[4, 2], "f32"]]


def test_dynamic_signatures_save_their_compiled_shapes(tmp_path):
    exe = kiln.compile(DYNAMIC)
    with pytest.raises(KilnError, match="has not been called yet"):
        exe.save(tmp_path / "none.kx")
    for n in (3, 5):
        exe(np.zeros(n, np.float32))
    exe.save(tmp_path / "dyn.kx")
    loaded = kiln.load_executable(tmp_path / "dyn.kx")
    assert loaded.origins == {((3,),): "file", ((5,),): "file"}
    x = np.linspace(0, 1, 7).astype(np.float32)  # a new shape compiles from the saved module
    np.testing.assert_allclose(loaded(x)[0], np.exp(x), rtol=1e-6)
    assert loaded.origins[((7,),)] in ("compiled", "cache")


def test_kiln_compile_then_run(tmp_path):
    out = tmp_path / "mlp.kx"
    done = _kiln("compile", MLP, "-o", out)
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stdout and out.is_file()
    ran = _kiln("run", out, "--print")
    direct = _kiln("run", MLP, "--print")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == direct.stdout and "result 0: float32[2, 3]" in ran.stdout


def test_a_file_from_another_build_or_cpu_is_refused(tmp_path):
    kiln.compile(AFFINE).save(tmp_path / "a.kx")

    def rewrite(name, change):
        with zipfile.ZipFile(tmp_path / "a.kx") as src, \
                zipfile.ZipFile(tmp_path / name, "w") as dst:
            for item in src.namelist():
                data = src.read(item)
                if item == "manifest.json":
                    manifest = json.loads(data)
                    change(manifest)
                    data = json.dumps(manifest)
                dst.writestr(item, data)
        return tmp_path / name

    old = rewrite("old.kx", lambda m: m.update(kiln="0.0.1+0123456789abcdef"))
    with pytest.raises(KilnError, match=r"compiled by Kiln 0\.0\.1\+0123456789abcdef; this is Kiln"):
        kiln.load_executable(old)
    alien = rewrite("alien.kx", lambda m: m["cpu"].update(name="future", features=
                                                          m["cpu"]["features"] + ["warp-drive"]))
    with pytest.raises(KilnError, match="compiled for a future CPU; this .* lacks warp-drive"):
        kiln.load_executable(alien)


def test_damaged_or_foreign_files_are_clear_errors(tmp_path):
    (tmp_path / "text.kx").write_text("not an executable")
    with pytest.raises(KilnError, match="is not a Kiln executable"):
        kiln.load_executable(tmp_path / "text.kx")
    with pytest.raises(KilnError, match="does not exist"):
        kiln.load_executable(tmp_path / "missing.kx")
    kiln.compile(AFFINE).save(tmp_path / "a.kx")
    with zipfile.ZipFile(tmp_path / "a.kx") as src, zipfile.ZipFile(tmp_path / "cut.kx", "w") as dst:
        for item in src.namelist():
            data = src.read(item)
            dst.writestr(item, data[:20] if item.endswith(".kart") else data)
    with pytest.raises(KilnError, match="damaged|not compiled Kiln code"):
        kiln.load_executable(tmp_path / "cut.kx")


def test_custom_call_sites_are_made_where_the_program_is_loaded(tmp_path):
    program = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.custom_call @kiln_test_triple(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}"""

    def triple(results, operands, *, attributes, backend_config):
        results[0][...] = 3 * operands[0]
    kiln.register_custom_call("kiln_test_triple", triple)
    kiln.compile(program).save(tmp_path / "cc.kx")
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(kiln.load_executable(tmp_path / "cc.kx")(x)[0], 3 * x)
    # A process without the target gets a clear error naming it, not a crash.
    script = (f"import kiln\ntry:\n    kiln.load_executable({str(tmp_path / 'cc.kx')!r})\n"
              "except kiln.KilnError as exc:\n    print(exc.one_line())\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert "custom-call target 'kiln_test_triple' is not registered in this process" in done.stdout


# -- the persistent cache --------------------------------------------------------------------

def test_a_second_process_loads_from_the_cache(tmp_path):
    env = {**os.environ, "KILN_CACHE_DIR": str(tmp_path / "cache")}
    script = ("import kiln, numpy as np\n"
              f"exe = kiln.compile({AFFINE!r})\n"
              "x = np.ones((3, 4), np.float32); w = np.ones((4, 2), np.float32)\n"
              "print(list(exe.origins.values())[0], float(exe(x, w)[0].sum()))\n")
    first = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           env=env, timeout=300)
    second = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=env, timeout=300)
    assert first.stdout.split()[0] == "compiled", first.stderr
    assert second.stdout.split()[0] == "cache", second.stderr
    assert first.stdout.split()[1] == second.stdout.split()[1]
    assert len(list((tmp_path / "cache").glob("*.kart"))) == 1
    off = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env={**env, "KILN_CACHE": "0"}, timeout=300)
    assert off.stdout.split()[0] == "compiled", off.stderr


def test_the_cache_is_bounded_and_survives_damage(tmp_path, monkeypatch):
    from kiln.driver import cache
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    programs = [AFFINE.replace("stablehlo.tanh", op) for op in
                ("stablehlo.tanh", "stablehlo.exponential", "stablehlo.negate")]
    exe = kiln.compile(programs[0])
    (entry,) = tmp_path.glob("*.kart")
    size = entry.stat().st_size
    monkeypatch.setenv("KILN_CACHE_MAX_MB", str(2.5 * size / (1 << 20)))
    for text in programs[1:]:
        kiln.compile(text)
    assert len(list(tmp_path.glob("*.kart"))) == 2  # the least recently used went
    assert not entry.exists()
    # A damaged entry is a miss, compiled again (and replaced).
    for path in tmp_path.glob("*.kart"):
        path.write_bytes(b"KILNART1 garbage")
    again = kiln.compile(programs[2])
    assert list(again.origins.values()) == ["compiled"]
    x, w = np.ones((3, 4), np.float32), np.ones((4, 2), np.float32)
    np.testing.assert_allclose(again(x, w)[0], -4 * np.ones((3, 2)))
    assert cache.clear() == 2
    assert exe(x, w)[0].shape == (3, 2)


def test_programs_differing_in_options_or_shapes_do_not_share_entries(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    kiln.compile(AFFINE)
    kiln.compile(AFFINE, opt_level=1)
    exe = kiln.compile(DYNAMIC)
    exe(np.zeros(2, np.float32))
    exe(np.zeros(3, np.float32))
    assert len(list(tmp_path.glob("*.kart"))) == 4
    assert list(kiln.compile(AFFINE, opt_level=1).origins.values()) == ["cache"]


@pytest.mark.parametrize("in_process", ["0", "1"])
def test_libm_functions_link_in_a_fresh_process(in_process):
    # The linker finds libm by name, not through whatever the process happened to load.
    script = ("import kiln, numpy as np\n"
              "src = '''func.func @main(%x: tensor<4xf64>) -> tensor<4xf64> {\n"
              "  %0 = stablehlo.log_plus_one %x : tensor<4xf64>\n"
              "  %1 = stablehlo.cbrt %0 : tensor<4xf64>\n"
              "  %2 = stablehlo.exponential_minus_one %1 : tensor<4xf64>\n"
              "  return %2 : tensor<4xf64>\n}'''\n"
              "x = np.arange(4.0)\n"
              "print(np.allclose(kiln.compile(src)(x)[0], np.expm1(np.cbrt(np.log1p(x)))))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "KILN_CACHE": "0",
                                            "KILN_COMPILE_IN_PROCESS": in_process})
    assert done.stdout.strip() == "True", done.stderr


def test_the_version_is_the_packages():
    from importlib.metadata import version
    assert kiln.__version__ == version("kiln")


def test_bad_settings_and_symbols_are_clear_errors(tmp_path, monkeypatch):
    from kiln.targets import objects
    with pytest.raises(KilnError, match="needs symbol.*kiln_no_such_symbol"):
        objects.load(b"", ["kiln_no_such_symbol"], "a test object")
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("KILN_CACHE_MAX_MB", "lots")
    with pytest.raises(KilnError, match="KILN_CACHE_MAX_MB='lots' is not a number"):
        kiln.compile(AFFINE.replace("tanh", "sine"))
    monkeypatch.delenv("KILN_CACHE_MAX_MB")
    monkeypatch.setenv("KILN_CACHE", "0")
    monkeypatch.setenv("KILN_COMPILE_TIMEOUT", "soon")
    with pytest.raises(KilnError, match="KILN_COMPILE_TIMEOUT='soon' is not a number"):
        kiln.compile(AFFINE.replace("tanh", "cosine"))
    monkeypatch.delenv("KILN_COMPILE_TIMEOUT")
    done = _kiln("compile", MLP, "-o", tmp_path / "x.kx", "--arg-shapes", "2xq")
    assert done.returncode == 1 and "--arg-shapes: cannot read '2xq'" in done.stderr
