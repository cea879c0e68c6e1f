"""Character scanner for HLO module text.

HLO text mixes several small languages (shapes, layouts, literals, attribute values such as
`window={size=3x3 pad=1_1x1_1}` or JSON backend configs), so instead of one token stream the
scanner offers the primitives the parser needs: identifiers, integers, quoted strings and
*raw balanced values* (text up to the next top-level `,`), each reporting errors at a
file:line:col location.  Both `/* ... */` and `// ...` comments are trivia; the latter lets
lit RUN lines live inside .hlo test files.
"""
from __future__ import annotations

import bisect

from kiln.errors import KilnError

_NAME_START = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_%")
_NAME_CHARS = _NAME_START | set("0123456789.-")
_OPEN = {"{": "}", "[": "]", "(": ")"}
_CLOSE = set("}])")


class Scanner:
    def __init__(self, text: str, filename: str = "<hlo>"):
        self.text = text
        self.filename = filename
        self.pos = 0
        self._line_starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]

    # -- locations and errors
    def line_col(self, pos: int | None = None) -> tuple[int, int]:
        pos = self.pos if pos is None else pos
        line = bisect.bisect_right(self._line_starts, pos) - 1
        return line + 1, pos - self._line_starts[line] + 1

    def where(self, pos: int | None = None) -> str:
        line, col = self.line_col(pos)
        return f"{self.filename}:{line}:{col}"

    def error(self, message: str, pos: int | None = None, hint: str | None = None):
        raise KilnError(message, location=self.where(pos), hint=hint)

    def describe_here(self) -> str:
        if self.pos >= len(self.text):
            return "end of input"
        return "'" + self.text[self.pos:self.pos + 16].split("\n")[0] + "'"

    # -- trivia
    def skip(self, newlines: bool = True):
        """Skip whitespace and comments.  With newlines=False stop at a line break (used to
        find the end of the module header line)."""
        t, n = self.text, len(self.text)
        while self.pos < n:
            c = t[self.pos]
            if c in " \t\r" or (newlines and c == "\n"):
                self.pos += 1
            elif t.startswith("/*", self.pos):
                end = t.find("*/", self.pos + 2)
                if end < 0:
                    self.error("unterminated /* comment")
                self.pos = end + 2
            elif t.startswith("//", self.pos):
                end = t.find("\n", self.pos)
                self.pos = n if end < 0 else end
            else:
                break

    def at_end(self) -> bool:
        self.skip()
        return self.pos >= len(self.text)

    def peek(self, s: str) -> bool:
        self.skip()
        return self.text.startswith(s, self.pos)

    def accept(self, s: str) -> bool:
        if self.peek(s):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str, what: str):
        if not self.accept(s):
            self.error(f"expected '{s}' {what}, got {self.describe_here()}")

    # -- tokens
    def peek_name(self) -> str | None:
        self.skip()
        start = self.pos
        if start < len(self.text) and self.text[start] in _NAME_START:
            end = start + 1
            while end < len(self.text) and self.text[end] in _NAME_CHARS:
                end += 1
            return self.text[start:end]
        return None

    def name(self, what: str) -> str:
        n = self.peek_name()
        if n is None:
            self.error(f"expected {what}, got {self.describe_here()}")
        self.pos += len(n)
        return n.lstrip("%")

    def integer(self, what: str) -> int:
        self.skip()
        start = self.pos
        if self.pos < len(self.text) and self.text[self.pos] in "+-":
            self.pos += 1
        while self.pos < len(self.text) and self.text[self.pos].isdigit():
            self.pos += 1
        try:
            return int(self.text[start:self.pos])
        except ValueError:
            self.pos = start
            self.error(f"expected an integer ({what}), got {self.describe_here()}")

    def string(self) -> str:
        """A double-quoted string with C escapes; returns the unescaped contents."""
        self.skip()
        start = self.pos
        if not self.text.startswith('"', start):
            self.error(f"expected a quoted string, got {self.describe_here()}")
        end = self._string_end(start)
        raw = self.text[start + 1:end - 1]
        self.pos = end
        return unescape(raw)

    def _string_end(self, start: int) -> int:
        i = start + 1
        while i < len(self.text):
            c = self.text[i]
            if c == "\\":
                i += 2
                continue
            if c == '"':
                return i + 1
            if c == "\n":
                break
            i += 1
        self.error("unterminated string literal", start)

    def balanced(self, stop: str = ",", stop_at_newline: bool = True) -> tuple[str, int]:
        """Raw text of one attribute value: everything up to a top-level `stop` character,
        an unmatched closing bracket, or (at depth 0) a line break.  Returns (text, start)."""
        self.skip()
        start = self.pos
        stack = []
        t = self.text
        while self.pos < len(t):
            c = t[self.pos]
            if c == '"':
                self.pos = self._string_end(self.pos)
                continue
            if not stack and (c in stop or (stop_at_newline and c == "\n")
                              or t.startswith("/*", self.pos) or t.startswith("//", self.pos)):
                break
            if c in _OPEN:
                stack.append(_OPEN[c])
            elif c in _CLOSE:
                if not stack:
                    break
                if c != stack[-1]:
                    self.error(f"mismatched '{c}', expected '{stack[-1]}'")
                stack.pop()
            self.pos += 1
        if stack:
            self.error(f"unterminated value, expected '{stack[-1]}'", start)
        return t[start:self.pos].strip(), start

    def skip_line(self):
        end = self.text.find("\n", self.pos)
        self.pos = len(self.text) if end < 0 else end + 1


def unescape(raw: str) -> str:
    out, i = [], 0
    simple = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "'": "'", "0": "\0"}
    while i < len(raw):
        c = raw[i]
        if c == "\\" and i + 1 < len(raw):
            n = raw[i + 1]
            if n in simple:
                out.append(simple[n])
                i += 2
                continue
            if n == "x" and i + 3 < len(raw) + 1:
                try:
                    out.append(chr(int(raw[i + 2:i + 4], 16)))
                    i += 4
                    continue
                except ValueError:
                    pass
        out.append(c)
        i += 1
    return "".join(out)
