"""Issue 25, classes 5 and 6: what an input can make Kiln's parsers and compile workers do is
bounded. Nesting of every bracket kind the parsers recurse on (MLIR's `<` included, through
aliases too, in text, HLO and bytecode), device counts, inlining growth and call depth, a
compile's memory, and a compile whose caller is gone.

Reproducers that would crash or exhaust the machine if the bound were missing run in a
subprocess with a time limit and a memory limit, so a regression fails the test instead of
taking the test run down."""
from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import kiln
from kiln import KilnError
from kiln.frontend.untrusted import MAX_NESTING, check_text_nesting

DEEP = 40_000  # segfaulted the MLIR parser: kiln.load, kiln-opt, kiln-translate, compile


def deep_tuple_program(depth: int = DEEP, comment: str = "") -> str:
    nested = "tuple<" * depth + "f32" + ">" * depth
    return (f"{comment}func.func @main(%a: tensor<f32>) -> tensor<f32> {{\n"
            "  return %a : tensor<f32>\n}\n"
            f"func.func private @g(%x: {nested}) -> ()\n")


def run_bounded(args, *, env=None, timeout=180, memory="4G", stdin=None):
    """Run `args` under a time and address-space limit; a crash shows as a negative rc."""
    command = ["prlimit", f"--as={_bytes(memory)}", *args]
    environ = {**os.environ, **(env or {})}
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environ,
                          input=stdin)


def _bytes(text: str) -> int:
    return int(text[:-1]) << {"M": 20, "G": 30}[text[-1]]


def _nesting_error(text: str, **options) -> str | None:
    try:
        check_text_nesting(text, "t.mlir", **options)
    except KilnError as exc:
        return str(exc)
    return None


# -- class 5: nesting, every bracket kind ----------------------------------------------------

def test_angle_brackets_count_toward_the_nesting_bound():
    message = _nesting_error(deep_tuple_program())
    assert message is not None and f"nesting deeper than {MAX_NESTING} levels" in message
    assert message.startswith("t.mlir:4:")  # the line with the nest, and where in it
    assert _nesting_error(deep_tuple_program(MAX_NESTING - 8)) is None
    # dialect types and attributes nest the same way
    assert _nesting_error("#a = #foo<" * 1 + "<" * 300 + ">" * 300 + ">") is not None
    assert _nesting_error("!x = !foo<" + "tuple<" * 300 + "f32" + ">" * 301) is not None


@pytest.mark.parametrize("hiding, closes", [
    (">" * 1000 + "\n", True),                      # stray closers before the nest
    ("// " + ">" * 1000 + "\n", False),             # closers in a comment
    ("%0 = x : (f32) -> f32\n" * 1000, False),      # arrows are not closers
    ("#s = affine_set<(d0) : (d0 >= 0)>\n" * 300, False),  # nor comparisons
])
def test_closers_that_are_not_closers_cannot_hide_a_nest(hiding, closes):
    nest = "tuple<" * 300 + "f32" + ">" * 300
    assert _nesting_error(hiding + nest) is not None  # the depth never goes below zero
    if not closes:  # ... nor down inside a nest
        assert _nesting_error("tuple<" * 200 + hiding + "tuple<" * 100) is not None


def test_strings_and_comments_do_not_count():
    assert _nesting_error('%0 = "x"() {s = "' + "<{[(" * 1000 + '"} : () -> ()\n') is None
    assert _nesting_error("// " + "<{[(" * 1000 + "\nfunc.func @f()\n") is None
    # `//` inside a string starts no comment: the brackets after it are real
    assert _nesting_error('"http://x" ' + "tuple<" * 300) is not None


