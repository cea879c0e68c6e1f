"""The trust boundary on the file side (issue #25, classes 2, 7 and 8): machine code is only
ever loaded from a `.kx` file chosen by its suffix or from a compile-cache entry this user's
Kiln wrote (authenticated by a per-user key, in a private directory); crash reproducers go to
a private directory, written without following links; damaged executables and cache entries
are clear errors or cache misses."""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import kiln
from kiln import KilnError
from kiln.errors import InternalError

sys.path.insert(0, str(Path(__file__).parent))
import compile_faults  # noqa: E402

AFFINE = """func.func @main(%x: tensor<3x4xf32>, %w: tensor<4x2xf32>) -> tensor<3x2xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  %1 = stablehlo.tanh %0 : tensor<3x2xf32>
  return %1 : tensor<3x2xf32>
}"""
ADD = """func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %x, %y : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""
OTHER_USER = 65534  # nobody


def _give_away(path: Path) -> None:
    """Make `path` another user's, as an attacker's directory would be (only root can)."""
    if os.geteuid() != 0:
        pytest.skip("making a file another user's needs root")
    os.chown(path, OTHER_USER, OTHER_USER)


def _inputs():
    rng = np.random.default_rng(0)
    return rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)


def _payload(tmp_path: Path, symbol: str, marker: Path) -> bytes:
    """Object code whose entry point runs a shell command (touching `marker`): what an
    attacker would put in a `.kx` file or a cache entry."""
    source = tmp_path / "payload.c"
    source.write_text("#include <stdlib.h>\n"
                      f"void {symbol}(void **args) {{ system(\"touch {marker}\"); }}\n")
    subprocess.run(["cc", "-c", "-fPIC", "-O1", "-o", str(tmp_path / "payload.o"), str(source)],
                   check=True, capture_output=True)
    return (tmp_path / "payload.o").read_bytes()


def _with_code(artifact_bytes: bytes, code: bytes, externals=("system",)) -> bytes:
    from kiln.driver.artifact import Artifact
    artifact = Artifact.from_bytes(artifact_bytes, "test")
    artifact.code, artifact.externals = code, list(externals)
    return artifact.to_bytes()


def _rewrite_kx(source: Path, target: Path, change) -> Path:
    """A copy of the `.kx` file `source` with each member's bytes passed through
    `change(name, data)` (None drops the member)."""
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
        for name in src.namelist():
            data = change(name, src.read(name))
            if data is not None:
                dst.writestr(name, data)
    return target


def _payload_kx(tmp_path: Path, marker: Path) -> Path:
    """A `.kx` file whose compiled code is `_payload`."""
    kiln.compile(AFFINE).save(tmp_path / "good.kx")
    from kiln.driver.artifact import Artifact
    with zipfile.ZipFile(tmp_path / "good.kx") as archive:
        symbol = Artifact.from_bytes(archive.read("compiled/0.kart"), "test").symbol
    code = _payload(tmp_path, symbol, marker)
    return _rewrite_kx(tmp_path / "good.kx", tmp_path / "evil.kx",
                       lambda name, data: _with_code(data, code) if name.endswith(".kart") else data)


# -- class 2: no machine code by content -----------------------------------------------------

def test_a_kx_file_under_another_name_is_refused_everywhere(tmp_path, capsys):
    marker = tmp_path / "ran"
    evil = _payload_kx(tmp_path, marker)
    disguised = tmp_path / "model.mlir"
    disguised.write_bytes(evil.read_bytes())
    load_hint = "kiln.load_executable"

    for source in (disguised, str(disguised), disguised.read_bytes()):
        with pytest.raises(KilnError, match="is a zip archive, not a program") as caught:
            kiln.compile(source)
        assert not isinstance(caught.value, InternalError) and load_hint in str(caught.value)
    with pytest.raises(KilnError, match="zip archive"):
        kiln.load(disguised)

    from kiln.cli import main as kiln_main, opt, translate
    from kiln import conformance
    assert kiln_main.main(["run", str(disguised)]) == 1
    assert opt.main([str(disguised)]) == 1
    assert opt.main(["--split-input-file", str(disguised)]) == 1
    assert translate.main(["--stablehlo-to-hlo", str(disguised)]) == 1
    errors = capsys.readouterr().err
    assert errors.count("is a zip archive, not a program") == 4, errors
    assert "internal error" not in errors
    result = conformance.run_file(str(disguised))
    assert not result.passed and "zip archive" in result.detail
    assert not marker.exists()

    # The payload is live code: linked in and called, it does run (so the refusals above are
    # what kept it from running).
    import ctypes
    from kiln.driver.artifact import Artifact
    from kiln.targets import objects
    with zipfile.ZipFile(evil) as archive:
        planted = Artifact.from_bytes(archive.read("compiled/0.kart"), "test")
    loaded = objects.load(planted.code, planted.externals, "the payload")
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(loaded.function(planted.symbol))(None)
    assert marker.exists()


def test_a_kx_file_on_standard_input_is_refused(tmp_path):
    kiln.compile(ADD).save(tmp_path / "add.kx")
    for tool in (["kiln.cli.opt"], ["kiln.cli.translate", "--stablehlo-to-hlo", "-"]):
        with open(tmp_path / "add.kx", "rb") as stdin:
            done = subprocess.run([sys.executable, "-m", *tool], stdin=stdin, capture_output=True,
                                  text=True, timeout=300)
        assert done.returncode == 1, done.stderr
        assert "<stdin>: is a zip archive, not a program" in done.stderr
        assert "Traceback" not in done.stderr


def test_only_the_kx_suffix_makes_kiln_run_load_an_executable(tmp_path, capsys):
    from kiln.cli import main as kiln_main
    kiln.compile(ADD).save(tmp_path / "add.kx")
    assert kiln_main._is_executable(str(tmp_path / "add.kx"))
    (tmp_path / "add.mlir").write_text(ADD)
    assert not kiln_main._is_executable(str(tmp_path / "add.mlir"))
    assert not kiln_main._is_executable(str(tmp_path / "missing.mlir"))
    (tmp_path / "archive.bin").write_bytes((tmp_path / "add.kx").read_bytes())
    with pytest.raises(KilnError, match="zip archive"):
        kiln_main._is_executable(str(tmp_path / "archive.bin"))


# -- class 2: the compile cache trusts only what this user's Kiln wrote ------------------------

@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv("KILN_CACHE_DIR", str(directory))
    monkeypatch.delenv("KILN_CACHE", raising=False)
    return directory


def _only_entry(directory: Path) -> Path:
    (entry,) = directory.glob("*.kart")
    return entry


def _entry_parts(entry: Path) -> tuple[str, bytes]:
    """(cache key, artifact bytes) of a genuine entry."""
    from kiln.driver import cache
    data = entry.read_bytes()
    assert data.startswith(cache.ENTRY_MAGIC)
    return entry.name[:-len(cache.SUFFIX)], data[len(cache.ENTRY_MAGIC) + 32:]


def _signed(directory: Path, key: str, content: bytes, secret: bytes | None = None) -> bytes:
    from kiln.driver import cache
    secret = secret if secret is not None else (directory / cache.KEY_FILE).read_bytes()
    tag = hmac.new(secret, key.encode() + b"\0" + content, hashlib.sha256).digest()
    return cache.ENTRY_MAGIC + tag + content


def _origin(exe) -> str:
    (origin,) = set(exe.origins.values())
    return origin


def test_the_cache_directory_and_key_are_private(cache_dir):
    kiln.compile(ADD)
    from kiln.driver import cache
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    key = cache_dir / cache.KEY_FILE
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.stat().st_uid == os.geteuid()
    assert len(key.read_bytes()) == 32
    entry = _only_entry(cache_dir)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert _origin(kiln.compile(ADD)) == "cache"


def test_planted_cache_entries_never_run(cache_dir, tmp_path):
    marker = tmp_path / "ran"
    x, w = _inputs()
    kiln.compile(AFFINE)
    entry = _only_entry(cache_dir)
    key, genuine = _entry_parts(entry)
    from kiln.driver.artifact import Artifact
    symbol = Artifact.from_bytes(genuine, "test").symbol
    evil = _with_code(genuine, _payload(tmp_path, symbol, marker))
    other_key = os.urandom(32)
    plantings = {
        "an unsigned artifact (the old format)": evil,
        "a made-up digest": _signed(cache_dir, key, evil, secret=b"\0" * 32)[:8] + os.urandom(32) + evil,
        "a digest under another user's key": _signed(cache_dir, key, evil, secret=other_key),
        "a genuine digest for another key": _signed(cache_dir, "0" * 64, evil),
        "a genuine entry with its code swapped": _signed(cache_dir, key, genuine)[:40] + evil,
    }
    for what, planted in plantings.items():
        entry.write_bytes(planted)
        exe = kiln.compile(AFFINE)
        assert _origin(exe) == "compiled", what
        np.testing.assert_allclose(exe(x, w)[0], np.tanh(x @ w), rtol=1e-5, atol=1e-6)
        assert not marker.exists(), what
        # The planted entry was discarded and replaced by a genuine one, which hits.
        assert _entry_parts(entry)[1] != evil
        assert _origin(kiln.compile(AFFINE)) == "cache", what
    assert not marker.exists()


def test_damaged_cache_entries_are_misses_and_later_compiles_work(cache_dir):
    x, w = _inputs()
    kiln.compile(AFFINE)
    entry = _only_entry(cache_dir)
    key, genuine = _entry_parts(entry)
    from kiln.driver.artifact import MAGIC
    size = int.from_bytes(genuine[len(MAGIC):len(MAGIC) + 8], "little")
    header = json.loads(genuine[len(MAGIC) + 8:len(MAGIC) + 8 + size])

    def with_header(new) -> bytes:
        encoded = json.dumps(new).encode()
        return MAGIC + len(encoded).to_bytes(8, "little") + encoded + genuine[len(MAGIC) + 8 + size:]
    damaged = {
        # Damage behind a good digest: what a Kiln bug or a disk could leave.
        "header a JSON list": _signed(cache_dir, key, with_header(list(header))),
        "header a number": _signed(cache_dir, key, with_header(7)),
        "results malformed": _signed(cache_dir, key, with_header({**header, "results": [[1]]})),
        "no symbol": _signed(cache_dir, key, with_header({k: v for k, v in header.items()
                                                          if k != "symbol"})),
        "executable incomplete": _signed(cache_dir, key, with_header(
            {**header, "executable": {"entry": "main"}})),
        "executable arguments malformed": _signed(cache_dir, key, with_header(
            {**header, "executable": {**header["executable"], "arguments": 5}})),
        "executable layouts malformed": _signed(cache_dir, key, with_header(
            {**header, "executable": {**header["executable"], "layouts": {"params": 1}}})),
        "header past the end": _signed(cache_dir, key, MAGIC + (1 << 40).to_bytes(8, "little")),
        "deeply nested header": _signed(cache_dir, key, with_header([[]]).replace(b"[[]]", b"[" * 100000)),
        # Damage to the entry itself.
        "truncated": _signed(cache_dir, key, genuine)[:100],
        "empty": b"",
        "garbage": b"KILNMAC1 garbage",
    }
    for what, data in damaged.items():
        entry.write_bytes(data)
        exe = kiln.compile(AFFINE)
        assert _origin(exe) == "compiled", what
        np.testing.assert_allclose(exe(x, w)[0], np.tanh(x @ w), rtol=1e-5, atol=1e-6)
        assert _origin(kiln.compile(AFFINE)) == "cache", what
    # Not a regular file where the entry should be: a link to an endless device, a directory.
    entry.unlink()
    for what in ("link", "directory"):
        if what == "link":
            entry.symlink_to("/dev/zero")
        else:
            entry.mkdir()
        assert _origin(kiln.compile(AFFINE)) == "compiled", what
        if entry.is_dir():
            entry.rmdir()
        else:
            entry.unlink()


@pytest.mark.parametrize("unsafe", ["group-writable", "world-writable", "another user's",
                                    "link to another user's", "under a writable parent"])
def test_an_unsafe_cache_directory_is_not_used(tmp_path, monkeypatch, capfd, unsafe):
    directory = tmp_path / "cache"
    if unsafe == "under a writable parent":
        (tmp_path / "shared").mkdir(mode=0o777)
        os.chmod(tmp_path / "shared", 0o777)  # no sticky bit: anyone could rename "cache" away
        directory = tmp_path / "shared" / "cache"
    directory.mkdir(mode=0o700)
    if unsafe == "group-writable":
        os.chmod(directory, 0o770)
    elif unsafe == "world-writable":
        os.chmod(directory, 0o777)
    elif unsafe in ("another user's", "link to another user's"):
        _give_away(directory)
    if unsafe == "link to another user's":
        (tmp_path / "link").symlink_to(directory)
        directory = tmp_path / "link"
    monkeypatch.setenv("KILN_CACHE_DIR", str(directory))
    monkeypatch.delenv("KILN_CACHE", raising=False)
    from kiln.driver import cache_dir
    monkeypatch.setattr(cache_dir, "_warned", set())
    x = np.arange(4, dtype=np.float32)
    for _ in range(2):
        exe = kiln.compile(ADD)
        assert _origin(exe) == "compiled"
        np.testing.assert_allclose(exe(x, x)[0], 2 * x)
    warnings = [line for line in capfd.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1, warnings  # one line, once per process
    assert "not private to this user" in warnings[0] and "compiling without the cache" in warnings[0]
    assert os.listdir(directory) == []  # nothing read from it, nothing written to it


def test_a_sticky_shared_parent_is_fine(tmp_path, monkeypatch):
    # As /tmp: others may write there, but cannot rename or remove this user's directory.
    (tmp_path / "sticky").mkdir()
    os.chmod(tmp_path / "sticky", 0o1777)
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "sticky" / "cache"))
    monkeypatch.delenv("KILN_CACHE", raising=False)
    kiln.compile(ADD)
    assert _origin(kiln.compile(ADD)) == "cache"
    assert stat.S_IMODE((tmp_path / "sticky" / "cache").stat().st_mode) == 0o700


def test_a_key_file_that_is_not_private_turns_hits_into_misses(cache_dir):
    from kiln.driver import cache
    kiln.compile(ADD)
    key = cache_dir / cache.KEY_FILE
    os.chmod(key, 0o644)
    assert _origin(kiln.compile(ADD)) == "compiled"
    os.chmod(key, 0o600)
    _give_away(key)
    assert _origin(kiln.compile(ADD)) == "compiled"
    key.unlink()
    # A new key: the old entry's digest no longer holds, so it is a miss, then a hit.
    assert _origin(kiln.compile(ADD)) == "compiled"
    assert _origin(kiln.compile(ADD)) == "cache"


def test_processes_racing_to_make_the_key_share_one(tmp_path):
    from kiln.driver import private_files
    directory = private_files.private_directory(tmp_path / "race", what="test")
    script = ("import sys\nfrom pathlib import Path\nfrom kiln.driver import private_files\n"
              "sys.stdout.write(private_files.secret_key(Path(sys.argv[1]), 'k').hex())\n")
    processes = [subprocess.Popen([sys.executable, "-c", script, str(directory)],
                                  stdout=subprocess.PIPE, text=True) for _ in range(6)]
    keys = {p.communicate(timeout=120)[0] for p in processes}
    keys.add(private_files.secret_key(directory, "k").hex())
    assert len(keys) == 1 and len(keys.pop()) == 64
    assert sorted(os.listdir(directory)) == ["k"]  # no candidate left behind


# -- class 8: malformed .kx files are clear errors --------------------------------------------

def _kx_errors(path: Path) -> str:
    with pytest.raises(KilnError) as caught:
        kiln.load_executable(path)
    assert not isinstance(caught.value, InternalError), caught.value
    assert str(path) in str(caught.value)
    return str(caught.value)


def _manifest_change(change):
    def rewrite(name, data):
        if name != "manifest.json":
            return data
        manifest = json.loads(data)
        result = change(manifest)
        return json.dumps(manifest if result is None else result)
    return rewrite


def test_malformed_kx_files_are_located_kiln_errors(tmp_path):
    good = tmp_path / "good.kx"
    kiln.compile(AFFINE).save(good)
    data = good.read_bytes()
    for i, cut in enumerate((10, len(data) // 2, len(data) - 10)):
        (tmp_path / f"cut{i}.kx").write_bytes(data[:cut])
        _kx_errors(tmp_path / f"cut{i}.kx")
    cases = {
        "not json": lambda name, d: b"{nope" if name == "manifest.json" else d,
        "no manifest": lambda name, d: None if name == "manifest.json" else d,
        "no module": lambda name, d: None if name == "module.mlirbc" else d,
        "no code": lambda name, d: None if name.endswith(".kart") else d,
        "deep json": lambda name, d: b"[" * 200000 if name == "manifest.json" else d,
        "kart header a list": lambda name, d: (
            d[:8] + (2).to_bytes(8, "little") + b"[]" + d[16 + int.from_bytes(d[8:16], "little"):]
            if name.endswith(".kart") else d),
        "manifest a list": _manifest_change(lambda m: [m]),
        "manifest a string": _manifest_change(lambda m: "kiln"),
    }
    fields = ["kiln", "target", "options", "cpu", "entry", "filename", "arguments", "results",
              "layouts", "convention", "compiled"]
    for field in fields:
        for bad in (None, 7, "x", [], {}, [[1, "f32"]], [["a", "b"]], {"features": 3}):
            cases[f"{field}={bad!r}"] = _manifest_change(
                lambda m, field=field, bad=bad: m.update({field: bad}))
        cases[f"no {field}"] = _manifest_change(lambda m, field=field: m.pop(field))
    cases["compiled names a missing member"] = _manifest_change(
        lambda m: m["compiled"][0].update(artifact="nowhere"))
    cases["compiled shapes not shapes"] = _manifest_change(
        lambda m: m["compiled"][0].update(shapes=[["x"]]))
    cases["unknown target option"] = _manifest_change(lambda m: m["options"].update(no_such=1))
    cases["convention with an unknown field"] = _manifest_change(
        lambda m: m["convention"].update(no_such=1))
    loaded_fine = []
    for number, (what, change) in enumerate(cases.items()):
        path = _rewrite_kx(good, tmp_path / f"case{number}.kx", change)
        try:
            kiln.load_executable(path)
            loaded_fine.append(what)  # a change that does not matter (e.g. the filename)
        except InternalError as exc:
            pytest.fail(f"{what}: {exc}")
        except KilnError as exc:
            assert str(path) in str(exc), (what, str(exc))
    # Only changes that leave the code's signature as it was may load: names, options the
    # target ignores, no compiled shapes (compiled on call from the module), the defaults
    # of the calling convention.
    assert set(loaded_fine) <= {"filename='x'", "entry='x'", "options={}",
                                "options={'features': 3}", "unknown target option",
                                "compiled=[]", "convention={}"}, loaded_fine


def test_zip_bombs_and_odd_archives_are_refused_before_unpacking(tmp_path):
    good = tmp_path / "good.kx"
    kiln.compile(ADD).save(good)
    # A member that declares (and unpacks to) far more than any Kiln executable of this
    # size holds: refused from its declared size, before it is unpacked.
    bomb = _rewrite_kx(good, tmp_path / "bomb.kx",
                       lambda name, d: bytes(200 << 20) if name == "module.mlirbc" else d)
    assert bomb.stat().st_size < 2 << 20
    assert "would unpack to" in _kx_errors(bomb)
    big_manifest = _rewrite_kx(good, tmp_path / "manifest.kx", lambda name, d: d + b" " * (17 << 20)
                               if name == "manifest.json" else d)
    assert "would unpack to" in _kx_errors(big_manifest)
    # An archive whose directory claims a compression method zipfile lacks.
    data = bytearray(good.read_bytes())
    for signature in (b"PK\x03\x04", b"PK\x01\x02"):
        at = data.find(signature)
        while at >= 0:
            offset = at + (8 if signature == b"PK\x03\x04" else 10)
            data[offset:offset + 2] = (99).to_bytes(2, "little")
            at = data.find(signature, at + 4)
    (tmp_path / "method.kx").write_bytes(bytes(data))
    _kx_errors(tmp_path / "method.kx")
    # Members flagged as encrypted.
    data = bytearray(good.read_bytes())
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        data[at + 8] |= 1
        at = data.find(b"PK\x01\x02", at + 4)
    (tmp_path / "encrypted.kx").write_bytes(bytes(data))
    _kx_errors(tmp_path / "encrypted.kx")
    # Not a file at all.
    (tmp_path / "dir.kx").mkdir()
    _kx_errors(tmp_path / "dir.kx")


# -- class 7: reproducers go to a private directory ---------------------------------------------

def _crash(**options) -> str:
    with pytest.raises(KilnError) as caught:
        kiln.compile(ADD, extra_passes={"bufferize": [compile_faults.segfault]}, **options)
    assert not isinstance(caught.value, InternalError)
    assert "stage 'bufferize'" in str(caught.value)
    return str(caught.value)


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path / f"kiln-{os.geteuid()}"


def test_reproducers_go_to_a_private_directory(scratch, tmp_path):
    import re
    message = _crash()
    path = Path(re.search(r"reproducer: (\S+\.mlir)", message).group(1))
    assert path.parent == scratch / "reproducers"
    for directory in (scratch, scratch / "reproducers"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
        assert directory.stat().st_uid == os.geteuid()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "Replay: kiln-opt" in path.read_text() and "py-segfault" in path.read_text()
    assert not (tmp_path / "kiln-reproducers").exists()


@pytest.mark.parametrize("planted", ["another user's directory", "a world-writable directory",
                                     "a link to another user's directory"])
def test_a_planted_scratch_directory_is_refused(scratch, tmp_path, planted):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "reproducers").mkdir()
    if planted == "a world-writable directory":
        os.chmod(theirs, 0o777)
        theirs.rename(scratch)
        theirs = scratch
    else:
        _give_away(theirs)
        if planted == "another user's directory":
            theirs.rename(scratch)
            theirs = scratch
        else:
            scratch.symlink_to(theirs)
    message = _crash()
    assert "no reproducer was written" in message and "not private to this user" in message
    assert list((theirs / "reproducers").iterdir()) == []
    assert victim.read_text() == "precious"


def test_reproducer_writes_never_follow_links(tmp_path):
    from kiln.driver import private_files
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / "reproducer.mlir").symlink_to(victim)
    with pytest.raises(OSError):
        private_files.overwrite(tmp_path / "reproducer.mlir", "program IR")
    assert victim.read_text() == "precious"
    handle, path = private_files.create_file(tmp_path, "x.", ".mlir")
    os.close(handle)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_program_named_entry_stays_in_the_directory_and_the_shell(tmp_path):
    import re
    name = "../../x$(touch pwned)"
    program = ADD.replace("@main", f'@"{name}"')
    with pytest.raises(KilnError) as caught:
        kiln.compile(program, entry=name, dump_dir=tmp_path / "dumps",
                     extra_passes={"bufferize": [compile_faults.segfault]})
    message = str(caught.value)
    path = Path(re.search(r"reproducer: (\S+\.mlir)", message).group(1))
    assert path.parent == tmp_path / "dumps"
    assert "'../../x$(touch pwned)'" in message  # quoted in the replay command line


def test_object_code_is_read_back_only_from_the_file_kiln_made(tmp_path):
    # LLVM writes the object code to a named scratch file (in /dev/shm, shared by all users):
    # what is linked in is read through the descriptor of the file Kiln created, and a file
    # swapped in under its name is refused.
    import tempfile
    from kiln.targets.cpu import _read_back
    handle, path = tempfile.mkstemp(dir=tmp_path)
    Path(path).write_bytes(b"kiln's object code")
    assert _read_back(handle, path) == b"kiln's object code"
    planted = tmp_path / "planted.o"
    planted.write_bytes(b"someone else's code")
    os.replace(planted, path)
    with pytest.raises(KilnError, match="was replaced"):
        _read_back(handle, path)
    os.close(handle)
