"""Untrusted bytes meet MLIR's C++ readers here, where a crash cannot take the caller down.

MLIR's bytecode reader, the StableHLO artifact deserializer and jaxlib's trust their input: a
flipped byte can crash them (SIGSEGV), and a crash inside a C++ extension kills the hosting
process, a Jupyter kernel included. So binary inputs are read in a forked child, which hands
back the module as MLIR text, checked to be valid UTF-8 (the bindings abort the process when a
string they return is not) and bounded in nesting; the caller parses that text. If the child
dies, the input is reported as corrupt and the caller lives on. Text inputs are scanned
instead, for the one way text crashes the parser: nesting deep enough to overflow its stack
(every bracket kind, aliases included). The servers here and in driver/worker.py share the
rest of the discipline: a child gets a memory limit (KILN_COMPILE_MEMORY) and dies with its
server, and a server ends when the process that started it is gone.
"""
from __future__ import annotations

import bisect
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

from .. import environment
from ..errors import KilnError

# Deeper nesting than any real program has, and far below what overflows the MLIR parser's
# stack (about 2,400 regions, fewer nested types) or Python's recursion limit in Kiln's own walks
# (about 1,000). It bounds every bracket kind the parsers recurse on: `{([` and, in MLIR, the
# `<` of types and attributes (`tuple<...>`, `#dialect<...>`, `!dialect<...>`).
MAX_NESTING = 256

_QUOTED = re.compile(rb'"[^"\\\n]*(?:\\.[^"\\\n]*)*"')
_LINE_COMMENT = re.compile(rb"//[^\n]*")
_BLOCK_COMMENT = re.compile(rb"/\*.*?\*/", re.S)
# `%v#N` (result N of a value pack) and `%v:N` (a pack of N results): the parser makes room for
# N results up front, so a huge N exhausts memory or time before any error is reported.
MAX_RESULT_NUMBER = 1 << 16
_RESULT_NUMBER = re.compile(rb"%[\w$.-]+[#:](\d{5,})")
# A type or attribute alias (`!t = tuple<...>`, `#a = [...]`) defined at the start of a line: a
# use stands for the whole definition, so an alias of an alias of ... nests without brackets.
_ALIAS_DEFINITION = re.compile(rb"^([#!][\w.$-]+)[ \t]*=", re.M)
_ALIAS_USE = re.compile(rb"[#!][\w.$-]+")


def check_text_nesting(text: str, filename: str, *, angle_brackets: bool = True) -> None:
    """Refuse text whose brackets nest deeper than MAX_NESTING, or whose result numbers are
    absurd (see MAX_RESULT_NUMBER), naming where. `angle_brackets`: count `<...>` too (MLIR;
    HLO text has `<=` in tile assignments and no parser recursion on `<`)."""
    raw = text.encode("utf-8", "replace")
    data = _QUOTED.sub(lambda m: b" " * len(m.group()), raw)
    for m in _RESULT_NUMBER.finditer(data):
        if int(m.group(1)) > MAX_RESULT_NUMBER:
            raise KilnError(f"result number {int(m.group(1))} is out of range",
                            location=_where(data, filename, m.start(1)),
                            hint=f"operations have at most {MAX_RESULT_NUMBER} results here")
    if angle_brackets:  # MLIR: `//` comments are trivia to every reader
        data = _blank(data, _LINE_COMMENT)
    depth = _nesting_depth(data, angle_brackets)
    if depth.size and depth.max() > MAX_NESTING:
        _too_deep(data, filename, int(np.argmax(depth > MAX_NESTING)))
    if angle_brackets:
        _check_alias_nesting(data, depth, filename)
        _check_empty_all_to_all_groups(raw, filename)
        _check_convolution_dimension_numbers(raw, filename)


# StableHLO's all_to_all verifier divides by the number of replica groups: zero groups
# (`dense<> : tensor<0xNxi64>`) end the parsing process with SIGFPE (an upstream bug). The
# parse of text runs in the caller, so an all_to_all whose replica_groups (written out, or
# through an attribute alias) has no rows is refused before it.
_ALL_TO_ALL_GROUPS = re.compile(
    rb"all_to_all[\s\S]{0,4096}?replica_groups\s*=\s*"
    rb"(?:dense<[^>]*>\s*:\s*tensor<(?P<rows>\d+)x|(?P<alias>#[\w.$-]+))")
_GROUPS_ALIAS = rb"^%s\s*=\s*dense<[^>]*>\s*:\s*tensor<(\d+)x"


