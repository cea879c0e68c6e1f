// Typed-FFI handlers written against jaxlib's unmodified headers (xla/ffi/api/ffi.h), as the
// JAX FFI tutorial writes them. tests/py/test_ffi.py builds this file with g++, registers the
// handlers with JAX (jax.ffi.register_ffi_target) and with Kiln, and compares the two.
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

// ---- the tutorial's rms_norm ------------------------------------------------------------------

static float ComputeRmsNorm(float eps, int64_t size, const float* x, float* y) {
  float sm = 0.0f;
  for (int64_t n = 0; n < size; ++n) sm += x[n] * x[n];
  float scale = 1.0f / std::sqrt(sm / float(size) + eps);
  for (int64_t n = 0; n < size; ++n) y[n] = x[n] * scale;
  return scale;
}

template <ffi::DataType T>
static std::pair<int64_t, int64_t> GetDims(const ffi::Buffer<T>& buffer) {
  auto dims = buffer.dimensions();
  if (dims.size() == 0) return {0, 0};
  return {buffer.element_count(), dims.back()};
}

static ffi::Error RmsNormImpl(float eps, ffi::Buffer<ffi::F32> x,
                              ffi::ResultBuffer<ffi::F32> y) {
  auto [total, last] = GetDims(x);
  if (last == 0) return ffi::Error::InvalidArgument("RmsNorm input must be an array");
  for (int64_t n = 0; n < total; n += last)
    ComputeRmsNorm(eps, last, &(x.typed_data()[n]), &(y->typed_data()[n]));
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(RmsNorm, RmsNormImpl,
                              ffi::Ffi::Bind()
                                  .Attr<float>("eps")
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

// Several results: the normalized array and the scale of each row.
static ffi::Error RmsNormFwdImpl(float eps, ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::F32> y,
                                 ffi::ResultBuffer<ffi::F32> res) {
  auto [total, last] = GetDims(x);
  if (last == 0) return ffi::Error::InvalidArgument("RmsNormFwd input must be an array");
  for (int64_t n = 0, idx = 0; n < total; n += last, ++idx)
    res->typed_data()[idx] = ComputeRmsNorm(eps, last, &(x.typed_data()[n]), &(y->typed_data()[n]));
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(RmsNormFwd, RmsNormFwdImpl,
                              ffi::Ffi::Bind()
                                  .Attr<float>("eps")
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

// ---- attributes of each kind: every value written, as f64, to the result -----------------------

struct Point {
  int64_t x;
  double y;
};

XLA_FFI_REGISTER_STRUCT_ATTR_DECODING(Point, ffi::StructMember<int64_t>("x"),
                                      ffi::StructMember<double>("y"));

static ffi::Error AttrsImpl(bool b, int8_t i8, int16_t i16, int32_t i32, int64_t i64, uint8_t u8,
                            uint16_t u16, uint32_t u32, uint64_t u64, float f32, double f64,
                            std::string_view name, ffi::Span<const int32_t> a32,
                            ffi::Span<const int64_t> a64, ffi::Span<const float> af32,
                            ffi::Span<const double> af64, ffi::Dictionary opts, Point point,
                            ffi::ResultBuffer<ffi::F64> out) {
  double* o = out->typed_data();
  size_t capacity = out->element_count(), k = 0;
  auto put = [&](double v) {
    if (k < capacity) o[k++] = v;
  };
  for (double v : {double(b), double(i8), double(i16), double(i32), double(i64), double(u8),
                   double(u16), double(u32), double(u64), double(f32), f64})
    put(v);
  put(double(name.size()));
  for (char c : name) put(double(c));
  for (auto v : a32) put(double(v));
  for (auto v : a64) put(double(v));
  for (auto v : af32) put(double(v));
  for (auto v : af64) put(double(v));
  // A dictionary read by name and type.
  ffi::ErrorOr<int32_t> depth = opts.get<int32_t>("depth");
  ffi::ErrorOr<std::string_view> mode = opts.get<std::string_view>("mode");
  if (depth.has_error()) return depth.error();
  if (mode.has_error()) return mode.error();
  put(double(opts.size()));
  put(double(*depth));
  put(double(mode->size()));
  put(double(point.x));
  put(point.y);
  while (k < capacity) o[k++] = -1.0;
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(Attrs, AttrsImpl,
                              ffi::Ffi::Bind()
                                  .Attr<bool>("b")
                                  .Attr<int8_t>("i8")
                                  .Attr<int16_t>("i16")
                                  .Attr<int32_t>("i32")
                                  .Attr<int64_t>("i64")
                                  .Attr<uint8_t>("u8")
                                  .Attr<uint16_t>("u16")
                                  .Attr<uint32_t>("u32")
                                  .Attr<uint64_t>("u64")
                                  .Attr<float>("f32")
                                  .Attr<double>("f64")
                                  .Attr<std::string_view>("name")
                                  .Attr<ffi::Span<const int32_t>>("a32")
                                  .Attr<ffi::Span<const int64_t>>("a64")
                                  .Attr<ffi::Span<const float>>("af32")
                                  .Attr<ffi::Span<const double>>("af64")
                                  .Attr<ffi::Dictionary>("opts")
                                  .Attr<Point>("point")
                                  .Ret<ffi::Buffer<ffi::F64>>());

// ---- a failing handler -------------------------------------------------------------------------

static ffi::Error FailImpl(std::string_view reason, ffi::Buffer<ffi::F32> x,
                           ffi::ResultBuffer<ffi::F32> y) {
  if (x.element_count() && x.typed_data()[0] < 0)
    return ffi::Error(ffi::ErrorCode::kOutOfRange,
                      std::string("negative input: ") + std::string(reason));
  std::memcpy(y->untyped_data(), x.untyped_data(), x.size_bytes());
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(Fail, FailImpl,
                              ffi::Ffi::Bind()
                                  .Attr<std::string_view>("reason")
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

// ---- any dtype and rank: copies its operand and describes it ----------------------------------

static ffi::Error DescribeImpl(ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> copy,
                               ffi::ResultBuffer<ffi::S64> info) {
  if (copy->size_bytes() != x.size_bytes() || copy->element_type() != x.element_type())
    return ffi::Error::InvalidArgument("the copy differs from the operand");
  std::memcpy(copy->untyped_data(), x.untyped_data(), x.size_bytes());
  int64_t* o = info->typed_data();
  size_t capacity = info->element_count(), k = 0;
  auto put = [&](int64_t v) {
    if (k < capacity) o[k++] = v;
  };
  put(static_cast<int64_t>(x.element_type()));
  put(static_cast<int64_t>(x.dimensions().size()));
  put(static_cast<int64_t>(x.size_bytes()));
  for (int64_t d : x.dimensions()) put(d);
  while (k < capacity) o[k++] = -1;
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(Describe, DescribeImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::Buffer<ffi::S64>>());

// ---- several operands of fixed rank, and remaining arguments ---------------------------------

static ffi::Error AxpyImpl(ffi::Buffer<ffi::F64, 0> a, ffi::Buffer<ffi::F64, 1> x,
                           ffi::RemainingArgs rest, ffi::ResultBuffer<ffi::F64, 1> y) {
  double alpha = a.typed_data()[0];
  for (size_t i = 0; i < x.element_count(); ++i) y->typed_data()[i] = alpha * x.typed_data()[i];
  for (size_t r = 0; r < rest.size(); ++r) {
    auto extra = rest.get<ffi::BufferR1<ffi::F64>>(r);
    if (extra.has_error()) return extra.error();
    for (size_t i = 0; i < x.element_count(); ++i) y->typed_data()[i] += extra->typed_data()[i];
  }
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(Axpy, AxpyImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::BufferR0<ffi::F64>>()
                                  .Arg<ffi::BufferR1<ffi::F64>>()
                                  .RemainingArgs()
                                  .Ret<ffi::BufferR1<ffi::F64>>());

// ---- the CPU execution context ----------------------------------------------------------------

// Asks the context for what a CPU handler may: the thread pool (absent under Kiln), the run id
// and the device ordinal. Results: [device ordinal, run id > 0].
static ffi::Error ContextImpl(ffi::ThreadPool pool, ffi::RunId run, int32_t device,
                              ffi::ResultBuffer<ffi::S64> out) {
  out->typed_data()[0] = device;
  out->typed_data()[1] = run.run_id > 0 ? 1 : 0;
  (void)pool;
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(Context, ContextImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Ctx<ffi::RunId>()
                                  .Ctx<ffi::DeviceOrdinal>()
                                  .Ret<ffi::Buffer<ffi::S64>>());

// Schedules work on the thread pool. Kiln has none and says so through the API's error; the
// headers then run the task in the caller's thread and report 0 threads.
static ffi::Error PoolImpl(ffi::ThreadPool pool, ffi::ResultBuffer<ffi::S64> out) {
  std::atomic<int64_t> done{0};
  pool.Schedule([&done] { done.store(1); });
  while (done.load() == 0) std::this_thread::yield();
  out->typed_data()[0] = pool.num_threads();
  out->typed_data()[1] = done.load();
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(Pool, PoolImpl,
                              ffi::Ffi::Bind().Ctx<ffi::ThreadPool>().Ret<ffi::Buffer<ffi::S64>>());

// A GPU-style handler asking for a stream: on the CPU the context has none.
static ffi::Error StreamImpl(void* stream, ffi::ResultBuffer<ffi::S64> out) {
  out->typed_data()[0] = stream != nullptr;
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(Stream, StreamImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<void*>>()
                                  .Ret<ffi::Buffer<ffi::S64>>());

// ---- tokens -----------------------------------------------------------------------------------

// A token argument and a token result beside buffers: XLA passes each token as a rank-0 buffer
// of dtype TOKEN with no data. y = 2 x; info = [dtype, rank, data is null] of the token
// argument, then of the token result.
static ffi::Error TokenImpl(ffi::Token token, ffi::Buffer<ffi::F32> x, ffi::Result<ffi::Token> out,
                            ffi::ResultBuffer<ffi::F32> y, ffi::ResultBuffer<ffi::S64> info) {
  for (size_t i = 0; i < x.element_count(); ++i) y->typed_data()[i] = 2.0f * x.typed_data()[i];
  int64_t* seen = info->typed_data();
  seen[0] = static_cast<int64_t>(token.element_type());
  seen[1] = static_cast<int64_t>(token.dimensions().size());
  seen[2] = token.untyped_data() == nullptr;
  seen[3] = static_cast<int64_t>(out->element_type());
  seen[4] = static_cast<int64_t>(out->dimensions().size());
  seen[5] = out->untyped_data() == nullptr;
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(TokenThrough, TokenImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Token>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Token>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::S64>>());
