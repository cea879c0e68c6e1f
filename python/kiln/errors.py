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
        text = f"{self.location}: {self.message}" if self.location else self.message
        if self.hint:
            text += f" ({self.hint})"
        return text


class CheckFailure(KilnError):
    """A conformance check (`check.expect_*`) that did not hold."""


class CustomCallError(KilnError):
    """A custom-call target reported failure or raised."""
