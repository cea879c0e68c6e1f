"""What every Kiln console script shares: one-line errors, never a traceback."""
from __future__ import annotations

import argparse
import sys

from ..errors import KilnError


class ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse prints usage plus a line; Kiln prints one line
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def guarded(prog: str, body) -> int:
    """Run `body()`, turning Kiln's errors into one line on stderr and exit status 1."""
    try:
        return body() or 0
    except KilnError as exc:
        print(f"{prog}: error: {exc.one_line()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
