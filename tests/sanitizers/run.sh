#!/usr/bin/env bash
# The sanitizer job (issue 25): Kiln's C runtime (runtime/*.c) built with AddressSanitizer and
# UndefinedBehaviorSanitizer in a scratch directory, then the runtime-facing tests run against
# it (native.py's KILN_RUNTIME_LIBRARY selects it; libasan is preloaded, as a sanitized library
# loaded into an unsanitized python needs). Any report fails the job: UBSan stops at the first
# error, ASan at every one. Leak checking is off: CPython and LLVM keep memory until exit.
#
#   tests/sanitizers/run.sh [pytest args...]     (default: the subset below; ~2 minutes)
set -euo pipefail
cd "$(dirname "$0")/../.."
CC=${CC:-gcc}
build=$(mktemp -d "${TMPDIR:-/tmp}/kiln-sanitized.XXXXXX")
trap 'rm -rf "$build"' EXIT

flags=(-O1 -g -fPIC -fno-omit-frame-pointer -fsanitize=address,undefined
       -fno-sanitize-recover=undefined -std=gnu11 -Wall -Iruntime/include)
sources=(runtime/kiln_runtime.c runtime/kiln_parallel.c runtime/kiln_softfloat.c
         runtime/kiln_ffi.c runtime/kiln_gemm.c runtime/kiln_gemv.c runtime/kiln_sgemm_small.c
         runtime/kiln_gemm_pooled.c runtime/kiln_gpu_fibers.c)
# The AMX kernels as CMakeLists.txt builds them: their own instruction sets, and
# KILN_HAVE_AMX for the whole library when the compiler has them.
amx=(-mamx-tile -mamx-bf16 -mamx-int8 -mavx512f -mavx512bw -mavx512vl -mavx512bf16 -mavx512vnni)
objects=()
if [ "$(uname -m)" = x86_64 ] && echo 'int main(void){return 0;}' | \
    "$CC" "${amx[@]}" -x c - -o /dev/null 2>/dev/null; then
  flags+=(-DKILN_HAVE_AMX)
  "$CC" "${flags[@]}" "${amx[@]}" -c runtime/kiln_gemm_amx.c -o "$build/kiln_gemm_amx.o"
  objects+=("$build/kiln_gemm_amx.o")
fi
for src in "${sources[@]}"; do
  obj="$build/$(basename "$src" .c).o"
  "$CC" "${flags[@]}" -c "$src" -o "$obj"
  objects+=("$obj")
done
"$CC" -shared -fsanitize=address,undefined -o "$build/libkiln_runtime.so" "${objects[@]}" \
  -lpthread -lm

# The PJRT plugin likewise (its C execute path reads the framework's buffers): JAX loads it
# through KILN_PJRT_LIBRARY.
python_include=$(python -c "import sysconfig; print(sysconfig.get_paths()['include'])")
"$CC" "${flags[@]}" -shared -fvisibility=hidden -I"$python_include" -Iruntime/pjrt \
  runtime/pjrt/kiln_pjrt_*.c -o "$build/kiln_pjrt_plugin.so" -lpthread

export KILN_RUNTIME_LIBRARY="$build/libkiln_runtime.so"
export KILN_PJRT_LIBRARY="$build/kiln_pjrt_plugin.so"
export LD_PRELOAD="$("$CC" -print-file-name=libasan.so) $("$CC" -print-file-name=libubsan.so)"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:halt_on_error=1:exitcode=86:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=87:${UBSAN_OPTIONS:-}"
export KILN_CACHE_DIR="$build/cache"   # code compiled against this library only
export KILN_MLIR_DEEPBIND=0              # ASan refuses RTLD_DEEPBIND (mlir_loading.py)
# ASan maps terabytes of shadow memory, which the readers' and workers' RLIMIT_DATA
# (KILN_COMPILE_MEMORY, frontend/untrusted.py) would refuse.
export KILN_COMPILE_MEMORY=none
# Compiles in the test process: compile workers under ASan start slowly, and the code under
# test (the runtime) runs in the calling process either way.
export KILN_COMPILE_IN_PROCESS=1

tests=("$@")
if [ ${#tests[@]} -eq 0 ] || [[ "${tests[0]}" == -* ]]; then   # no test paths: the subset
  # The runtime-facing tests: custom calls through the dispatcher (C targets, api_version
  # 1-3, tuples, failures), the typed FFI, the buffer pool and parallel-for, the run-time
  # bounds guards and the size limits (these run crashing reproducers in children, which
  # inherit the sanitized runtime), large products in pieces on the pool, and the PJRT plugin
  # through its C table (compile, execute on the C path, buffers, events). Not JAX itself: in a process with jaxlib loaded,
  # ASan fails on its own ("unable to unmap", 2026-11-28) before any test runs.
  tests=(tests/py/test_custom_call.py tests/py/test_ffi.py tests/py/test_parallel_pool.py
         tests/py/test_runtime_bounds.py tests/py/test_size_limits.py
         tests/py/test_gemm_pooled.py tests/py/test_pjrt_c_api.py -q -p no:xdist "$@")
fi
python -m pytest "${tests[@]}"
