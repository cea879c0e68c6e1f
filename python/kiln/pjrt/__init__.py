"""Kiln as a JAX backend: the PJRT plugin (runtime/pjrt) and its Python side.

`JAX_PLATFORMS=kiln python program.py` runs any JAX program through Kiln: jax discovers the
`jax_plugins` entry point `kiln` (plugin.py), which registers the plugin library; programs then
reach Kiln through bridge.py.
"""
