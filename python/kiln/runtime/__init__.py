"""Kiln's runtime: calling compiled code with numpy arrays (memref ABI, checks, custom calls)."""
