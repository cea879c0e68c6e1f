"""Fast, crash-proof execution of many fuzz cases: long-lived worker processes, restarted on
a crash.

Starting a process and importing Kiln costs about 1.5 s; compiling and running a small
program about 50 ms. So each worker (a child process, in its own session, with a memory cap,
killed when the parent dies) imports Kiln once and runs case after case in process. The
parent sends it one case at a time and waits with a time limit:

    a reply          the case's outcome (the worker classifies results and exceptions)
    end of file      the worker died: the case is a `signal` (the worker's exit status says
                     which), and a fresh worker takes the next case
    no reply in time a `hang`: the worker's process group is killed and replaced

A crash can in principle come from memory a previous case corrupted, so every signal and
hang is run again alone in a fresh worker (`reproduced` says whether it happened again).
Workers are also replaced every `recycle` cases, so a slow leak cannot pile up.
"""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from kiln.frontend.untrusted import receive_message, send_message

MEMORY_LIMIT = 4 << 30  # address space per worker: a runaway allocation fails, not the machine


# -- the worker side -------------------------------------------------------------------------
def worker_environment(scratch: str) -> dict:
    env = dict(os.environ)
    env.update({
        # The worker is the isolation: compile in it, so a compiler crash shows as its signal
        # (in a compile worker it would be a KilnError naming the signal).
        "KILN_COMPILE_IN_PROCESS": "1",
        "KILN_CACHE": "0",
        "KILN_READ_TIMEOUT": "20",  # Kiln's reader process gives up before the parent does
        "TMPDIR": scratch,          # internal-error reports and reproducers stay in the campaign's
        "PYTHONFAULTHANDLER": "",
    })
    return env


def _limiter(memory: int):
    return lambda: _limit_worker(memory)


def _limit_worker(memory: int) -> None:
    """preexec_fn: cap memory, no core files, die with the parent."""
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def serve(handler, warm_up=None, run_time_limit: float | None = None) -> None:
    """The worker's loop: read a case, answer `handler(case)`. Called in the worker process;
    the protocol uses private copies of stdin/stdout, and fds 0/1 go to /dev/null so nothing
    Kiln or MLIR prints can corrupt it. fd 2 is a file the parent reads after a crash.

    `run_time_limit`: KILN_RUN_TIMEOUT for the calls, in seconds (a third of the case's time
    limit, say). A valid program may loop forever on its inputs (a mutant whose counter never
    reaches its bound): Kiln's limit stops that call with a KilnError; a case that still runs
    past the worker's own time limit is a hang of Kiln's."""
    if run_time_limit:
        os.environ["KILN_RUN_TIMEOUT"] = str(run_time_limit)
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    import faulthandler
    faulthandler.disable()  # the parent reports the signal; a dump would only fill the log
    if warm_up is not None:
        warm_up()
    send_message(replies, "ready")
    while True:
        try:
            case = receive_message(requests)
        except EOFError:
            return
        os.ftruncate(2, 0)  # the log holds what the current case printed, nothing older
        os.lseek(2, 0, os.SEEK_SET)
        send_message(replies, handler(case))


def internal_error_detail(exc) -> str:
    """An InternalError's message plus where Kiln raised it (the last frame of the saved
    traceback): the report directory is in the campaign's scratch space, which goes away."""
    text = exc.one_line()
    try:
        lines = (Path(exc.report) / "traceback.txt").read_text().splitlines()
        frames = [l.strip() for l in lines if l.strip().startswith("File ")]
        if frames:
            text += " [at " + frames[-1] + "]"
    except (OSError, TypeError):
        pass
    return text


# -- the parent side -------------------------------------------------------------------------
@dataclass
class Result:
    key: object
    reply: object             # the handler's answer, or None after a signal or a hang
    kind: str = "reply"       # "reply", "signal" or "hang"
    detail: str = ""
    reproduced: bool | None = None
    seconds: float = 0.0


