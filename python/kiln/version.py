"""Kiln's version (pyproject.toml's; tests/py/test_executable_files.py checks they agree)."""
__version__ = "0.1.0"
