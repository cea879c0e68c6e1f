"""The `jax_plugins` entry point: registers Kiln's PJRT plugin with JAX as platform "kiln".

Devices: one by default; KILN_DEVICES=N gives N (threads of this process sharing host
memory). The priority puts Kiln after JAX's own CPU backend unless JAX_PLATFORMS names it.
"""
from __future__ import annotations

from pathlib import Path

from .. import environment
from ..errors import KilnError
from ..native import _package_dirs

PLATFORM = "kiln"
PRIORITY = -100  # below XLA:CPU's (0): Kiln is the default backend only when JAX_PLATFORMS names it


def library_path() -> Path:
    chosen = environment.get("KILN_PJRT_LIBRARY")  # tests/sanitizers/run.sh's build
    if chosen:
        if not Path(chosen).is_file():
            raise KilnError(f"KILN_PJRT_LIBRARY={chosen} is not a file",
                            hint="unset KILN_PJRT_LIBRARY to use the installed plugin")
        return Path(chosen).resolve()
    for directory in _package_dirs():
        found = sorted((directory / "_native").glob("kiln_pjrt_plugin*.so"))
        if found:
            return found[0]
    raise KilnError("Kiln's PJRT plugin library (kiln_pjrt_plugin.so) is not built",
                    hint="install Kiln with pip (it builds the library with CMake)")


def device_count() -> int:
    text = environment.get("KILN_DEVICES")
    try:
        count = int(text)
    except ValueError:
        count = 0
    if not 1 <= count <= 1024:
        raise KilnError(f"KILN_DEVICES={text!r}: expected a device count from 1 to 1024")
    return count


def with_cpu_backend() -> None:
    """`JAX_PLATFORMS=kiln` starts JAX's CPU backend too, after Kiln (the default device
    stays Kiln's): JAX itself places values on the platform named "cpu" (the inputs of
    `jax.debug.print`, `pure_callback` and `io_callback`; the constants `lax.scan` evaluates
    eagerly) and fails without it, as it would under `JAX_PLATFORMS=cuda`. Called while
    JAX discovers its plugins, before it reads the setting; KILN_JAX_CPU=0 leaves it out."""
    import jax
    chosen = jax.config.jax_platforms
    if environment.get("KILN_JAX_CPU") != "0" and chosen and \
            [p.strip() for p in chosen.split(",")] == [PLATFORM]:
        jax.config.update("jax_platforms", f"{PLATFORM},cpu")


def initialize() -> None:
    """Called by jax when it discovers its plugins."""
    from jax._src import xla_bridge

    with_cpu_backend()
    xla_bridge.register_plugin(PLATFORM, priority=PRIORITY, library_path=str(library_path()),
                               options={"num_devices": device_count()})
    from .lowering import enable_donation, register_cpu_lowerings
    register_cpu_lowerings(PLATFORM)
    enable_donation(PLATFORM)
    from .jax_cache import admit
    admit(PLATFORM)  # JAX's persistent cache (executables serialize, signed: serialized.py)
    from .callbacks import install
    install()  # jax.debug.print, pure_callback, io_callback
