"""Dialects Kiln defines or reads that the MLIR wheel lacks."""
