"""Untrusted bytes meet MLIR's C++ readers here, where a crash cannot take the caller down.

MLIR's bytecode reader, the StableHLO artifact deserializer and jaxlib's trust their input: a
flipped byte can crash them (SIGSEGV), and a crash inside a C++ extension kills the hosting
process, a Jupyter kernel included. So binary inputs are read in a forked child, which hands
back the module as MLIR text, checked to be valid UTF-8 (the bindings abort the process when a
string they return is not) and bounded in nesting; the caller parses that text. If the child
dies, the input is reported as corrupt and the caller lives on. Text inputs are scanned
instead, for the one way text crashes the parser: nesting deep enough to overflow its stack.
"""
from __future__ import annotations

import os
import pickle
import re
import select
import signal
import struct
import subprocess
import sys
import threading
import time

import numpy as np
from torch_mlir import ir

from ..errors import KilnError

# Deeper nesting than any real program has, and far below what overflows the MLIR parser's
# stack (about 2,400 regions) or Python's recursion limit in Kiln's own walks (about 1,000).
MAX_NESTING = 256

_QUOTED = re.compile(rb'"(?:[^"\\\n]|\\.)*"')
# `%v#N` (result N of a value pack) and `%v:N` (a pack of N results): the parser makes room for
# N results up front, so a huge N exhausts memory or time before any error is reported.
MAX_RESULT_NUMBER = 1 << 16
_RESULT_NUMBER = re.compile(rb"%[\w$.-]+[#:](\d{5,})")


def check_text_nesting(text: str, filename: str) -> None:
    """Refuse text whose brackets nest deeper than MAX_NESTING, or whose result numbers are
    absurd (see MAX_RESULT_NUMBER), naming where."""
    data = _QUOTED.sub(lambda m: b" " * len(m.group()), text.encode("utf-8", "replace"))
    for m in _RESULT_NUMBER.finditer(data):
        if int(m.group(1)) > MAX_RESULT_NUMBER:
            offset = m.start(1)
            line = data.count(b"\n", 0, offset) + 1
            column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
            raise KilnError(f"result number {int(m.group(1))} is out of range",
                            location=f"{filename}:{line}:{column}",
                            hint=f"operations have at most {MAX_RESULT_NUMBER} results here")
    codes = np.frombuffer(data, np.uint8)
    steps = (np.isin(codes, np.frombuffer(b"{([", np.uint8)).astype(np.int32)
             - np.isin(codes, np.frombuffer(b"})]", np.uint8)).astype(np.int32))
    depth = np.cumsum(steps)
    if depth.size and depth.max() > MAX_NESTING:
        offset = int(np.argmax(depth > MAX_NESTING))
        line = data.count(b"\n", 0, offset) + 1
        column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
        raise KilnError(f"nesting deeper than {MAX_NESTING} levels",
                        location=f"{filename}:{line}:{column}",
                        hint="no XLA program nests this deep; the input is malformed or hostile")


def check_module_nesting(module: ir.Module, filename: str) -> None:
    """The same bound on a parsed module (bytecode has no text to scan), without recursion."""
    stack = [(module.operation, 0)]
    while stack:
        op, depth = stack.pop()
        if depth > MAX_NESTING:
            raise KilnError(f"operations nest deeper than {MAX_NESTING} levels",
                            location=filename, hint="the input is malformed or hostile")
        for region in op.regions:
            for block in region.blocks:
                stack.extend((child.operation, depth + 1) for child in block.operations)


# Readers run in children of Kiln's reader server (`python -m kiln.frontend.untrusted`): a
# fresh, single-threaded Python that imported Kiln's front ends once and forks a child per
# input. Forking the caller itself is not safe once jax (or any threaded library) runs in it:
# a child can inherit a lock another thread held and hang (observed with jaxlib's
# deserializer); multiprocessing's own fork server would re-run the caller's script.
_server_lock = threading.Lock()
_server: subprocess.Popen | None = None


def read_timeout() -> float:
    """Seconds after which a reader that has not finished is taken to hang on the input
    (KILN_READ_TIMEOUT, read when a read starts)."""
    return float(os.environ.get("KILN_READ_TIMEOUT", "60"))


def reader_name(fmt) -> str:
    """What reads format `fmt` (kiln.frontend.detect), for messages."""
    return {"MLIR_BYTECODE": "the MLIR bytecode reader", "JAX_EXPORTED": "the JAX export reader",
            "HLO_TEXT": "the HLO text reader"}.get(fmt.name, "the MLIR parser")