def test_aliases_nest_as_deep_as_their_definitions():
    chain = "!t0 = f32\n" + "".join(f"!t{i} = tuple<!t{i - 1}>\n" for i in range(1, 400))
    message = _nesting_error(chain + "func.func private @g(%x: !t399)\n")
    assert message is not None and "through alias !t" in message
    shallow = "!t0 = f32\n" + "".join(f"!t{i} = tuple<!t{i - 1}>\n" for i in range(1, 100))
    assert _nesting_error(shallow + "func.func private @g(%x: !t99)\n") is None
    # location aliases may be used before they are defined; a cycle is refused
    locations = "".join(f"#loc{i} = loc(callsite(#loc{i + 1} at #loc{i + 1}))\n"
                        for i in range(1, 400)) + '#loc400 = loc("x")\n'
    assert _nesting_error("module {} loc(#loc1)\n" + locations) is not None
    assert _nesting_error("#a = loc(#b)\n#b = loc(#a)\n") is not None


def test_the_bound_refuses_none_of_kilns_own_tests():
    root = Path(__file__).resolve().parents[1]
    for path in [*root.glob("lit/**/*.mlir"), *root.glob("lit/**/*.hlo")]:
        if "Output" in path.parts:
            continue  # what lit's RUN lines wrote, the deep reproducers among them
        text = path.read_text(errors="replace")
        assert _nesting_error(text, angle_brackets=path.suffix == ".mlir") is None, path


def test_hlo_text_counts_its_own_brackets_not_tile_assignments():
    sharding = "  %p = f32[4] parameter(0), sharding={devices=[2,2]<=[4]}\n"
    assert _nesting_error(sharding * 400, angle_brackets=False) is None
    # a tuple shape nested past the bound, also behind `/* ) */` comments
    hidden = "(" * 200 + "/*" + ")" * 200 + "*/" + "(" * 200
    assert _nesting_error(hidden, angle_brackets=False) is not None
    from kiln.frontend.hlo import parse_module
    deep = ("HloModule m\n\nENTRY e {\n  ROOT %p = " + "(" * 300 + "f32[]" + ")" * 300
            + " parameter(0)\n}\n")
    with pytest.raises(KilnError, match="nesting deeper than 256") as caught:
        parse_module(deep, "deep.hlo")
    assert caught.value.location.startswith("deep.hlo:4:")


@pytest.fixture(scope="module")
def deep_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("deep")
    mlir = folder / "deep.mlir"
    mlir.write_text(deep_tuple_program())
    commented = folder / "commented.mlir"  # `kiln run` parsed such files in its own process
    commented.write_text(deep_tuple_program(comment="// interpreter.run_parallel\n"))
    return mlir, commented


LOAD = "import sys, kiln; kiln.load(sys.argv[1])"
IN_PROCESS = "import sys, kiln; kiln.compile(sys.argv[1], isolate=False)"


@pytest.mark.parametrize("which", ["load", "compile-in-process", "kiln-opt", "kiln run",
                                   "kiln run (comment)", "kiln-translate", "kiln conformance"])
def test_a_deep_nest_is_a_located_error_in_every_entry_point(deep_files, which):
    mlir, commented = deep_files
    python = [sys.executable, "-c"]
    cli = [sys.executable, "-m"]
    command = {"load": [*python, LOAD, str(mlir)],
               "compile-in-process": [*python, IN_PROCESS, str(mlir)],
               "kiln-opt": [*cli, "kiln.cli.opt", str(mlir)],
               "kiln run": [*cli, "kiln.cli.main", "run", str(mlir)],
               "kiln run (comment)": [*cli, "kiln.cli.main", "run", str(commented)],
               "kiln-translate": [*cli, "kiln.cli.translate", "--stablehlo-to-hlo",
                                  str(mlir)],
               "kiln conformance": [*cli, "kiln.cli.main", "conformance", str(mlir)]}[which]
    done = run_bounded(command)
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])  # not a signal
    said = done.stdout if which == "kiln conformance" else done.stderr  # its report
    assert "nesting deeper than 256 levels" in said
    line = 5 if which == "kiln run (comment)" else 4  # the line with the nest
    assert f"{mlir.parent}/" in said and f".mlir:{line}:" in said


