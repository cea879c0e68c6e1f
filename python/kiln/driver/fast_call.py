"""The call path of the common case, decided once per compiled specialization.

A call of `Executable` goes through argument coercion, shape checks, the shapes' compiled
code, result allocation, `check.*` evaluation and entry layouts: about a dozen Python
frames, 10-12 us for a 16-element add against XLA's 7 us. Most programs need none of that
generality: positional numpy arrays of the declared dtypes and static shapes, row-major
layouts, one device, no checks, no verification, results that are distinct buffers. For
those, `caller` builds one closure that checks each argument with a few attribute reads,
allocates the results with their shapes and dtypes worked out ahead of time, and invokes
the code. Anything else (a Python scalar, a strided view, another dtype...) makes the
closure return None, and the call takes the general path, which converts or explains.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ..errors import KilnError
from . import calling, result_memory


def caller(exe, compiled):
    """The fast call of `compiled` for `exe`, or None when this program needs the general
    path on every call."""
    convention = exe.convention
    flatten = _flattener(convention, len(exe.arg_specs))
    if flatten is False or not _plain(convention.out_tree) or not _direct(exe, compiled):
        return None
    expected = [(np.dtype(s.dtype), tuple(s.shape)) for s in exe.arg_specs]
    count = len(expected)
    makers = [_allocator(tuple(r.shape), np.dtype(r.dtype)) for r in compiled.results]
    sources = list(compiled.sources[:compiled.user_results])
    invoke = compiled.invoke
    ndarray = np.ndarray
    out_tree = convention.out_tree

    def call(args):
        if flatten is not None:
            try:
                args = flatten(args)
            except KilnError:  # the general path says what is wrong
                return None
        if len(args) != count:
            return None
        for arg, (dtype, shape) in zip(args, expected):
            if type(arg) is not ndarray or arg.dtype != dtype or arg.shape != shape \
                    or not arg.flags.c_contiguous:
                return None
        buffers = [make() for make in makers]
        invoke([*args, *buffers])
        outputs = tuple([buffers[s] for s in sources])
        return calling.unflatten(out_tree, iter(outputs)) if out_tree else outputs

    return call


def _direct(exe, compiled) -> bool:
    """Whether a call of `compiled` is: the arrays' data in, fresh result buffers out, the
    code invoked, nothing else (no checks, devices, layouts, dimension arguments...)."""
    return not (exe.verify_calls or exe.num_devices != 1
                or compiled.uses_devices or compiled.checks or compiled.sub_byte_results
                or not compiled.distinct_sources or compiled.dimension_values
                or any(exe.layouts.params) or any(exe.layouts.results)
                or not all(s.is_static for s in exe.arg_specs))


def native_plan(exe, compiled):
    """What a caller in C needs to run `compiled` without Python (the PJRT plugin's execute,
    runtime/pjrt/kiln_pjrt_direct.c), or None when a call needs Python:
    (entry address, [(dtype, shape) per argument], [(dtype, shape) per result buffer],
    [result buffer of each output]). The entry is a packed `_mlir_ciface_` function taking
    the arguments' and then the result buffers' memref descriptors, called through the
    runtime's KilnInvoke."""
    address = getattr(compiled.invoke, "address", None)  # CPU code; other targets' have none
    if address is None or exe.convention.in_tree is not None or not _direct(exe, compiled):
        return None
    arguments = [(np.dtype(s.dtype), tuple(int(d) for d in s.shape)) for s in exe.arg_specs]
    buffers = [(np.dtype(r.dtype), tuple(int(d) for d in r.shape)) for r in compiled.results]
    sources = [int(s) for s in compiled.sources[:compiled.user_results]]
    return address, arguments, buffers, sources


def _flattener(convention, count: int):
    """How the positional arguments become the entry's arrays: None for `count` arrays as
    they are (no convention, or a JAX export's ((leaf, ...), {})), else a function giving the
    leaves of a JAX export's pytree; False when there is no fast way (custom pytree nodes,
    symbolic shapes)."""
    tree = convention.in_tree
    if tree is None:
        return None
    if not _plain(tree) or not all(d.isdigit() for aval in convention.in_avals or ()
                                   for d in aval.shape):
        return False
    if tree == ["tuple", [["tuple", [["leaf", []]] * count], ["dict", [], []]]]:
        return None

    def leaves(args):
        return calling.flatten(tree, (args, {}), "the arguments")
    return leaves


def _plain(tree) -> bool:
    """Whether a result pytree is rebuilt without jax (no custom nodes)."""
    return tree is None or (tree[0] != "custom" and all(_plain(c) for c in tree[1]))


def _allocator(shape: tuple, dtype: np.dtype):
    nbytes = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
    if nbytes < result_memory.MIN_BYTES:
        return partial(np.empty, shape, dtype)
    return partial(result_memory.empty, shape, dtype)
