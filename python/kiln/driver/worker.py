"""Compiles run in worker processes, where a crash in MLIR's or LLVM's C++ cannot take the
caller (a script, a Jupyter kernel) down.

A worker server (`python -m kiln.driver.worker`) is a fresh, single-threaded Python that
imported Kiln and made its MLIR context once; it forks a child per compile, so every compile
starts from the same clean state and a crash kills only that child. The next child is forked
as soon as the previous one has answered, and rehearses on a small program while it waits
(`_rehearse`), so a compile pays for neither the fork, the context nor most of the cost of
copy-on-write. The child runs the stages up to LLVM and emits object code (an `Artifact`),
which the caller links in (targets/objects.py); given a whole source (driver/front.py), it
imports it first (driver/source_import.py). Servers are pooled, one per compile in flight,
so threads can compile several programs at once.

The child reports each stage as it starts; the caller uses that for progress on a terminal
and, when the child dies (a signal) or runs past the time limit (KILN_COMPILE_TIMEOUT, in
seconds), to name the stage. It then compiles once more in a child that writes the IR before
every pass of that stage to a reproducer file, which names the pass and holds its input.
"""
from __future__ import annotations

import io
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

from .. import environment
from ..errors import KilnError
from ..frontend.untrusted import (compile_memory_limit, die_with_parent, died_of_memory,
                                  limit_memory, receive_message, send_message, wait_for_child)
from .artifact import Artifact
from .compiler import CompileRequest


def compile_timeout() -> float:
    try:
        return float(environment.get("KILN_COMPILE_TIMEOUT"))
    except ValueError:
        raise KilnError(f"KILN_COMPILE_TIMEOUT={environment.get('KILN_COMPILE_TIMEOUT')!r} is "
                        "not a number of seconds") from None


def _settings() -> dict:
    """What every request carries: the memory limit its compile runs under, and the caller's
    Kiln settings (KILN_*) as they are now; a pooled server was started with older ones."""
    return {"memory": compile_memory_limit(),
            "environ": {k: v for k, v in os.environ.items() if k.startswith("KILN_")}}


def _apply_settings(settings: dict) -> None:
    """In a request's child: the caller's settings (see `_settings`)."""
    for name in [k for k in os.environ if k.startswith("KILN_")]:
        if name not in settings["environ"]:
            del os.environ[name]
    os.environ.update(settings["environ"])
    limit_memory(settings["memory"])


def _out_of_memory(limit: int, filename: str | None) -> KilnError:
    return KilnError(f"the compile ran out of its memory limit ({limit / (1 << 30):.2f} GiB)",
                     location=filename,
                     hint="the program makes the compiler grow this far; raise "
                          "KILN_COMPILE_MEMORY (e.g. KILN_COMPILE_MEMORY=16G, or none) if it "
                          "really needs more")


class WorkerFailure(Exception):
    """A Python exception in the worker that is not a KilnError: a bug in Kiln, reported with
    the worker's traceback."""


# -- the caller's side ---------------------------------------------------------------------------

def pickle_request(request) -> bytes | None:
    """`request` pickled for a worker, or None when another process could not rebuild it
    (lambdas and closures do not pickle; functions and classes of `__main__` pickle by a
    name the worker lacks)."""
    buffer = io.BytesIO()
    try:
        _WorkerPickler(buffer).dump(request)
    except Exception:  # noqa: BLE001 - pickle raises many kinds (PicklingError, TypeError...)
        return None
    return buffer.getvalue()


class _WorkerPickler(pickle.Pickler):
    def persistent_id(self, obj):  # called for every object pickled
        if getattr(obj, "__module__", None) == "__main__":
            raise pickle.PicklingError(f"{obj!r} is defined in __main__")
        return None