def test_types_nested_in_bytecode_are_refused_before_the_caller_parses_them(tmp_path):
    from torch_mlir import ir
    from kiln.context import make_context
    module = ir.Module.parse(deep_tuple_program(1000), context=make_context())
    buffer = io.BytesIO()
    module.operation.write_bytecode(buffer)
    path = tmp_path / "deep.mlirbc"
    path.write_bytes(buffer.getvalue())
    for read in (kiln.load, kiln.compile):  # Kiln's reader process; a compile worker
        with pytest.raises(KilnError, match=r"nesting deeper than 256 levels \(in its text "
                                            r"form\)") as caught:
            read(path)
        assert caught.value.location == str(path)


# -- kiln run's interpreter.run_parallel detection ------------------------------------------

GRID = """func.func @f() -> tensor<ui32> {
  %r = stablehlo.replica_id : tensor<ui32>
  return %r : tensor<ui32>
}
func.func @main() {
  %results:2 = "interpreter.run_parallel"() {programs=[[@f], [@f]]} : () -> (tensor<ui32>, tensor<ui32>)
  func.return
}
"""


def test_run_parallel_is_recognised_by_the_op_not_by_its_name_in_the_text(tmp_path):
    from kiln.parallel_programs import parse_if_run_parallel
    mentioned = ("// interpreter.run_parallel runs programs at once; this one does not\n"
                 "func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
                 "  %0 = stablehlo.add %a, %a : tensor<2xf32>\n  return %0 : tensor<2xf32>\n}\n")
    assert parse_if_run_parallel(mentioned, "m.mlir") is None
    assert parse_if_run_parallel(GRID, "grid.mlir") is not None
    path = tmp_path / "mentioned.mlir"
    path.write_text(mentioned)
    assert parse_if_run_parallel(path, str(path)) is None
    np.savez(tmp_path / "in.npz", np.ones(2, np.float32))
    done = run_bounded([sys.executable, "-m", "kiln.cli.main", "run", str(path), "--inputs",
                        str(tmp_path / "in.npz"), "--print"])
    assert done.returncode == 0, done.stderr[-2000:]
    assert "[2. 2.]" in done.stdout  # compiled and run as the plain program it is


# -- class 6: device counts ------------------------------------------------------------------

def _with_devices(replicas: str, partitions: str) -> str:
    return (f"module attributes {{mhlo.num_partitions = {partitions}, "
            f"mhlo.num_replicas = {replicas}}} {{\n"
            "  func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
            "    return %a : tensor<2xf32>\n  }\n}\n")


@pytest.mark.parametrize("replicas, partitions, count", [
    ("1 : i32", "9223372036854775807 : i64", "9223372036854775807 devices"),
    ("1000000 : i32", "1 : i32", "1000000 devices"),
])
def test_device_counts_past_what_the_machine_runs_are_located_errors(replicas, partitions,
                                                                     count):
    started = time.monotonic()
    with pytest.raises(KilnError, match=f"= {count}; Kiln runs at most 1024") as caught:
        kiln.compile(_with_devices(replicas, partitions), filename="devices.mlir")
    assert caught.value.location == "devices.mlir:1:1"
    assert "KILN_MAX_DEVICES" in caught.value.hint
    assert time.monotonic() - started < 60


def test_device_counts_below_one_and_the_limit_setting(monkeypatch):
    with pytest.raises(KilnError, match="mhlo.num_replicas = 0: a program runs on at least"):
        kiln.compile(_with_devices("0 : i32", "1 : i32"), filename="zero.mlir")
    monkeypatch.setenv("KILN_MAX_DEVICES", "2")
    with pytest.raises(KilnError, match="= 4 devices; Kiln runs at most 2"):
        kiln.compile(_with_devices("2 : i32", "2 : i32"), filename="four.mlir")
    from kiln.distributed.fabric import LocalFabric
    with pytest.raises(KilnError, match="Kiln runs at most 2"):
        LocalFabric(3, 1)
    from kiln.distributed.groups import iota_groups
    with pytest.raises(KilnError, match="list 1000000000 device ids"):
        iota_groups("[1000000000,1]<=[1000000000]")
    monkeypatch.setenv("KILN_MAX_DEVICES", "many")
    with pytest.raises(KilnError, match="KILN_MAX_DEVICES='many' is not a number"):
        LocalFabric(1, 1)


