"""One exception type for everything Kiln reports to a user.

Every failure a user can cause (bad input, unsupported op, wrong argument) becomes a
KilnError carrying where it happened and how to fix it, so the CLI can print one line and
the API can be caught with one except clause.
"""
from __future__ import annotations


class KilnError(Exception):
    """A user-facing error: `message`, an optional `location` ("file:line:col", "argument 2",
    an op name...) and an optional `hint` saying what to do about it."""

    def __init__(self, message: str, *, location: str | None = None, hint: str | None = None):
        self.message = message
        self.location = location
        self.hint = hint
        super().__init__(self.one_line())

    def one_line(self) -> str:
        """The error as one line: location, message and hint (what the CLI prints)."""
        text = f"{self.location}: {self.message}" if self.location else self.message
        if self.hint:
            text += f" ({self.hint})"
        return text


class CheckFailure(KilnError):
    """A conformance check (`check.expect_*`) that did not hold."""


class CustomCallError(KilnError):
    """A custom-call target reported failure or raised."""


class InternalError(KilnError):
    """A bug in Kiln, not in the input: reported as one line, with what is needed to file it
    saved in the directory `report`."""
    report = None


def internal_error(exc: BaseException, inputs=()) -> InternalError:
    """Turn an unexpected exception into an InternalError, saving the input (a path, text or
    bytes) and the traceback in a fresh directory whose path the message gives."""
    import shutil
    import tempfile
    import traceback
    from pathlib import Path
    report = Path(tempfile.mkdtemp(prefix="kiln-internal-error-"))
    (report / "traceback.txt").write_text("".join(traceback.format_exception(exc)))
    for i, source in enumerate(x for x in inputs if x is not None):
        try:
            if isinstance(source, (str, Path)) and len(str(source)) < 4096 and Path(source).is_file():
                shutil.copy(source, report / Path(source).name)
            elif isinstance(source, (bytes, bytearray)):
                (report / f"input{i}.bin").write_bytes(bytes(source))
            elif isinstance(source, str):
                (report / f"input{i}.txt").write_text(source)
        except OSError:
            pass  # the report is best effort; the error itself must still reach the user
    error = InternalError(f"internal error: {type(exc).__name__}: {exc}",
                          hint=f"this is a bug in Kiln; please report it with the files in {report}")
    error.report = report
    return error


def _kiln_code_raised(exc: BaseException) -> bool:
    """Whether the innermost frame that is not a library's (numpy, MLIR's bindings...) is
    Kiln's own: then the exception is Kiln's bug. A user's code (a custom-call target, a
    scripted pass) raising keeps its exception."""
    import os
    import sysconfig
    from pathlib import Path
    import importlib
    # The packages' own directories (an editable install's package __path__ may also hold
    # the checkout's root, so it is not used).
    if getattr(exc, "kiln_user_exception", False):
        return False  # a user's exception, passed on from a compile worker (driver/worker.py)
    kiln_dirs = {str(Path(__file__).resolve().parent)} | {
        str(Path(importlib.import_module(m).__file__).resolve().parent)
        for m in ("kiln.lowering", "kiln.dialects")}
    libraries = {sysconfig.get_paths()[k] for k in ("purelib", "platlib", "stdlib")}
    verdict = False
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        filename = os.path.realpath(name)
        if name.startswith("<"):
            verdict = name.startswith("<frozen")  # <stdin>, <string>: the user's code
        elif any(filename.startswith(d + os.sep) for d in kiln_dirs):
            verdict = True
        elif not any(filename.startswith(d + os.sep) for d in libraries):
            verdict = False  # the user's code
        tb = tb.tb_next
    return verdict


def api_boundary(function):
    """Let only KilnError (CheckFailure...) out of a public entry point: any other exception
    raised by Kiln's own code becomes an InternalError saying where the report files are. A
    user's exception (from their custom-call target or pass) and KeyboardInterrupt pass."""
    import functools

    @functools.wraps(function)
    def guarded(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except KilnError:
            raise
        except Exception as exc:  # noqa: BLE001 - the one place that reports Kiln's own bugs
            if not _kiln_code_raised(exc):
                raise
            sources = [a for a in args if isinstance(a, (str, bytes, bytearray))]
            raise internal_error(exc, sources) from exc

    return guarded
