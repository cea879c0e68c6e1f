"""Kiln's Python-defined passes over the MLIR bindings, one file per concern.

Every pass is registered by name in `registry.py` (`kiln-opt --list-passes`); `Pipeline`
(scripting.py) runs registered passes, upstream passes and a user's own Python functions
together on a module.
"""
from .registry import KilnPass, passes, register
from .scripting import Pipeline

__all__ = ["KilnPass", "Pipeline", "passes", "register"]