def test_hlo_replica_groups_name_no_more_devices_than_kiln_runs():
    from kiln.frontend.hlo.parser import parse_replica_groups

    def fail(message):
        raise KilnError(message, location="groups.hlo:3:9")
    assert parse_replica_groups("[2,2]<=[4]", fail) == [[0, 1], [2, 3]]
    for groups, count in [("[1000000000,1]<=[1000000000]", "list 1000000000 device ids"),
                          ("mesh['x'=100000,'y'=100000] {'y'}", "has 10000000000 devices")]:
        started = time.monotonic()
        with pytest.raises(KilnError, match=count) as caught:
            parse_replica_groups(groups, fail)
        assert caught.value.location == "groups.hlo:3:9"
        assert time.monotonic() - started < 1  # refused before any list is made


# -- class 6: inlining growth and call depth -------------------------------------------------

def doubling_program(levels: int) -> str:
    """@f0 calls @f1 twice, which calls @f2 twice, ...: 2^levels operations once inlined.
    The last adds 1, so @main(x) = x + 2^(levels - 1)."""
    lines = ["func.func @main(%a: tensor<f32>) -> tensor<f32> {",
             "  %r = call @f0(%a) : (tensor<f32>) -> tensor<f32>", "  return %r : tensor<f32>",
             "}"]
    for k in range(levels):
        body = ["  %one = stablehlo.constant dense<1.0> : tensor<f32>",
                "  %y = stablehlo.add %a, %one : tensor<f32>"] if k == levels - 1 else [
            f"  %x = call @f{k + 1}(%a) : (tensor<f32>) -> tensor<f32>",
            f"  %y = call @f{k + 1}(%x) : (tensor<f32>) -> tensor<f32>"]
        lines += [f"func.func private @f{k}(%a: tensor<f32>) -> tensor<f32> {{", *body,
                  "  return %y : tensor<f32>", "}"]
    return "\n".join(lines) + "\n"


def chain_program(length: int) -> str:
    """@f0 calls @f1 calls @f2 ... (each also adds): a chain `length` calls deep."""
    lines = ["func.func @main(%a: tensor<f32>) -> tensor<f32> {",
             "  %r = call @f0(%a) : (tensor<f32>) -> tensor<f32>", "  return %r : tensor<f32>",
             "}"]
    for k in range(length):
        first = (f"  %x = call @f{k + 1}(%a) : (tensor<f32>) -> tensor<f32>" if k < length - 1
                 else "  %x = stablehlo.add %a, %a : tensor<f32>")
        lines += [f"func.func private @f{k}(%a: tensor<f32>) -> tensor<f32> {{", first,
                  "  %y = stablehlo.add %x, %a : tensor<f32>", "  return %y : tensor<f32>", "}"]
    return "\n".join(lines) + "\n"


def test_exponential_inlining_is_refused_where_it_starts():
    started = time.monotonic()
    with pytest.raises(KilnError, match="inlining the program's calls would build more than "
                                        "2097152 operations") as caught:
        kiln.compile(doubling_program(30), filename="double.mlir")
    # @f0..@f29: @f11 is the first function (from the leaves up) that alone passes the limit
    assert "@f11 alone grows" in str(caught.value)
    assert caught.value.location.startswith("double.mlir:")
    assert time.monotonic() - started < 120


