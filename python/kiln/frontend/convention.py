"""What a front end hands the driver besides the module: the entry's calling convention.

A front end's module always has a plain entry function over flat, ranked tensors. How the
caller's values map onto it (pytrees, symbolic shapes, how dynamic shapes are specialised) is
recorded here, as data; the driver applies it. A front end never picks an executable class.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Aval:
    """One flat argument or result as its producer declared it: dimensions may be symbolic."""
    shape: list[str]       # one entry per dimension: "16", "b", "2*b"...
    element: str           # MLIR element type


@dataclass(frozen=True)
class CallingConvention:
    """How callers pass values to the module's entry and get its results back.

    The default is Kiln's own convention: positional arrays in, a tuple of arrays out, and
    JAX's dimension arguments (leading scalar integer parameters of a dynamic signature) told
    from the argument shapes when a program is specialised.

    JAX exports record more. Their kept arguments, platform index and ordered-effect tokens
    are resolved when the module is imported (a plain IR rewrite: a wrapping entry that takes
    every flat argument), so the driver needs them for nothing but introspection; the pytrees
    and symbolic shapes the driver applies at every call.
    """
    in_tree: list | None = None           # the arguments' pytree ((args, kwargs)), JSON form
    out_tree: list | None = None          # the results' pytree
    in_avals: tuple[Aval, ...] | None = None   # flat arguments with their symbolic shapes
    out_avals: tuple[Aval, ...] | None = None
    # False when the entry computes its dimension variables itself (JAX's wrapper): leading
    # scalar integers are then the user's data, and specialising is plain shape refinement.
    infer_dimension_arguments: bool = True
    kept_arguments: tuple[int, ...] | None = None   # flat arguments the program reads
    ordered_effects: tuple[str, ...] = ()           # whose tokens the entry makes and drops
    platform_index: int | None = None               # index of "cpu" among the platforms

    @property
    def has_pytrees(self) -> bool:
        return self.in_tree is not None


PLAIN = CallingConvention()
