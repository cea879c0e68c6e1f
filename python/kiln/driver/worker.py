"""Compiles run in worker processes, where a crash in MLIR's or LLVM's C++ cannot take the
caller (a script, a Jupyter kernel) down.

A worker server (`python -m kiln.driver.worker`) is a fresh, single-threaded Python that
imported Kiln once; it forks a child per compile, so every compile starts from the same clean
state and a crash kills only that child. The child runs the stages up to LLVM and emits object
code (an `Artifact`), which the caller links in (targets/objects.py). Servers are pooled, one
per compile in flight, so threads can compile several programs at once.

The child reports each stage as it starts; the caller uses that for progress on a terminal
and, when the child dies (a signal) or runs past the time limit (KILN_COMPILE_TIMEOUT, in
seconds), to name the stage. It then compiles once more in a child that writes the IR before
every pass of that stage to a reproducer file, which names the pass and holds its input.
"""
from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path

from ..errors import KilnError
from ..frontend.untrusted import receive_message, send_message, wait_for_child
from .artifact import Artifact
from .compiler import CompileRequest

_DEFAULT_TIMEOUT_S = 1800.0


def compile_timeout() -> float:
    try:
        return float(os.environ.get("KILN_COMPILE_TIMEOUT", _DEFAULT_TIMEOUT_S))
    except ValueError:
        raise KilnError(f"KILN_COMPILE_TIMEOUT={os.environ['KILN_COMPILE_TIMEOUT']!r} is not a "
                        "number of seconds") from None


class WorkerFailure(Exception):
    """A Python exception in the worker that is not a KilnError: a bug in Kiln, reported with
    the worker's traceback."""


# -- the caller's side ---------------------------------------------------------------------------

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
        try:
            self.process.kill()
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
            send_message(server.process.stdin, envelope)
            while True:
                message = receive_message(server.process.stdout)
                if message[0] != "progress":
                    _release(server)
                    return message
                on_message(*message[1:])
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
    where = {"stage": None, "pass": None}

    def on_message(stage, step):
        where["stage"], where["pass"] = stage, step
        if progress is not None:
            progress(stage, step)
    envelope = ("compile", list(sys.path), pickled, compile_timeout(), None)
    kind, *payload = _exchange(envelope, on_message)
    if kind == "ok":
        return Artifact.from_bytes(payload[0], "the compile worker's result")
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
    # "crashed" (a signal) or "timeout": find the pass, write the reproducer.
    how = f"crashed ({payload[0]})" if kind == "crashed" else \
        f"did not finish in {compile_timeout():.0f} s (KILN_COMPILE_TIMEOUT)"
    raise _crash_report(request, pickled, where["stage"], how)


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
    directory = Path(request.options.get("dump_dir") or
                     Path(tempfile.gettempdir()) / "kiln-reproducers")
    directory.mkdir(parents=True, exist_ok=True)
    handle, path = tempfile.mkstemp(prefix=f"{request.entry}.{stage}.", suffix=".mlir",
                                    dir=directory)
    os.close(handle)
    finished = {"count": 0}

    def on_message(stage_name, step):
        if stage_name == stage and step is not None:
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
                     hint=hint + f"; `kiln-opt {path} --entry {request.entry} "
                               f"--pass-pipeline '{step}'` replays it")


def _write_replay_header(path: Path, request: CompileRequest, stage: str, step: str,
                         how: str) -> None:
    ir_text = path.read_text(errors="replace")
    header = (f"// Kiln compile reproducer: the input to pass '{step}' of stage '{stage}', "
              f"which {how.split(' (')[0]}\n"
              f"// while compiling @{request.entry} of {request.filename}.\n"
              f"// Replay: kiln-opt {path} --entry {request.entry} --pass-pipeline '{step}'\n")
    path.write_text(header + ir_text)


# -- the server's side -------------------------------------------------------------------------

def _serve() -> None:
    import faulthandler
    faulthandler.disable()  # a child's crash is an expected, reported outcome
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    _warm_up()
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            mode, path, blob, timeout, extra = receive_message(requests)
        except EOFError:
            return
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            _child(mode, path, blob, extra, os.fdopen(write_end, "wb"))
            os._exit(0)
        os.close(write_end)
        _relay(read_end, pid, timeout, replies)


def _warm_up() -> None:
    """Import and initialise, once in the server, what every compile uses: each forked child
    starts with it done (Python imports, pass registration, BLAS discovery, CPU detection)."""
    from torch_mlir.execution_engine import ExecutionEngine  # noqa: F401
    from ..context import make_context
    from ..lowering import codegen
    from ..targets import get_target
    from ..targets.objects import host_cpu
    from . import compiler  # noqa: F401
    from .artifact import kiln_build
    host_cpu(), kiln_build(), codegen.jit_symbols()
    for target in ("cpu",):
        get_target(target).stages("main")
    global _context
    _context = make_context()  # every child compiles in its own copy of this one


_context = None


def _child(mode: str, path: list[str], blob: bytes, extra, out) -> None:
    def tell(message) -> None:
        send_message(out, message)
    try:
        sys.path[:] = path  # the caller's: its Python passes (extra_passes) import from there
        request: CompileRequest = pickle.loads(blob)
        from ..runtime.custom_call import REGISTRY
        from .compiler import compile_artifact
        REGISTRY.install_placeholders(request.custom_calls)
        if mode == "reproduce":
            _reproduce(request, extra, tell)
            tell(("done",))
            return
        artifact = compile_artifact(request, lambda stage, step: tell(("progress", stage, step)),
                                    context=_context)
        tell(("ok", artifact.to_bytes()))
    except KilnError as exc:
        tell(("error", (exc.message, exc.location, exc.hint)))
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
    from .compiler import compile_artifact
    stage, path = extra

    def write(module) -> None:
        text = module.operation.get_asm(enable_debug_info=True, print_generic_op_form=True)
        Path(path).write_text(text)

    # The stage's input is written when the stage starts; each later write is the input of
    # the pass after the one just finished.
    hooks = {"stage_start": lambda name, module: write(module) if name == stage else None,
             "after_pass": lambda name, step, module: (write(module), tell(("progress", name, step)))
             if name == stage else None}
    compile_artifact(request, progress=None, reproduce=hooks, context=_context)


def _relay(read_end: int, pid: int, timeout: float, replies) -> None:
    """Pass the child's messages on as they come; report its death or time-out."""
    pending = bytearray()
    final = []

    def on_data(chunk: bytes) -> None:
        pending.extend(chunk)
        while len(pending) >= 8:
            size = int.from_bytes(pending[:8], "little")
            if len(pending) < 8 + size:
                break
            message = pickle.loads(bytes(pending[8:8 + size]))
            del pending[:8 + size]
            if message[0] == "progress":
                send_message(replies, message)
            else:
                final.append(message)

    fate = wait_for_child(read_end, pid, timeout, on_data)
    if fate == "timeout":
        send_message(replies, ("timeout",))
    elif final and final[-1][0] != "done":
        send_message(replies, final[-1])
    elif not final or not fate.startswith("exit status"):
        send_message(replies, ("crashed", fate))
    else:
        send_message(replies, ("done",))


if __name__ == "__main__":
    _serve()