class _Worker:
    def __init__(self, argv: list[str], env: dict, log: Path, start_timeout: float, memory: int):
        self.log = open(log, "w+b")
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.log, env=env, start_new_session=True,
                                        preexec_fn=_limiter(memory))
        ready = self._wait(start_timeout)
        if ready != "ready":
            self.kill()
            raise RuntimeError(f"fuzz worker did not start: {ready!r}; log:\n{self.log_tail()}")

    def _wait(self, timeout: float):
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not ready:
            return TimeoutError
        try:
            return receive_message(self.process.stdout)
        except EOFError:
            return EOFError

    def ask(self, case, timeout: float):
        try:
            send_message(self.process.stdin, case)
        except BrokenPipeError:  # it died between cases (its parent-death signal, a leak)
            return EOFError
        return self._wait(timeout)

    def log_tail(self, size: int = 1500) -> str:
        self.log.flush()
        self.log.seek(0)
        text = self.log.read().decode(errors="replace")
        lines = [l for l in text.splitlines() if l.strip()]
        return "\n".join(lines)[-size:]

    def exit_detail(self) -> str:
        code = self.process.wait()
        if code < 0:
            try:
                return signal.Signals(-code).name
            except ValueError:
                return f"signal {-code}"
        return f"exit code {code}"

    def kill(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # the worker and anything it forked
        except ProcessLookupError:
            pass
        self.process.wait()
        self.close()

    def close(self) -> None:
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self.log.close()


class Pool:
    """Runs cases on `jobs` workers started with `argv`; `run(cases)` yields a Result per case
    (in completion order)."""

    def __init__(self, argv: list[str], jobs: int = 1, timeout: float = 30.0,
                 start_timeout: float = 180.0, recycle: int = 400, confirm: bool = True,
                 memory: int = MEMORY_LIMIT, deadline: float | None = None):
        self.memory, self.deadline = memory, deadline
        self.argv, self.jobs, self.timeout = argv, max(1, jobs), timeout
        self.start_timeout, self.recycle, self.confirm = start_timeout, recycle, confirm
        self.scratch = tempfile.mkdtemp(prefix="kiln-fuzz-")
        self.env = worker_environment(self.scratch)
        self.restarts = 0

    def run(self, cases):
        """cases: iterable of (key, case). Yields Results as they finish."""
        import queue
        todo = iter(cases)
        lock = threading.Lock()
        done: queue.Queue = queue.Queue()

        def next_case():
            if self.deadline is not None and time.time() >= self.deadline:
                return None  # out of time: finish what runs, report what ran
            with lock:
                return next(todo, None)

        def slot(number: int):
            worker, served = None, 0
            try:
                while (item := next_case()) is not None:
                    key, case = item
                    if worker is None or served >= self.recycle:
                        if worker is not None:
                            worker.kill()
                        worker, served = self._start(number), 0
                    result, worker = self._one(worker, number, key, case)
                    served += 1
                    if result.kind != "reply" and self.confirm:
                        result.reproduced = self._again(number, case)
                    done.put(result)
            except BaseException as exc:  # noqa: BLE001 - reported by the consumer
                done.put(exc)
            finally:
                if worker is not None:
                    worker.kill()
                done.put(None)

        threads = [threading.Thread(target=slot, args=(i,), daemon=True) for i in range(self.jobs)]
        for t in threads:
            t.start()
        running = len(threads)
        while running:
            item = done.get()
            if item is None:
                running -= 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield item

    def _start(self, number: int) -> _Worker:
        self.restarts += 1
        return _Worker(self.argv, self.env, Path(self.scratch) / f"worker{number}.log",
                       self.start_timeout, self.memory)

    def _one(self, worker: _Worker, number: int, key, case):
        start = time.monotonic()
        reply = worker.ask(case, self.timeout)
        seconds = time.monotonic() - start
        if reply is TimeoutError:
            tail = worker.log_tail()
            worker.kill()
            return Result(key, None, "hang", f"no answer in {self.timeout:.0f} s"
                          + (f"; log: {tail[-300:]}" if tail else ""), seconds=seconds), None
        if reply is EOFError:
            exit_detail = worker.exit_detail()
            tail = worker.log_tail()
            worker.close()
            return Result(key, None, "signal", exit_detail + (f"; log: {tail}" if tail else ""),
                          seconds=seconds), None
        return Result(key, reply, seconds=seconds), worker

    def _again(self, number: int, case) -> bool:
        """Run a failing case alone in a fresh worker: does it fail the same way?"""
        try:
            worker = self._start(number)
        except RuntimeError:
            return False
        result, worker = self._one(worker, number, None, case)
        if worker is not None:
            worker.kill()
        return result.kind != "reply"

    def cleanup(self) -> None:
        import shutil
        shutil.rmtree(self.scratch, ignore_errors=True)


def deadline(until: str | None) -> float | None:
    """--until HH:MM (UTC, today; tomorrow if already past) as a time.time() value."""
    if not until:
        return None
    import calendar
    hours, minutes = map(int, until.split(":"))
    now = time.gmtime()
    moment = calendar.timegm((now.tm_year, now.tm_mon, now.tm_mday, hours, minutes, 0, 0, 0, 0))
    return moment if moment > time.time() else moment + 86400


def stop_on_terminate() -> None:
    """A campaign stopped with SIGTERM (kill, a job's time limit) ends as if interrupted
    (KeyboardInterrupt): it stops asking and prints its counts so far."""
    import signal

    def interrupt(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, interrupt)


def until_interrupted(results, what: str):
    """The pool's results until it is done or the campaign is interrupted (Ctrl-C, SIGTERM:
    see stop_on_terminate): an interrupted campaign still reports what it finished."""
    try:
        yield from results
    except KeyboardInterrupt:
        print(f"interrupted: counting the {what} that finished", flush=True)


def script_argv(script: str, *extra: str) -> list[str]:
    return [sys.executable, script, *extra]


def _self_test_case(case):
    """The handler of `python workers.py --self-test-worker`: lets tests drive a worker into
    each outcome (a reply, a signal, a hang) without a Kiln bug to do it."""
    what, value = case
    if what == "signal":
        os.kill(os.getpid(), value)
    if what == "sleep":
        time.sleep(value)
    return ("echo", value)


if __name__ == "__main__" and sys.argv[1:] == ["--self-test-worker"]:
    serve(_self_test_case)
