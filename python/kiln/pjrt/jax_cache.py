"""Lets JAX's persistent compilation cache (`jax_compilation_cache_dir`) serve the `kiln`
platform.

JAX uses its persistent cache only for backends whose platform is on a fixed list
(`jax._src.compilation_cache.is_cache_used`: tpu, gpu, cpu, neuron, in jax 0.10.2), and has no
option or plugin hook to add one. Kiln's plugin serializes its executables (signed, see
serialized.py), so the cache works for it once the check admits it. This wraps that one
function, for `kiln` backends only: every other backend gets JAX's own answer, and a `kiln`
backend gets JAX's answer for a listed platform, narrowed to when a cache directory is set
(JAX would otherwise hash every program for a cache it has nowhere to keep).
"""
from __future__ import annotations

import warnings


def admit(platform: str) -> bool:
    """Wrap JAX's check so that `platform`'s backends may use the cache; False (with a
    warning) when this JAX has no such check to wrap (the cache then stays off for Kiln)."""
    try:
        from jax._src import compilation_cache
        original = compilation_cache.is_cache_used
        enabled = compilation_cache.is_persistent_cache_enabled  # a directory, and not off
    except (ImportError, AttributeError) as exc:
        warnings.warn(f"Kiln's PJRT plugin cannot enable JAX's persistent cache for '{platform}' "
                      f"with this JAX ({exc}); programs compile in every process (Kiln's own "
                      "compile cache still applies)", stacklevel=2)
        return False
    if getattr(original, "_kiln_admits", None) == platform:
        return True  # already wrapped (initialize ran twice)

    def is_cache_used(backend) -> bool:
        if getattr(backend, "platform", None) == platform:
            return enabled()
        return original(backend)

    is_cache_used._kiln_admits = platform
    is_cache_used.__wrapped__ = original
    compilation_cache.is_cache_used = is_cache_used
    return True
