"""Where Kiln's CMake-built native runtime library and header live.

A wheel install puts them inside the package; an editable install leaves the Python sources
in the checkout and the built files in site-packages, so every `kiln` directory on the import
path is searched.
"""
from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

from . import environment
from .errors import KilnError


def _package_dirs() -> list[Path]:
    dirs = [Path(__file__).parent]
    dirs += [Path(p) / "kiln" for p in sys.path if p and (Path(p) / "kiln").is_dir()]
    return list(dict.fromkeys(d.resolve() for d in dirs))


# A runtime library built another way (tests/sanitizers/run.sh: AddressSanitizer and UBSan)
# used instead of the installed one; the sanitizer job sets it, nothing else should.
RUNTIME_LIBRARY_ENV = "KILN_RUNTIME_LIBRARY"


@lru_cache(maxsize=None)
def runtime_library() -> Path:
    chosen = environment.get(RUNTIME_LIBRARY_ENV)
    if chosen:
        path = Path(chosen)
        if not path.is_file():
            raise KilnError(f"{RUNTIME_LIBRARY_ENV}={chosen} is not a file",
                            hint=f"unset {RUNTIME_LIBRARY_ENV} to use the installed runtime")
        return path.resolve()
    for d in _package_dirs():
        found = sorted((d / "_native").glob("libkiln_runtime*.so"))
        if found:
            return found[0]
    raise KilnError("Kiln's native runtime library (libkiln_runtime.so) is not built",
                    hint="install Kiln with pip (it builds the library with CMake)")


def runtime_libraries() -> list[Path]:
    """Shared libraries the JIT links against."""
    return [runtime_library()]


def include_dir() -> Path:
    for d in _package_dirs():
        if (d / "include" / "kiln" / "custom_call.h").is_file():
            return d / "include"
    raise KilnError("kiln/custom_call.h is not installed", hint="install Kiln with pip")
