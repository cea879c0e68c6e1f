"""What every Kiln console script shares: one-line errors, never a traceback (unless asked)."""
from __future__ import annotations

import argparse
import sys

from ..errors import KilnError


class ArgumentParser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.add_argument("--traceback", action="store_true",
                          help="on an internal error, print Python's traceback")

    def error(self, message: str):  # argparse prints usage plus a line; Kiln prints one line
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def guarded(prog: str, body, args: argparse.Namespace | None = None) -> int:
    """Run `body()`, turning Kiln's errors into one line on stderr and exit status 1. Any other
    exception is a bug in Kiln: one line saying so, with the input and traceback saved for the
    report (`--traceback` prints the traceback instead)."""
    from ..errors import InternalError, internal_error
    try:
        return body() or 0
    except InternalError as exc:  # raised at the API boundary: add the input to its report
        if args is not None and getattr(args, "traceback", False):
            raise
        _save_input(exc, args)
        print(f"{prog}: error: {exc.one_line()}", file=sys.stderr)
        return 70  # EX_SOFTWARE
    except KilnError as exc:
        print(f"{prog}: error: {exc.one_line()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - the one place that reports Kiln's own bugs
        if args is not None and getattr(args, "traceback", False):
            raise
        inputs = [getattr(args, "file", None)] if args is not None else []
        print(f"{prog}: error: {internal_error(exc, inputs).one_line()}", file=sys.stderr)
        return 70  # EX_SOFTWARE


def _save_input(error, args) -> None:
    import shutil
    from pathlib import Path
    path = getattr(args, "file", None)
    if error.report is not None and path and Path(path).is_file():
        try:
            shutil.copy(path, Path(error.report) / Path(path).name)
        except OSError:
            pass  # the report is best effort