def _check_empty_all_to_all_groups(raw: bytes, filename: str) -> None:
    for m in _ALL_TO_ALL_GROUPS.finditer(raw):  # op names are quoted in the generic form
        rows = m.group("rows")
        if rows is None:
            alias = re.search(_GROUPS_ALIAS % re.escape(m.group("alias")), raw, re.M)
            rows = alias.group(1) if alias else None
        if rows is not None and int(rows) == 0:
            raise KilnError("an all_to_all's replica_groups has no groups", location=_where(
                raw, filename, m.start()), hint="list the groups of devices that exchange "
                                                "blocks, e.g. dense<[[0, 1]]> : tensor<1x2xi64>")


# StableHLO's parser of a convolution's `[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]` makes room
# for spatial dimension N up front: N = 2^32 aborts the parsing process ("SmallVector unable
# to grow", an upstream bug). A spatial dimension is numbered below the bracket's length, so a
# number at or past it is refused before the parse.
_CONVOLUTION_LAYOUT = re.compile(rb"\[([\w\s,]*)\]\s*x\s*\[([\w\s,]*)\]\s*->\s*\[([\w\s,]*)\]")


def _check_convolution_dimension_numbers(raw: bytes, filename: str) -> None:
    for m in _CONVOLUTION_LAYOUT.finditer(raw):
        for group in (1, 2, 3):
            entries = m.group(group).split(b",")
            for entry in entries:
                entry = entry.strip()
                if entry.isdigit() and int(entry) >= len(entries):
                    raise KilnError(
                        f"convolution dim_numbers: spatial dimension {int(entry)} is out of "
                        f"range for a layout of {len(entries)} dimensions",
                        location=_where(raw, filename, m.start(group)),
                        hint="number the spatial dimensions 0, 1, ... in each of the three "
                             "layouts, e.g. [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]")


def _nesting_depth(data: bytes, angle_brackets: bool) -> np.ndarray:
    """The bracket depth after each byte of `data` (strings already blanked), never less than
    the depth a parser reaching that byte can be at: `->` is an arrow and `>=` a comparison,
    not closers, and the depth never drops below zero, so stray closers before a nest cannot
    hide it. (MLIR's `//` comments are blanked before.) HLO's readers skip comments (`//`,
    `/* */`) between tokens but keep them inside the raw attribute values they parse later, so
    there the deeper of both readings counts."""
    if angle_brackets:
        return _depth(data, b"{([<", b"})]>", arrows=True)
    uncommented = _blank(_blank(data, _BLOCK_COMMENT), _LINE_COMMENT)
    return np.maximum(_depth(data, b"{([", b"})]", arrows=False),
                      _depth(uncommented, b"{([", b"})]", arrows=False))


def _blank(data: bytes, pattern: re.Pattern) -> bytes:
    return pattern.sub(lambda m: re.sub(rb"[^\n]", b" ", m.group()), data)


def _depth(data: bytes, openers: bytes, closers: bytes, arrows: bool) -> np.ndarray:
    codes = np.frombuffer(data, np.uint8)
    step = np.zeros(256, np.int32)
    step[list(openers)], step[list(closers)] = 1, -1
    steps = step[codes]
    if arrows and codes.size:
        gt = codes == ord(">")
        not_closing = np.zeros_like(gt)
        not_closing[1:] = gt[1:] & (codes[:-1] == ord("-"))   # `->`
        not_closing[:-1] |= gt[:-1] & (codes[1:] == ord("="))  # `>=`
        steps[not_closing] = 0
    total = np.cumsum(steps)
    # Floored at zero: the running sum less its lowest point so far, where that is negative.
    return total - np.minimum(np.minimum.accumulate(total), 0)


def _check_alias_nesting(data: bytes, depth: np.ndarray, filename: str) -> None:
    """Each use of an alias nests as deep as its definition: a definition's own brackets plus
    the deepest alias it uses, where it uses it. A use deeper than MAX_NESTING is refused where
    it is. MLIR's location aliases may be used before they are defined, so definitions are
    settled in dependency order; a cycle counts as too deep."""
    definitions = list(_ALIAS_DEFINITION.finditer(data))
    if not definitions:
        return
    names = {m.group(1) for m in definitions}
    uses = [m for m in _ALIAS_USE.finditer(data) if m.group() in names]
    if not uses:
        return
    codes = np.frombuffer(data, np.uint8)
    # A definition runs from its `=` to the next line break back at depth zero.
    ends_at = np.flatnonzero((codes == ord("\n")) & (depth == 0))
    spans = []  # (start, end, name)
    for m in definitions:
        k = int(np.searchsorted(ends_at, m.end()))
        spans.append((m.end(), int(ends_at[k]) if k < len(ends_at) else len(data), m.group(1)))
    own = {name: 0 for name in names}
    for start, end, name in spans:
        base = int(depth[start - 1]) if start else 0
        own[name] = max(own[name], int(depth[start:end].max(initial=0)) - base)
    starts = [span[0] for span in spans]
    needs: dict[bytes, list[tuple[bytes, int]]] = {name: [] for name in names}
    for use in uses:
        i = bisect.bisect_right(starts, use.start()) - 1
        if i >= 0 and use.start() < spans[i][1]:
            needs[spans[i][2]].append((use.group(), int(depth[use.start()])))
    settled: dict[bytes, int] = {}
    for root in names:  # depth-first, without recursion: aliases may chain thousands deep
        stack, on_path = [(root, 0)], {root}
        while stack:
            name, i = stack[-1]
            if i < len(needs[name]):
                stack[-1] = (name, i + 1)
                used = needs[name][i][0]
                if used in on_path:
                    settled[name] = MAX_NESTING + 1
                elif used not in settled:
                    stack.append((used, 0))
                    on_path.add(used)
                continue
            stack.pop()
            on_path.discard(name)
            reached = max([own[name]] + [at + settled.get(used, MAX_NESTING + 1)
                                         for used, at in needs[name]])
            settled[name] = min(max(reached, settled.get(name, 0)), MAX_NESTING + 1)
    for use in uses:
        if int(depth[use.start()]) + settled[use.group()] > MAX_NESTING:
            _too_deep(data, filename, use.start(), through=use.group().decode())


