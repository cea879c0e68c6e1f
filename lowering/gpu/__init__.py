"""Kiln's GPU passes (the `gpu` and `gpu-emulator` targets, python/kiln/targets/gpu.py).

- loops.py: linalg on buffers -> parallel loops shaped for thread blocks (the contiguous
  dimension on threadIdx.x), full reductions split in two phases, and every leftover serial
  piece of work in a one-thread kernel, so that no buffer is touched by host code.
- host.py: the host function after kernel outlining -> the execution plan (allocations,
  uploads of constants, copies, kernel launches), checked against what the plan can express.
- ptx.py: the outlined gpu.module -> LLVM IR (NVPTX) -> PTX (llvmlite, libdevice linked) ->
  cubin (ptxas), and ptxas's resource report.
- supported.py: ops the GPU target cannot run yet (custom calls, collectives), named.
- reductions.py: row reductions as block reductions (warp shuffles and shared memory).
"""


def register_passes(register) -> None:
    """Register the GPU passes by name (called from lowering/registry.py)."""
    from . import host, loops, ptx, reductions, slices, supported
    register("kiln-gpu-check-supported", "name the first op the GPU target cannot run yet "
             "(custom calls, collectives, host transfers), with its location",
             supported.check_supported)
    register("kiln-gpu-dynamic-slices", "slices at computed offsets -> generics that "
             "compute the offset in each thread (no device value read on the host)",
             slices.dynamic_slices_as_gathers)
    register("kiln-gpu-libm-calls-as-math", "libm calls of the shared legalize stage "
             "(log1p, expm1) -> math ops, which become libdevice calls in kernels",
             loops.libm_calls_as_math)
    register("kiln-gpu-order-dimensions", "linalg.generic dimensions reordered so the one "
             "indexing the output's contiguous dimension maps to threadIdx.x",
             loops.order_dimensions)
    register("kiln-gpu-split-reductions", "full reductions -> per-thread partials, then a "
             "combination of them (two kernels)", loops.split_reductions)
    register("kiln-gpu-block-reductions", "row reductions (and a full reduction's phases) "
             "-> one block per output element: warp shuffles, then shared memory",
             reductions.block_reductions)
    register("kiln-gpu-serial-kernels", "buffer work left outside parallel loops -> "
             "one-iteration parallel loops (one-thread kernels)", loops.serial_kernels)
    register("kiln-gpu-annotate-launches", "record on each launch which arguments its "
             "kernel reads and writes (for the plan's thunks)", host.annotate_launches)
    register("kiln-gpu-count-inputs", "record how many entry parameters are inputs (the "
             "rest, after bufferization, are results copied back)", host.count_inputs,
             takes_entry=True)
    register("kiln-gpu-sink-scalars", "scalar code a launch reads from the host -> copied "
             "into the launch body", loops.sink_scalars)
    register("kiln-gpu-check-kernels", "every op in a kernel module is LLVM or NVVM (else a "
             "located error naming the op)", ptx.check_kernels)
    register("kiln-gpu-check-host", "the host function after outlining holds only what the "
             "GPU execution plan runs (allocations, copies, launches)", host.check_host,
             takes_entry=True)
