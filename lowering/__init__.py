"""Kiln's Python-defined passes over the MLIR bindings, one file per concern."""
