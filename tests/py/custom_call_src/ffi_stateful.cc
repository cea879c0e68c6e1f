// A typed-FFI library that registers itself with the runtime that loads it, through the
// XLA_FFI_Api that XLA_FFI_GetApi() returns (libkiln_runtime exports it): its state types with
// XLA_FFI_REGISTER_TYPE and its handler bundle with XLA_FFI_REGISTER_HANDLER. It exercises the
// execution stages, per-instance and per-call state, and scratch memory. Kiln only: jaxlib
// does not export XLA_FFI_GetApi to libraries.
#include <cstdint>
#include <cstring>
#include <memory>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

extern "C" const XLA_FFI_Api* XLA_FFI_GetApi();

struct Counter {
  static ffi::TypeId id;
  explicit Counter(int64_t start) : value(start) {}
  int64_t value;
};
ffi::TypeId Counter::id = {};
XLA_FFI_REGISTER_TYPE(XLA_FFI_GetApi(), "kiln_test_counter", &Counter::id,
                      ffi::MakeTypeInfo<Counter>());

struct Prepared {
  static ffi::TypeId id;
  int64_t stamp;
};
ffi::TypeId Prepared::id = {};
XLA_FFI_REGISTER_TYPE(XLA_FFI_GetApi(), "kiln_test_prepared", &Prepared::id,
                      ffi::MakeTypeInfo<Prepared>());

static ffi::ErrorOr<std::unique_ptr<Counter>> CounterInstantiate(int64_t start) {
  return std::make_unique<Counter>(start);
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(CounterInstantiateHandler, CounterInstantiate,
                              ffi::Ffi::BindInstantiate().Attr<int64_t>("start"));

static ffi::ErrorOr<std::unique_ptr<Prepared>> CounterPrepare(int64_t start) {
  auto p = std::make_unique<Prepared>();
  p->stamp = start * 1000;
  return p;
}

XLA_FFI_DEFINE_HANDLER(CounterPrepareHandler, CounterPrepare,
                       ffi::Ffi::Bind<ffi::ExecutionStage::kPrepare>().Attr<int64_t>("start"));

// Execute: counts its calls in the instance state, reads the prepare stage's state, copies
// its input through scratch memory, and records what the CPU context offers.
static ffi::Error CounterExecute(Counter* counter, Prepared* prepared,
                                 ffi::ScratchAllocator scratch, ffi::Buffer<ffi::S64> x,
                                 ffi::ResultBuffer<ffi::S64> y, int64_t start) {
  (void)start;
  counter->value += 1;
  size_t n = x.element_count();
  std::optional<void*> tmp = scratch.Allocate(n * sizeof(int64_t) + 1, 64);
  if (!tmp.has_value()) return ffi::Error::Internal("no scratch memory");
  if (reinterpret_cast<uintptr_t>(*tmp) % 64 != 0)
    return ffi::Error::Internal("scratch memory is not aligned");
  std::memcpy(*tmp, x.typed_data(), n * sizeof(int64_t));
  int64_t* out = y->typed_data();
  const int64_t* in = static_cast<const int64_t*>(*tmp);
  for (size_t i = 0; i < n; ++i) out[i] = in[i] + counter->value + prepared->stamp;
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER(CounterExecuteHandler, CounterExecute,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::State<Counter>>()
                           .Ctx<ffi::Prepared<Prepared>>()
                           .Ctx<ffi::ScratchAllocator>()
                           .Arg<ffi::Buffer<ffi::S64>>()
                           .Ret<ffi::Buffer<ffi::S64>>()
                           .Attr<int64_t>("start"),
                       {});

XLA_FFI_REGISTER_HANDLER(XLA_FFI_GetApi(), "kiln_test.counter", "Host",
                         (XLA_FFI_Handler_Bundle{CounterInstantiateHandler, CounterPrepareHandler,
                                                 nullptr, CounterExecuteHandler}));

// The same bundle again, for registering by symbol as a dictionary of stages.
extern "C" XLA_FFI_Error* CounterPrepareSymbol(XLA_FFI_CallFrame* frame) {
  return CounterPrepareHandler(frame);
}
extern "C" XLA_FFI_Error* CounterExecuteSymbol(XLA_FFI_CallFrame* frame) {
  return CounterExecuteHandler(frame);
}