def crashed_reading(what: str, how: str, filename: str) -> KilnError:
    """The error for a reader killed by signal `how` while it read an input."""
    return KilnError(f"{what} crashed reading this input ({how})", location=filename,
                     hint="the file is corrupt or not what it claims to be; Kiln read it in a "
                          "separate process, so nothing else was affected")


def read_too_long(what: str, seconds: float, filename: str) -> KilnError:
    return KilnError(f"{what} did not finish reading this input in {seconds:.0f} s",
                     location=filename, hint="the file is corrupt or not what it claims to be")


def read_here(fmt, data: bytes, ctx: ir.Context, filename: str) -> ir.Module:
    """Read binary `data` in this process, which must be a disposable child (a reader's crash
    ends it), with the checks a reader's child makes before its module leaves it."""
    try:
        module = binary_reader(fmt, filename)(data, ctx)
        check_module_nesting(module, filename)
        _touch_strings(module)
        return module
    except KilnError:
        raise
    except Exception as exc:  # noqa: BLE001 - as `_read_and_print` reports a failed read
        raise KilnError(f"{reader_name(fmt)} failed on this input: "
                        f"{type(exc).__name__}: {exc}"[:500], location=filename,
                        hint="the file is corrupt or not what it claims to be") from None


def read_in_child(fmt, data: bytes, filename: str, what: str) -> str:
    """Read `data` (a binary format `fmt` of kiln.frontend.detect) into a module in a child
    process and return that module as text (generic form, with locations). Re-raises the
    KilnError the child raised; a child killed by a signal means the reader crashed on this
    input, which becomes a KilnError here, as does one that does not finish."""
    global _server
    with _server_lock:
        for attempt in range(2):  # a server that died (killed from outside) is restarted once
            if _server is None or _server.poll() is not None:
                _server = subprocess.Popen([sys.executable, "-m", "kiln.frontend.untrusted"],
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                           stderr=subprocess.DEVNULL)
            try:
                send_message(_server.stdin, (fmt.name, data, filename))
                kind, payload = receive_message(_server.stdout)
                break
            except (BrokenPipeError, EOFError):
                _server = None
                if attempt:
                    raise KilnError(f"{what} could not be started", location=filename,
                                    hint="check that `python -m kiln.frontend.untrusted` runs")
    if kind == "signal":
        raise crashed_reading(what, payload, filename)
    if kind == "timeout":
        raise read_too_long(what, payload, filename)
    if kind == "error":
        message, location, hint = payload
        raise KilnError(message, location=location, hint=hint)
    if kind == "other":
        raise KilnError(f"{what} failed on this input: {payload}", location=filename,
                        hint="the file is corrupt or not what it claims to be")
    return payload


def send_message(stream, obj) -> None:
    """Write one length-prefixed pickled message (a server and its caller speak these)."""
    blob = pickle.dumps(obj)
    stream.write(struct.pack("<Q", len(blob)) + blob)
    stream.flush()


def receive_message(stream):
    header = stream.read(8)
    if len(header) < 8:
        raise EOFError
    (size,) = struct.unpack("<Q", header)
    blob = stream.read(size)
    if len(blob) < size:
        raise EOFError
    return pickle.loads(blob)


def _serve() -> None:
    """The reader server's loop: one forked child per request, its answer or fate returned."""
    import faulthandler
    faulthandler.disable()  # a child's crash is an expected, reported outcome
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    from ..context import make_context
    from . import jax_export  # noqa: F401  (imported once here, not in every child)
    from .detect import Format
    # One context, made here and inherited by every child: making it (every upstream dialect
    # registered, Kiln's loaded) took longer than reading a small program. A child's changes
    # to it die with the child. Single-threaded, so the server never has a thread pool to fork.
    context = make_context()
    context.enable_multithreading(False)
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            fmt_name, data, filename = receive_message(requests)
        except EOFError:
            return
        if b"sdy" in data:
            _preload_jaxlib()
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            read = binary_reader(Format[fmt_name], filename)
            answer = _read_and_print(lambda d: read(d, context), data, filename)
            with os.fdopen(write_end, "wb") as out:
                out.write(pickle.dumps(answer))
            os._exit(0)
        os.close(write_end)
        reply = _collect(read_end, pid)
        send_message(replies, reply)