def test_a_deep_call_chain_is_refused_and_a_long_one_compiles():
    with pytest.raises(KilnError, match="starts a chain of calls 1025 deep; Kiln inlines at "
                                        "most 1024 levels") as caught:
        kiln.compile(chain_program(1100), filename="chain.mlir")
    assert caught.value.location.startswith("chain.mlir:")
    # below the bounds calls inline as before: 200 levels, 2 adds each, on x = 1
    assert float(kiln.compile(chain_program(200))(np.float32(1))[0]) == 202.0
    assert float(kiln.compile(doubling_program(10))(np.float32(0))[0]) == 2.0 ** 9


def test_kiln_opt_checks_before_its_inline_pass_too():
    done = run_bounded([sys.executable, "-m", "kiln.cli.opt", "-", "--pass", "inline"],
                       stdin=doubling_program(30))
    assert done.returncode == 1, done.stderr[-2000:]
    assert "would build more than 2097152 operations" in done.stderr


# -- class 6: a compile's memory, and its caller's end ---------------------------------------

def test_a_compile_past_its_memory_limit_is_a_kiln_error(monkeypatch):
    # Inlining 2^22 copies is allowed here (the growth bound raised), so the compile grows
    # until the memory limit stops it.
    monkeypatch.setenv("KILN_MAX_INLINED_OPS", str(1 << 40))
    monkeypatch.setenv("KILN_COMPILE_MEMORY", "600M")
    with pytest.raises(KilnError, match=r"the compile ran out of its memory limit "
                                        r"\(0\.59 GiB\)") as caught:
        kiln.compile(doubling_program(22), filename="grows.mlir")
    assert caught.value.location == "grows.mlir"
    assert "raise KILN_COMPILE_MEMORY" in caught.value.hint
    # the next compile, under the same limit, is unaffected
    assert float(kiln.compile(chain_program(3))(np.float32(1))[0]) == 5.0


def test_kiln_compile_memory_is_read_as_an_amount(monkeypatch):
    from kiln.frontend.untrusted import compile_memory_limit
    for text, amount in [("8G", 8 << 30), ("512M", 512 << 20), ("1.5g", 3 << 29),
                         ("none", None), ("0", None)]:
        monkeypatch.setenv("KILN_COMPILE_MEMORY", text)
        assert compile_memory_limit() == amount
    monkeypatch.setenv("KILN_COMPILE_MEMORY", "lots")
    with pytest.raises(KilnError, match="is not an amount of memory"):
        compile_memory_limit()
    monkeypatch.delenv("KILN_COMPILE_MEMORY")
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert compile_memory_limit() == physical // 2


CALLER = """
import sys, kiln
print("compiling", flush=True)
kiln.compile(sys.argv[1])
"""


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, pending = set(), [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found.add(child)
            pending.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_the_worker_dies_with_its_caller(tmp_path):
    env = {**os.environ, "KILN_MAX_INLINED_OPS": str(1 << 40), "KILN_COMPILE_MEMORY": "2G",
           "KILN_CACHE_DIR": str(tmp_path)}
    program = tmp_path / "grows.mlir"
    program.write_text(doubling_program(24))
    caller = subprocess.Popen([sys.executable, "-c", CALLER, str(program)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        assert caller.stdout.readline().strip() == b"compiling"
        # The server is in a session of its own (Ctrl-C reaches the caller only): find it
        # and its compiling child by parentage, once the compile is under way.
        workers: set[int] = set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(workers) < 2:
            time.sleep(0.5)
            workers = _descendants(caller.pid)
        assert len(workers) >= 2, workers  # the server and its child at least
        time.sleep(2)  # well into the compile
    finally:
        caller.send_signal(signal.SIGKILL)
        caller.wait()
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and any(map(_alive, workers)):
        time.sleep(0.1)
    left = [pid for pid in workers if _alive(pid)]
    for pid in left:  # do not leave them behind if this fails
        os.kill(pid, signal.SIGKILL)
    assert not left, "workers outlived their caller"
