// RUN: gcc -shared -fPIC -I%kiln_include %S/../../py/custom_call_src/seed_example.c -o %t.so
// RUN: env KILN_CUSTOM_CALL_LIBRARIES=%t.so kiln-opt %s --stage legalize | FileCheck %s
// RUN: env KILN_CUSTOM_CALL_LIBRARIES=%t.so kiln-opt %s --stage bufferize | FileCheck %s --check-prefix=BUF

// Seed 004's example: operands become read-only buffers, the result a fresh 64-byte aligned
// buffer; their addresses go in an array (operands first) handed to the runtime's dispatcher
// with the call site (the resolved target, its ABI and opaque string). The site's address is
// read from a global the loader fills in, so the object code holds no process address; the
// site itself is recorded on the module.
// CHECK: module attributes {kiln.call_sites = ["{\22target\22: \22do_custom_call\22, \22platform\22: \22cpu\22, \22api_version\22: 1,
// CHECK: func.func private @kiln_custom_call(i64, i64)
// CHECK: memref.global "public" @__kiln_call_site_0 : memref<i64> = dense<0>
// CHECK-LABEL: func.func @main
// CHECK-DAG: %[[B:.*]] = bufferization.to_buffer %arg0 read_only {kiln.custom_call_site = 0 : i64} : tensor<128xf32> to memref<128xf32>
// CHECK-DAG: %[[C:.*]] = bufferization.to_buffer %arg1 read_only {kiln.custom_call_site = 0 : i64} : tensor<2048xf32> to memref<2048xf32>
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2048xf32>
// CHECK: memref.extract_aligned_pointer_as_index %[[B]]
// CHECK: memref.extract_aligned_pointer_as_index %[[C]]
// CHECK: memref.extract_aligned_pointer_as_index %[[OUT]]
// CHECK: %[[SLOT:.*]] = memref.get_global @__kiln_call_site_0 : memref<i64>
// CHECK: %[[SITE:.*]] = memref.load %[[SLOT]][] : memref<i64>
// CHECK: memref.alloca_scope
// CHECK: %[[ARR:.*]] = memref.alloca() : memref<3xi64>
// CHECK-COUNT-3: memref.store
// CHECK: func.call @kiln_custom_call(%[[SITE]], %{{.*}}) {kiln.custom_call_target = "do_custom_call"} : (i64, i64) -> ()
// CHECK: %[[R:.*]] = bufferization.to_tensor %[[OUT]] restrict writable
// CHECK: return %[[R]]
// CHECK-NOT: stablehlo.

// After bufferization the result buffer is hoisted into the caller's out-parameter: the target
// writes straight into the array Executable returns, with no copy.
// BUF-LABEL: func.func @main(%arg0: memref<128xf32>, %arg1: memref<2048xf32>, %arg2: memref<2048xf32>)
// BUF: memref.extract_aligned_pointer_as_index %arg0
// BUF: memref.extract_aligned_pointer_as_index %arg1
// BUF: memref.extract_aligned_pointer_as_index %arg2
// BUF: call @kiln_custom_call
// BUF-NOT: memref.copy
// BUF: return
func.func @main(%b: tensor<128xf32>, %c: tensor<2048xf32>) -> tensor<2048xf32> {
  %0 = stablehlo.custom_call @do_custom_call(%b, %c) : (tensor<128xf32>, tensor<2048xf32>) -> tensor<2048xf32>
  return %0 : tensor<2048xf32>
}
