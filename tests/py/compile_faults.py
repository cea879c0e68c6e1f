"""Passes that break the compiler on purpose, for the compile-isolation tests. They live in an
importable module (not a test file's lambdas) so that a compile worker can run them."""
import ctypes
import time


def segfault(module):
    """Dereference a null pointer, as a C++ bug in a pass would."""
    ctypes.string_at(0)


def spin(module):
    """Never finish, as a pass caught in an infinite loop."""
    while True:
        time.sleep(0.05)


class PassFailed(Exception):
    pass


def raises(module):
    """A user's pass that fails with its own exception."""
    raise PassFailed("my pass gave up")