def _too_deep(data: bytes, filename: str, offset: int, through: str | None = None):
    via = f" (through alias {through})" if through else ""
    raise KilnError(f"nesting deeper than {MAX_NESTING} levels{via}",
                    location=_where(data, filename, offset),
                    hint="no XLA program nests this deep; the input is malformed or hostile")


def _where(data: bytes, filename: str, offset: int) -> str:
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"{filename}:{line}:{column}"


def check_printed_nesting(module: ir.Module, filename: str) -> None:
    """The nesting bound on a module read from binary input, types and attributes included
    (`tuple<tuple<...>>` has no operations to count): its text form is scanned, as text input
    would be, for the caller who parses that text or bytecode again."""
    text = module.operation.get_asm(binary=True, print_generic_op_form=True,
                                    large_elements_limit=16)
    try:
        check_text_nesting(text.decode("utf-8", "replace"), filename)
    except KilnError as exc:
        raise KilnError(exc.message + " (in its text form)", location=filename,
                        hint=exc.hint) from None


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
    return float(environment.get("KILN_READ_TIMEOUT"))


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
        check_printed_nesting(module, filename)
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
    try:
        memory = compile_memory_limit()  # as the caller's environment set it
    except KilnError:
        memory = None  # the caller's own compiles report the bad setting
    while True:
        try:
            fmt_name, data, filename = receive_message(requests)
        except EOFError:
            return
        if b"sdy" in data:
            _preload_jaxlib()
        read_end, write_end = os.pipe()
        server = os.getpid()
        pid = os.fork()
        if pid == 0:
            die_with_parent(server)
            limit_memory(memory)
            os.close(read_end)
            read = binary_reader(Format[fmt_name], filename)
            answer = _read_and_print(lambda d: read(d, context), data, filename)
            with os.fdopen(write_end, "wb") as out:
                out.write(pickle.dumps(answer))
            os._exit(0)
        os.close(write_end)
        reply = _collect(read_end, pid, memory, filename)
        if reply is None:
            return  # the caller is gone, and the read with it
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


def _collect(read_end: int, pid: int, memory: int | None, filename: str):
    chunks: list[bytes] = []
    timeout = read_timeout()
    usage: list = []
    fate = wait_for_child(read_end, pid, timeout, chunks.append, usage=usage,
                          watch_parent=True)
    if fate == "orphaned":
        return None
    if fate == "timeout":
        return ("timeout", timeout)
    if chunks:
        return pickle.loads(b"".join(chunks))
    if memory and died_of_memory(fate, usage, memory):
        return ("error", (f"reading this input ran out of its memory limit "
                          f"({memory / (1 << 30):.2f} GiB)", filename,
                          "raise KILN_COMPILE_MEMORY if the input is really this large"))
    return ("signal", fate)


def died_of_memory(fate: str, usage: list, limit: int) -> bool:
    """Whether a child that died by a signal (`fate`, as wait_for_child says) had reached its
    memory limit: a failed allocation in C++ aborts (std::bad_alloc, LLVM's "out of memory")
    once the child has grown within reach of the limit (a failed allocation asks for about
    as much again as the structure it grows)."""
    if fate.startswith("exit status") or fate in ("timeout", "orphaned") or not usage:
        return False
    return usage[0].ru_maxrss * 1024 >= limit // 2  # kilobytes on Linux


