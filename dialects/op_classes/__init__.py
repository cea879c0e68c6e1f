"""Empty Python modules for the dialects whose ops have no Python classes in torch_mlir
(StableHLO, CHLO). Each time the bindings hand out an op they look for its dialect's module
under every registered prefix, and remember only a successful import: without these, every
StableHLO op Kiln walks costs a failed import (measured: 2-7% of a small program's compile).
context.py registers this package as a prefix. Nothing is defined here: such ops are generic
`OpView`s, as before."""
