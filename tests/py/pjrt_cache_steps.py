"""The steps of test_pjrt_cache.py, each run as its own process under JAX_PLATFORMS=kiln
(JAX picks its platform and reads its cache configuration once per process).

    python pjrt_cache_steps.py first|second JAX_CACHE_DIR OTHER_KILN_CACHE_DIR

prints one JSON object: what the step saw. Every step counts the plugin's calls of
kiln.pjrt.bridge.compile (the C side looks the function up on each compile, so the count
includes every compile the plugin asked of Kiln) and reads bridge.counts (compiled by Kiln,
loaded from Kiln's compile cache, or deserialized).
"""
from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path

import numpy as np


def main(step: str, jax_cache: str, other_kiln_cache: str) -> dict:
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_compilation_cache_dir", jax_cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    # JAX writes the Python call stack into the program's locations, and Kiln's compile cache
    # keys on the program's bytes: keep only the innermost frame, the same for every call.
    jax.config.update("jax_traceback_in_locations_limit", 1)
    from kiln.pjrt import bridge

    compiles = []
    original = bridge.compile

    def counted(*args):
        compiles.append(1)
        return original(*args)
    bridge.compile = counted

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 2)

    def f(a, b):
        return jnp.sin(a) @ b + 1, a.sum()

    def run():
        return [np.asarray(v).tolist() for v in jax.jit(f)(x, y)]

    from jax._src.lib import xla_client
    # Part of JAX's cache key (cache_key.py hashes it): the plugin's topology fingerprint.
    seen = {"platform": jax.devices()[0].platform,
            "topology": xla_client.get_topology_for_devices(jax.devices()).fingerprint()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        seen["first"] = run()
    seen["first_warnings"] = [str(w.message) for w in caught]
    seen["compiles"], seen["counts"] = len(compiles), dict(bridge.counts)
    seen["entries"] = sorted(p.name for p in Path(jax_cache).iterdir())

    if step == "second":
        later_steps(seen, run, compiles, jax_cache, other_kiln_cache, x)
    return seen



def later_steps(seen: dict, run, compiles: list, jax_cache: str, other_kiln_cache: str,
                x) -> None:
    """What the second process does after loading from JAX's cache, each step recording what
    it saw: a changed entry, an entry signed with another cache directory's key, and Kiln's
    cache turned off."""
    import jax
    from jax._src import compilation_cache as cc
    from kiln.pjrt import bridge

    def delta(before_compiles, before_counts):
        return {"compiles": len(compiles) - before_compiles,
                "counts": {k: v - before_counts.get(k, 0) for k, v in bridge.counts.items()
                           if v != before_counts.get(k, 0)}}

    def again(record: str, strict: bool = False):
        jax.clear_caches()  # forget compiled programs: the next call asks JAX's cache
        jax.config.update("jax_raise_persistent_cache_errors", strict)
        before = len(compiles), dict(bridge.counts)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                seen[record] = {"results": run()}
            except Exception as exc:  # what JAX raises for an entry that does not load
                seen[record] = {"error": f"{type(exc).__name__}: {exc}"}
        seen[record].update(delta(*before), warnings=[str(w.message) for w in caught])

    # 1. One byte of the signed content of the entry changed.
    for path in Path(jax_cache).iterdir():
        # JAX's entry: compile time and IFRT's wrapping around the plugin's serialized
        # executable (kiln/pjrt/serialized.py: magic, signature, payload)
        data = bytearray(cc.decompress_executable(path.read_bytes()))
        at = data.find(b"KILNPJX1")
        seen["magic_found"] = at >= 0
        data[at + 8 + 32 + 100] ^= 0x40
        path.write_bytes(cc.compress_executable(bytes(data)))
    again("tampered_strict", strict=True)
    again("tampered")  # JAX warns, compiles (from Kiln's cache) and rewrites the entry

    # 2. The (rewritten, valid) entry read by a Kiln whose cache directory, so key, differs.
    os.environ["KILN_CACHE_DIR"] = other_kiln_cache
    again("other_key")

    # 3. Kiln's compile cache off: nothing to sign with, so JAX stores nothing (and says so).
    os.environ["KILN_CACHE"] = "0"
    entries = sorted(p.name for p in Path(jax_cache).iterdir())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        seen["uncached"] = [np.asarray(v).tolist() for v in jax.jit(lambda a: (a * 3,))(x)]
    seen["uncached_warnings"] = [str(w.message) for w in caught]
    seen["uncached_new_entries"] = sorted(
        set(p.name for p in Path(jax_cache).iterdir()) - set(entries))


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])))