def _preload_jaxlib() -> None:
    """Import jaxlib's deserializer in the server, once, before forking: artifacts with Shardy
    attributes are read through it (jax_export._artifact_text_via_jax), and a child that
    imports it itself pays about half a second per input. Importing it starts no thread here
    (jax's runtime, whose threads made forking unsafe, is never started in the server)."""
    try:
        from jax._src.interpreters import mlir  # noqa: F401
        from jax._src.lib import _jax  # noqa: F401
    except Exception:  # no jax, or a broken one: the child reports it for this input
        pass


def _collect(read_end: int, pid: int):
    chunks: list[bytes] = []
    timeout = read_timeout()
    fate = wait_for_child(read_end, pid, timeout, chunks.append)
    if fate == "timeout":
        return ("timeout", timeout)
    if chunks:
        return pickle.loads(b"".join(chunks))
    return ("signal", fate)


def wait_for_child(read_end: int, pid: int, timeout, on_data) -> str:
    """Hand what forked child `pid` writes into the pipe `read_end` to `on_data` as it comes,
    until the child closes it; then reap the child. Returns how it ended: "timeout" (it was
    killed after `timeout` seconds), the name of the signal that killed it, or
    "exit status N". `timeout` may instead be a function returning the deadline (a
    time.monotonic() value), asked again after each chunk: a deadline that moves."""
    fixed = time.monotonic() + timeout if not callable(timeout) else None
    deadline = (lambda: fixed) if fixed is not None else timeout
    with os.fdopen(read_end, "rb", buffering=0) as inp:
        while True:
            ready, _, _ = select.select([inp], [], [], max(0.0, deadline() - time.monotonic()))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return "timeout"
            chunk = inp.read(1 << 20)
            if not chunk:
                break
            on_data(chunk)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return signal.Signals(os.WTERMSIG(status)).name
    return f"exit status {os.WEXITSTATUS(status)}"


def binary_reader(fmt, filename: str):
    """The reader for a binary format: (data, context) -> module (its calling convention
    recorded on it)."""
    from .detect import Format
    if fmt is Format.MLIR_BYTECODE:
        from .jax_export import parse_raw_artifact  # JAX's raw mlir_module_serialized too
        return lambda data, ctx: parse_raw_artifact(data, ctx, filename)[0]
    from .jax_export import load_exported
    return lambda data, ctx: load_exported(data, ctx, filename)[0]


def _touch_strings(module: ir.Module) -> None:
    """Read every name and string the caller's passes may read: the bindings abort the process
    on one that is not valid UTF-8, and better here in the child than there."""
    stack = [module.operation]
    while stack:
        op = stack.pop()
        str(op.location)
        for name in op.attributes:
            try:
                attr = op.attributes[name]
            except TypeError:
                # The bindings cannot cast dense complex constants to a Python class; such
                # an attribute holds numbers only, no string to check.
                continue
            _touch_attribute(attr)
        for region in op.regions:
            for block in region.blocks:
                stack.extend(child.operation for child in block.operations)


def _touch_attribute(attr: ir.Attribute) -> None:
    pending = [attr]
    while pending:
        attr = pending.pop()
        # The bindings hand attributes out already cast to their concrete class.
        if isinstance(attr, (ir.StringAttr, ir.FlatSymbolRefAttr)):
            attr.value
        elif isinstance(attr, ir.DictAttr):
            for named in attr:
                named.name
                pending.append(named.attr)
        elif isinstance(attr, ir.ArrayAttr):
            pending.extend(attr)


def _read_and_print(read, data: bytes, filename: str):
    try:
        module = read(data)
        check_module_nesting(module, filename)
        _touch_strings(module)
        text = module.operation.get_asm(binary=True, enable_debug_info=True,
                                        print_generic_op_form=True)
        try:
            return ("ok", text.decode("utf-8"))
        except UnicodeDecodeError as exc:
            return ("error", ("the input holds a string that is not valid UTF-8 "
                              f"(byte {exc.start} of its text form)", filename,
                              "symbol names and string attributes must be UTF-8"))
    except KilnError as exc:
        return ("error", (exc.message, exc.location, exc.hint))
    except Exception as exc:  # noqa: BLE001 - reported to the parent as a failed read
        return ("other", f"{type(exc).__name__}: {exc}"[:500])


if __name__ == "__main__":
    _serve()