class _Server:
    def __init__(self):
        # Its own session: Ctrl-C in the caller's terminal reaches the caller only, which
        # then stops the server (see `_exchange`).
        self.process = subprocess.Popen([sys.executable, "-m", "kiln.driver.worker"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, start_new_session=True)

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        """Stop the server and its children (its session's process group): a compile in
        flight stops too."""
        try:
            if self.process.returncode is None:  # not reaped: the group's id is still ours
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        except OSError:
            pass


_pool_lock = threading.Lock()
_idle: list[_Server] = []


def _acquire() -> _Server:
    with _pool_lock:
        while _idle:
            server = _idle.pop()
            if server.alive():
                return server
    return _Server()


def _release(server: _Server) -> None:
    with _pool_lock:
        if server.alive() and len(_idle) < max(2, os.cpu_count() or 2):
            _idle.append(server)
        else:
            server.stop()


def _exchange(envelope: tuple, on_message) -> tuple:
    """Send one request to a pooled server; hand progress messages to `on_message`; return
    the final one. A server that died outside a compile is replaced once."""
    for attempt in range(2):
        server = _acquire()
        try:
            send_message(server.process.stdin, (*envelope, _settings()))
            while True:
                message = receive_message(server.process.stdout)
                if message[0] not in _RELAYED:
                    _release(server)
                    return message
                on_message(message)
        except (BrokenPipeError, EOFError):
            server.stop()
            if attempt:
                raise KilnError("Kiln's compile worker could not be started",
                                hint="check that `python -m kiln.driver.worker` runs; "
                                     "KILN_COMPILE_IN_PROCESS=1 compiles without it") from None
        except BaseException:  # Ctrl-C (or anything else) while waiting: stop the compile
            server.stop()
            raise


def compile_in_worker(request: CompileRequest, pickled: bytes, progress=None) -> Artifact:
    """Compile `request` (`pickled`, as driver/build.py made it) in a worker; the artifact,
    or a KilnError (with a reproducer when the compiler crashed or hung)."""
    where = _Where(progress)
    envelope = ("compile", list(sys.path), pickled, compile_timeout(), None)
    kind, *payload = _exchange(envelope, where.on_message)
    if kind == "ok":
        return Artifact.from_bytes(payload[0], "the compile worker's result")
    _raise_reported(kind, payload, request.filename)
    raise _crash_report(request, pickled, where.stage, _how(kind, payload))


def import_in_worker(request, pickled: bytes, progress=None, on_imported=None
                     ) -> tuple[dict, bytes, Artifact | None]:
    """Import and compile a whole source (source_import.py's ImportRequest, `pickled`) in a worker:
    (the executable's info as JSON, the imported module as bytecode, the artifact or None
    for a dynamic signature). A reader that crashes or hangs is reported as the input's
    fault; a compile that does, with a reproducer."""
    from ..frontend.detect import Format, detect
    from ..frontend import untrusted
    fmt = detect(request.source)
    binary = fmt in (Format.MLIR_BYTECODE, Format.JAX_EXPORTED)
    # Binary readers get KILN_READ_TIMEOUT, as in Kiln's reader process; text is parsed
    # within the compile's own time.
    read_timeout = untrusted.read_timeout() if binary else None
    where = _Where(progress, on_imported)
    envelope = ("import", list(sys.path), pickled, compile_timeout(), read_timeout)
    kind, *payload = _exchange(envelope, where.on_message)
    if kind == "ok":
        artifact = payload[0] and Artifact.from_bytes(payload[0], "the compile worker's result")
        return where.imported[0], where.imported[1], artifact
    _raise_reported(kind, payload, request.filename)
    if where.imported is None:  # the reader crashed or hung: the input is at fault
        what = untrusted.reader_name(fmt)
        if kind == "timeout" and read_timeout is not None:
            raise untrusted.read_too_long(what, read_timeout, request.filename)
        if kind == "crashed":
            raise untrusted.crashed_reading(what, payload[0], request.filename)
        raise KilnError(f"{what} {_how(kind, payload)} reading this input",
                        location=request.filename, hint="the file is corrupt or too large")
    compile_request = _compile_request(request, *where.imported)
    raise _crash_report(compile_request, pickle_request(compile_request), where.stage,
                        _how(kind, payload))


# Messages a server passes on while a compile runs; any other is the compile's last.
_RELAYED = ("progress", "imported")


class _Where:
    """What a compile in a worker has reported so far: the stage (and pass) it is in, and
    the imported module once it has one."""

    def __init__(self, progress=None, on_imported=None):
        self.progress, self.on_imported = progress, on_imported
        self.stage = self.step = None
        self.imported: tuple[dict, bytes] | None = None

    def on_message(self, message: tuple) -> None:
        if message[0] == "imported":
            self.imported = (message[1], message[2])
            self.stage = self.step = None  # the import is done; no stage has started
            if self.on_imported is not None:
                self.on_imported(message[1])
            return
        self.stage, self.step = message[1], message[2]
        if self.progress is not None:
            self.progress(self.stage, self.step)


def _raise_reported(kind: str, payload: list, filename: str | None = None) -> None:
    """Raise what the worker's child reported: a KilnError, Kiln's bug, the user's own
    exception, its end at the memory limit. Returns for a crash or a time-out."""
    if kind == "memory":
        raise _out_of_memory(payload[0], filename)
    if kind == "error":
        message, location, hint = payload[0]
        raise KilnError(message, location=location, hint=hint)
    if kind == "failure":
        raise WorkerFailure(payload[0])
    if kind == "raise":  # the user's own exception (their pass), as if raised here
        exc = pickle.loads(payload[0])
        exc.kiln_user_exception = True
        exc.add_note("(raised in Kiln's compile worker:)\n" + payload[1])
        raise exc


def _how(kind: str, payload: list) -> str:
    return f"crashed ({payload[0]})" if kind == "crashed" else \
        f"did not finish in {compile_timeout():.0f} s (KILN_COMPILE_TIMEOUT)"


def _compile_request(request, info_json: dict, imported: bytes) -> CompileRequest:
    """The CompileRequest of a whole-source compile whose import finished (to replay it)."""
    from .source_import import ExecutableInfo
    info = ExecutableInfo.from_json(info_json)
    return CompileRequest(imported, info.entry, info.filename, request.target, request.options,
                          info.arg_specs, None, info.convention, request.module_id,
                          request.custom_calls)


def _crash_report(request: CompileRequest, pickled: bytes, stage: str | None,
                  how: str) -> KilnError:
    """Compile once more, writing the IR before each pass of `stage`, and return the
    KilnError that names the stage, the pass and the reproducer."""
    what = f"compiling @{request.entry} {how}"
    hint = ("the compiler failed on this program; Kiln compiled it in a separate process, so "
            "yours is unaffected. Please report it with the reproducer")
    if stage is None or stage == "llvm":
        where = "in LLVM's code generation" if stage == "llvm" else "before the first stage"
        return KilnError(f"{what} {where}", location=request.filename, hint=hint)
    try:
        handle, path = _new_reproducer(request, stage)
    except (KilnError, OSError) as exc:
        reason = exc.one_line() if isinstance(exc, KilnError) else str(exc)
        return KilnError(f"{what} in stage '{stage}'", location=request.filename,
                         hint=hint + f" (no reproducer was written: {reason})")
    os.close(handle)
    finished = {"count": 0}

    def on_message(message):
        if message[0] == "progress" and message[1] == stage and message[2] is not None:
            finished["count"] += 1
    timeout = min(compile_timeout(), 600.0)
    envelope = ("reproduce", list(sys.path), pickled, timeout, (stage, path))
    try:
        kind, *_ = _exchange(envelope, on_message)
    except KilnError:
        kind = "unavailable"
    from ..targets import get_target
    stages = {s.name: s for s in get_target(request.target, **request.options).stages(request.entry)}
    steps = [str(s) for s in stages[stage].steps] if stage in stages else []
    if kind not in ("crashed", "timeout") or finished["count"] >= len(steps):
        return KilnError(f"{what} in stage '{stage}' (it did not fail again when replayed)",
                         location=request.filename, hint=hint + f": {path} (the stage's input)")
    step = steps[finished["count"]]
    _write_replay_header(Path(path), request, stage, step, how)
    return KilnError(f"{what} in stage '{stage}', pass '{step}'; reproducer: {path}",
                     location=request.filename,
                     hint=hint + f"; `{_replay_command(path, request.entry, step)}` replays it")


def _new_reproducer(request: CompileRequest, stage: str) -> tuple[int, str]:
    """A new, empty reproducer file: (descriptor, path). It goes to the dump directory the
    user chose, else to this user's private scratch directory ($TMPDIR/kiln-<uid>/
    reproducers, 0700, refused unless it is the user's own: never a shared directory another
    user could plant links in). Its name holds the entry's name only as safe characters."""
    from ..dumping import sanitize
    from . import private_files
    if request.options.get("dump_dir"):
        directory = Path(request.options["dump_dir"])
        directory.mkdir(parents=True, exist_ok=True)
    else:
        directory = private_files.user_scratch_directory("reproducers")
    handle, path = private_files.create_file(directory, f"{sanitize(request.entry)[:64]}.{stage}.",
                                             ".mlir")
    return handle, str(path)


def _replay_command(path, entry: str, step: str) -> str:
    """The kiln-opt command line that replays a reproducer, quoted for a shell: the entry's
    name is the program's, and may hold anything."""
    import shlex
    return (f"kiln-opt {shlex.quote(str(path))} --entry {shlex.quote(entry)} "
            f"--pass-pipeline {shlex.quote(step)}")


def _write_replay_header(path: Path, request: CompileRequest, stage: str, step: str,
                         how: str) -> None:
    from . import private_files
    try:
        ir_text = (private_files.read_regular_file(path, 1 << 30) or b"").decode(errors="replace")
    except OSError:
        ir_text = ""
    header = (f"// Kiln compile reproducer: the input to pass '{step}' of stage '{stage}', "
              f"which {how.split(' (')[0]}\n"
              f"// while compiling @{request.entry} of {request.filename}.\n"
              f"// Replay: {_replay_command(path, request.entry, step)}\n")
    try:
        private_files.overwrite(path, header + ir_text)
    except OSError:
        pass  # the error still names the file and the pass


# -- the server's side -------------------------------------------------------------------------

def _serve() -> None:
    import faulthandler
    faulthandler.disable()  # a child's crash is an expected, reported outcome
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    _warm_up()
    _freeze_heap()
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    waiting = _Waiting()
    while True:
        try:
            envelope = receive_message(requests)
        except EOFError:
            waiting.discard()
            return
        mode, path, blob, timeout, extra, _ = envelope
        if mode == "import" and b"sdy" in blob and _preload_jaxlib():
            waiting.discard()  # forked before jaxlib was loaded: a fresh one has it
        child = waiting.take()
        with os.fdopen(child.requests, "wb") as out:
            send_message(out, envelope)
        # A whole source's reader gets the read time-out until it has imported the module.
        first = extra if mode == "import" and extra is not None else timeout
        _relay(child, first, timeout, replies, answered=waiting.fork,
               memory=envelope[-1]["memory"])


class _Child:
    """A forked child, waiting for its request on the pipe `requests`, answering on `replies`."""

    def __init__(self, pid: int, requests: int, replies: int):
        self.pid, self.requests, self.replies = pid, requests, replies


class _Waiting:
    """The child forked ahead of the next request. It rehearses (see `_rehearse`) until the
    request comes, then finishes the stage it is in and takes it: a request waits for at
    most one stage of a rehearsal, and finds a child warmed by what it did run."""

    def __init__(self):
        self.child: _Child | None = None
        self.stopped: list[int] = []  # children killed and not reaped yet
        self.fork()

    def fork(self, rehearse: bool = True) -> None:
        self._reap()
        if self.child is not None:
            return
        request_read, request_write = os.pipe()
        reply_read, reply_write = os.pipe()
        server = os.getpid()
        pid = os.fork()
        if pid == 0:
            die_with_parent(server)  # no compile goes on once the server is gone
            os.close(request_write)
            os.close(reply_read)
            _wait_for_request(request_read, reply_write, rehearse)
            os._exit(0)
        os.close(request_read)
        os.close(reply_write)
        self.child = _Child(pid, request_write, reply_read)

    def take(self) -> _Child:
        """The child for the request that has come: the waiting one, else one forked now."""
        if self.child is None:
            self.fork(rehearse=False)
        child, self.child = self.child, None
        return child

    def discard(self) -> None:
        """End the waiting child."""
        if self.child is not None:
            os.kill(self.child.pid, signal.SIGKILL)
            os.close(self.child.requests)
            os.close(self.child.replies)
            os.waitpid(self.child.pid, 0)
            self.child = None

    def _reap(self) -> None:
        for pid in list(self.stopped):
            if os.waitpid(pid, os.WNOHANG)[0]:
                self.stopped.remove(pid)


# What a child writes on its reply pipe before it reads its request (rehearsed or not): the
# first byte `_relay` reads from any child.
_READY = b"R"


def _wait_for_request(request_read: int, reply_write: int, rehearse: bool) -> None:
    """A forked child: rehearse, wait for one request, run it, answer. It keeps no end of the
    server's own pipes: a server that dies while it waits must look dead to the caller at
    once."""
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    if rehearse:
        _rehearse(request_read)
    os.write(reply_write, _READY)
    with os.fdopen(request_read, "rb") as inp:
        try:
            mode, path, blob, _, extra, settings = receive_message(inp)
        except EOFError:  # the server ended, or discarded this child
            return
    _apply_settings(settings)
    _child(mode, path, blob, extra, os.fdopen(reply_write, "wb"), settings["memory"])


class _RequestCame(Exception):
    """Raised inside a rehearsal when a request (or the server's end) is waiting."""


def _rehearse(request_read: int) -> None:
    """Compile small programs before any request comes (driver/rehearsal.py says why). What
    becomes of a rehearsal is of no consequence to the request; it stops at its next stage
    once something is on the request pipe (the request, or the server's end)."""
    import select
    from . import rehearsal
    from .source_import import ImportRequest, import_and_compile

    def tell(message) -> None:
        if message[0] == "progress" and select.select([request_read], [], [], 0)[0]:
            raise _RequestCame
    idle = _idle_priority()
    try:
        for source, name in ((rehearsal.MLIR_TEXT, "<rehearsal>"),
                             (rehearsal.JAX_EXPORT, "<rehearsal export>")):
            import_and_compile(ImportRequest(source, name, None, "cpu", {}), _context, tell)
    except Exception:  # noqa: BLE001 - the request came, or the rehearsal failed: either way on
        pass
    finally:
        if idle:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def _idle_priority() -> bool:
    """Run the rehearsal only on otherwise idle cores (SCHED_IDLE), so it never takes CPU
    from the user's program running just after a compile, where this process may come back
    to normal priority afterwards: Linux lets it leave SCHED_IDLE only with CAP_SYS_NICE or
    an RLIMIT_NICE that allows nice 0. Elsewhere the rehearsal runs at normal priority."""
    import resource
    try:
        allowed = os.geteuid() == 0 or resource.getrlimit(resource.RLIMIT_NICE)[0] >= 20
        if allowed:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        return allowed
    except (AttributeError, OSError):
        return False


def _warm_up() -> None:
    """Import and initialise, once in the server, what every compile uses: each forked child
    starts with it done (Python imports, the MLIR context, pass registration, BLAS discovery,
    CPU detection)."""
    from torch_mlir.execution_engine import ExecutionEngine  # noqa: F401
    from ..context import make_context
    # What reads every kind of source (frontend/__init__.py imports some only when used).
    from ..dialects import check  # noqa: F401
    from ..frontend import chlo, hlo, jax_export, mhlo, newer  # noqa: F401
    from ..lowering import codegen
    from ..targets import get_target
    from ..targets.objects import host_cpu
    from . import compiler, source_import  # noqa: F401
    from .artifact import kiln_build
    host_cpu(), kiln_build(), codegen.jit_symbols()
    for target in ("cpu",):
        get_target(target).stages("main")
    global _context
    _context = make_context()  # every child compiles in its own copy of this one
    # Single-threaded: the server never has a thread pool to fork.
    _context.enable_multithreading(False)
    # Every compile in a child runs the same stages in this context: a child's rehearsal
    # builds and initializes their pass managers, and its request reuses them.
    from ..pipeline import reuse_pass_managers
    reuse_pass_managers(_context)


_context = None
_jaxlib_loaded = False


def _preload_jaxlib() -> bool:
    """Load jaxlib's deserializer here, once, for sources with Shardy attributes (see
    untrusted._preload_jaxlib); True when it was not loaded before."""
    global _jaxlib_loaded
    if _jaxlib_loaded:
        return False
    from ..frontend.untrusted import _preload_jaxlib as preload
    preload()
    _jaxlib_loaded = True
    try:
        # jax's first MLIR context in a process costs about 15 ms more than later ones
        # (registrations done once): paid here, not by every child that reads such a source.
        from jax._src.interpreters import mlir as jax_mlir
        with jax_mlir.make_ir_context():
            pass
    except Exception:  # noqa: BLE001 - no jax, or a broken one: the child reports it
        pass
    _freeze_heap()
    return True


def _freeze_heap() -> None:
    """Move every object the server holds into the garbage collector's permanent
    generation: a child's collections then never visit them, so they neither cost the
    child time nor write to (and so copy) the pages it shares with the server."""
    import gc
    gc.collect()
    gc.freeze()


def _child(mode: str, path: list[str], blob: bytes, extra, out, memory: int | None = None
           ) -> None:
    def tell(message) -> None:
        send_message(out, message)
    try:
        sys.path[:] = path  # the caller's: its Python passes (extra_passes) import from there
        request = pickle.loads(blob)
        from ..runtime.custom_call import REGISTRY
        from .compiler import compile_artifact
        REGISTRY.install_placeholders(request.custom_calls)
        if mode == "reproduce":
            _reproduce(request, extra, tell)
            tell(("done",))
            return
        if mode == "import":
            from .source_import import import_and_compile
            import_and_compile(request, _context, tell)
            return
        artifact = compile_artifact(request, lambda stage, step: tell(("progress", stage, step)),
                                    context=_context)
        tell(("ok", artifact.to_bytes()))
    except KilnError as exc:
        tell(("error", (exc.message, exc.location, exc.hint)))
    except MemoryError:
        tell(("memory", memory or 0))
    except BaseException as exc:  # noqa: BLE001 - reported to the caller
        from ..errors import _kiln_code_raised
        text = "".join(traceback.format_exception(exc))[-4000:]
        if isinstance(exc, Exception) and not _kiln_code_raised(exc):
            try:  # the user's own exception (their pass raised it): theirs to catch
                tell(("raise", pickle.dumps(exc), text))
                return
            except Exception:  # noqa: BLE001 - not picklable: reported as text
                pass
        tell(("failure", text))
    finally:
        out.close()


def _reproduce(request: CompileRequest, extra, tell) -> None:
    """Compile with the IR written to `path` before each pass of `stage` (overwritten each
    time), telling the caller after each pass: when this child dies, the caller knows the
    pass, and the file holds its input."""
    from . import private_files
    from .compiler import compile_artifact
    stage, path = extra

    def write(module) -> None:
        text = module.operation.get_asm(enable_debug_info=True, print_generic_op_form=True)
        private_files.overwrite(path, text)  # never through a link planted in its place

    # The stage's input is written when the stage starts; each later write is the input of
    # the pass after the one just finished.
    hooks = {"stage_start": lambda name, module: write(module) if name == stage else None,
             "after_pass": lambda name, step, module: (write(module), tell(("progress", name, step)))
             if name == stage else None}
    compile_artifact(request, progress=None, reproduce=hooks, context=_context)


def _relay(child: _Child, first_timeout: float, timeout: float, replies, answered,
           memory: int | None = None) -> None:
    """Pass the child's messages on as they come; report its death or time-out. The child's
    answer goes on the moment it arrives, and `answered()` (forking the next child) runs
    then, while this one exits. The time limit is `first_timeout` until the child reports
    an imported module, then `timeout` from there."""
    pending = bytearray()
    final = []
    deadline = [time.monotonic() + first_timeout]
    ready = [False]

    def on_data(chunk: bytes) -> None:
        pending.extend(chunk)
        if not ready[0] and pending:  # the child's ready byte comes before its messages
            if pending[:1] != _READY:
                raise RuntimeError("a compile worker's child answered out of turn")
            del pending[:1]
            ready[0] = True
        while len(pending) >= 8:
            size = int.from_bytes(pending[:8], "little")
            if len(pending) < 8 + size:
                break
            message = pickle.loads(bytes(pending[8:8 + size]))
            del pending[:8 + size]
            if message[0] in _RELAYED:
                if message[0] == "imported":
                    deadline[0] = time.monotonic() + timeout
                send_message(replies, message)
            else:
                final.append(message)
                if message[0] != "done":  # an answer, whatever becomes of the child now
                    send_message(replies, message)
                    answered()

    usage = []
    fate = wait_for_child(child.replies, child.pid, lambda: deadline[0], on_data, usage=usage,
                          watch_parent=True)
    if fate == "orphaned":  # the caller is gone: so is its compile, and this server ends
        os._exit(0)
    if final and final[-1][0] != "done":
        return
    if fate == "timeout":
        send_message(replies, ("timeout",))
    elif memory and died_of_memory(fate, usage, memory):
        send_message(replies, ("memory", memory))
    elif not final or not fate.startswith("exit status"):
        send_message(replies, ("crashed", fate))
    else:
        send_message(replies, ("done",))
    answered()


if __name__ == "__main__":
    _serve()
