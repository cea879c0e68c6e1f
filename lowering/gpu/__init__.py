"""Kiln's GPU passes (the `gpu` and `gpu-emulator` targets, python/kiln/targets/gpu.py).

- loops.py: linalg on buffers -> parallel loops shaped for thread blocks (the contiguous
  dimension on threadIdx.x), full reductions split in two phases, and every leftover serial
  piece of work in a one-thread kernel, so that no buffer is touched by host code.
- host.py: the host function after kernel outlining -> the execution plan (allocations,
  uploads of constants, copies, kernel launches, custom calls, control flow, command
  buffers), checked against what the plan can express; host_ops.py: its scalar steps.
- control_flow.py: kiln-gpu-serial-kernels: while/if/case steering kernels stay on the
  host; serial work elsewhere (in their regions too) becomes one-thread kernels.
- custom_calls.py: custom calls registered for the GPU (platform "CUDA") -> plan steps.
- multi_output.py: multi-output fusion of elementwise producers used elsewhere too.
- ptx.py: the outlined gpu.module -> LLVM IR (NVPTX) -> PTX (llvmlite, libdevice linked) ->
  cubin (ptxas), and ptxas's resource report.
- supported.py: ops the GPU target cannot run yet (custom calls, collectives), named.
- sort.py, scatter.py: sorts as bitonic networks (a parallel generic a step) and scatters
  as a thread per update element (atomics, unique indices, replacement), before the
  shared serial lowerings.
- reductions.py: row reductions as block reductions (warp shuffles and shared memory).
- columns.py, transposes.py, products.py: column reductions, transposes and contractions
  as tiled kernels through shared memory (kernel_ir.py: the launch and body builders they
  share).
"""


def register_passes(register) -> None:
    """Register the GPU passes by name (called from lowering/registry.py)."""
    from . import host, loops, ptx, reductions, scatter, slices, sort, supported
    register("kiln-gpu-check-supported", "GPU custom calls (api_version 1-4), collectives "
             "and host transfers -> plan calls; name the first custom call the GPU target "
             "cannot run, with its location",
             supported.check_supported)
    register("kiln-gpu-bitonic-sort", "stablehlo.sort -> a bitonic sorting network: each "
             "compare-exchange step one parallel generic (the op's comparator, ties broken "
             "by the original position)", sort.bitonic_sorts)
    register("kiln-gpu-parallel-scatter", "stablehlo.scatter with an atomic combiner (add, "
             "max, min, or, and), unique indices or a replacing one -> a parallel loop, a "
             "thread per update element", scatter.parallel_scatters)
    from . import multi_output
    register("kiln-gpu-multi-output-fusion", "an elementwise producer whose result is also "
             "used elsewhere -> computed in its consumer's generic, which writes both results "
             "(one kernel, the result not read back)", multi_output.multi_output_fusion)
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
    from . import columns, products, transposes
    register("kiln-gpu-tiled-products", "contractions (matmul, batch matmul, convolutions) "
             "-> 64x64 tiles of the output, K in steps of 16 staged in shared memory, 4x4 "
             "accumulators a thread", products.tiled_products)
    register("kiln-gpu-block-reductions", "row reductions (and a full reduction's phases) "
             "-> one block per output element: warp shuffles, then shared memory",
             reductions.block_reductions)
    register("kiln-gpu-column-reductions", "column reductions -> a block per 32 output "
             "columns, the reduced elements split across threadIdx.y, partials combined "
             "through shared memory", columns.column_reductions)
    register("kiln-gpu-tiled-transposes", "copies and elementwise generics that move the "
             "contiguous dimension -> 32x32 tiles through shared memory (both sides "
             "coalesced)", transposes.tiled_transposes)
    # the serial-kernel rule, applied in the regions of host control flow too
    from . import control_flow
    register("kiln-gpu-serial-kernels", "buffer work left outside parallel loops -> "
             "one-iteration parallel loops (one-thread kernels); while/if/case that launch "
             "kernels or carry buffers stay on the host (the plan runs them, downloading "
             "their predicates)", control_flow.host_control_flow)
    register("kiln-gpu-annotate-launches", "record on each launch which arguments its "
             "kernel reads and writes (for the plan's thunks)", host.annotate_launches)
    register("kiln-gpu-count-inputs", "record how many entry parameters are inputs (the "
             "rest, after bufferization, are results copied back)", host.count_inputs,
             takes_entry=True)
    register("kiln-gpu-sink-scalars", "scalar code a launch reads from the host -> copied "
             "into the launch body", loops.sink_scalars)
    register("kiln-gpu-check-kernels", "every op in a kernel module is LLVM or NVVM (else a "
             "located error naming the op)", ptx.check_kernels, check=True)
    register("kiln-gpu-check-host", "the host function after outlining holds only what the "
             "GPU execution plan runs (allocations, copies, launches, custom calls, host "
             "control flow)", host.check_host,
             takes_entry=True, check=True)