def wait_for_child(read_end: int, pid: int, timeout, on_data, *, usage: list | None = None,
                   watch_parent: bool = False) -> str:
    """Hand what forked child `pid` writes into the pipe `read_end` to `on_data` as it comes,
    until the child closes it; then reap the child. Returns how it ended: "timeout" (it was
    killed after `timeout` seconds), "orphaned" (this process's parent died meanwhile: the
    child was killed, and this process should end), the name of the signal that killed it,
    or "exit status N". `timeout` may instead be a function returning the deadline (a
    time.monotonic() value), asked again after each chunk: a deadline that moves. `usage`:
    the child's resource usage (os.wait4's) is appended to it. `watch_parent`: a server's
    wait, which looks every PARENT_POLL_S for its own parent's end ("orphaned")."""
    fixed = time.monotonic() + timeout if not callable(timeout) else None
    deadline = (lambda: fixed) if fixed is not None else timeout
    with os.fdopen(read_end, "rb", buffering=0) as inp:
        while True:
            left = deadline() - time.monotonic()
            wait = min(left, PARENT_POLL_S) if watch_parent else left
            ready, _, _ = select.select([inp], [], [], max(0.0, wait))
            if not ready:
                orphaned = watch_parent and parent_gone()
                if orphaned or wait >= left:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    return "orphaned" if orphaned else "timeout"
                continue
            chunk = inp.read(1 << 20)
            if not chunk:
                break
            on_data(chunk)
    _, status, rusage = os.wait4(pid, 0)
    if usage is not None:
        usage.append(rusage)
    if os.WIFSIGNALED(status):
        return signal.Signals(os.WTERMSIG(status)).name
    return f"exit status {os.WEXITSTATUS(status)}"


# A server process (the reader's here, the compile worker's) notices this often that the
# process that started it is gone, and then ends with its children: none compiles on as an
# orphan. Its children die with it (die_with_parent).
PARENT_POLL_S = 0.5
_original_parent = os.getppid()


def parent_gone() -> bool:
    """Whether the process that started this one has ended (this one was re-parented)."""
    return os.getppid() != _original_parent


def die_with_parent(parent: int) -> None:
    """In a child just forked by `parent` (a server's pid, taken before the fork): be killed
    when that process ends (Linux's PR_SET_PDEATHSIG; the servers are single-threaded, so
    "the thread that forked" is the whole server), and end now if it already has."""
    global _original_parent
    _original_parent = parent
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the server's own watch (parent_gone) still ends the compile
    if os.getppid() != parent:
        os._exit(1)


# A compile's or a reader's child may use this share of the machine's memory
# (KILN_COMPILE_MEMORY): an input that makes the compiler grow without bound ends in a
# KilnError, not in the machine's out-of-memory killer. (A forked compile child starts at
# about 130 MB of data.)
_DEFAULT_MEMORY_SHARE = 0.5


def compile_memory_limit() -> int | None:
    """Bytes of data (heap and private mappings: RLIMIT_DATA) one compile or read may use:
    KILN_COMPILE_MEMORY as bytes or with a K/M/G/T suffix, "0" or "none" for no limit; by
    default half of physical memory."""
    raw = environment.get("KILN_COMPILE_MEMORY")
    if raw is None:
        try:
            return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
                       * _DEFAULT_MEMORY_SHARE)
        except (ValueError, OSError, AttributeError):
            return None
    text = raw.strip().upper().removesuffix("B")
    if text in ("0", "NONE", "OFF", ""):
        return None
    scale = 1 << (10 * " KMGT".index(text[-1])) if text[-1] in "KMGT" else 1
    try:
        amount = int(float(text.rstrip("KMGT")) * scale)
    except ValueError:
        amount = -1
    if amount <= 0:
        raise KilnError(f"KILN_COMPILE_MEMORY={raw!r} is not an amount of memory",
                        hint="write e.g. 8G, 512M, or none for no limit")
    return amount


def limit_memory(limit: int | None) -> None:
    """In a disposable child: hold its data (heap and private writable mappings; not code,
    files or address space merely reserved, which LLVM does freely) to `limit` bytes. Past
    it allocations fail, and the child ends (MemoryError, or C++'s abort on a failed one)."""
    if limit is None:
        return
    import resource
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    try:
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    except (ValueError, OSError):
        pass  # a limit this process may not set: the child runs without one


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
            decoded = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            return ("error", ("the input holds a string that is not valid UTF-8 "
                              f"(byte {exc.start} of its text form)", filename,
                              "symbol names and string attributes must be UTF-8"))
        try:
            check_text_nesting(decoded, filename)
        except KilnError as exc:  # types nest too deeply (operations were counted above)
            return ("error", (exc.message + " (in its text form)", filename, exc.hint))
        return ("ok", decoded)
    except KilnError as exc:
        return ("error", (exc.message, exc.location, exc.hint))
    except Exception as exc:  # noqa: BLE001 - reported to the parent as a failed read
        return ("other", f"{type(exc).__name__}: {exc}"[:500])


if __name__ == "__main__":
    _serve()
