// Launches, device memory and event timing, all in the current (primary)
// context.
#include <climits>
#include <string>
#include <vector>

#include "cuda/runtime/driver_api.hpp"
#include "cuda/runtime/runtime.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::cuda {
namespace {

driver::CUstream as_stream(StreamHandle stream) { return static_cast<driver::CUstream>(stream); }

// Device-side events of one timing run, destroyed on every exit path.
class EventPairs {
 public:
  explicit EventPairs(int pairs) {
    const driver::Api& api = driver::api();
    for (int i = 0; i < 2 * pairs; ++i) {
      driver::CUevent event = nullptr;
      driver::check(api.cuEventCreate(&event, driver::CU_EVENT_DEFAULT), "cuEventCreate");
      events_.push_back(event);
    }
  }
  ~EventPairs() {
    for (driver::CUevent event : events_) driver::api().cuEventDestroy(event);
  }
  EventPairs(const EventPairs&) = delete;
  EventPairs& operator=(const EventPairs&) = delete;
  driver::CUevent start(int i) const { return events_[std::size_t(2 * i)]; }
  driver::CUevent end(int i) const { return events_[std::size_t(2 * i + 1)]; }

 private:
  std::vector<driver::CUevent> events_;
};

void check_range(const char* what, std::size_t offset, std::size_t bytes, std::size_t size) {
  if (offset > size || bytes > size - offset)
    throw Error(ErrorCode::invalid_argument,
                std::string("DeviceBuffer::") + what + ": offset " + std::to_string(offset) +
                    " + bytes " + std::to_string(bytes) + " exceeds the buffer's " +
                    std::to_string(size) + " bytes");
}

}  // namespace

void launch(const CompiledKernel& kernel, const LaunchShape& shape, StreamHandle stream,
            void** params) {
  if (!kernel.function)
    throw Error(ErrorCode::invalid_argument,
                "launch: kernel has no function (a compile_only result cannot be launched)");
  if (shape.dynamic_shared_bytes > UINT_MAX)
    throw Error(ErrorCode::invalid_argument, "launch: dynamic_shared_bytes " +
                                                 std::to_string(shape.dynamic_shared_bytes) +
                                                 " does not fit the driver's 32-bit field");
  const driver::Api& api = driver::api();
  if (kernel.ordinal >= 0) use_device(kernel.ordinal);
  driver::check(api.cuLaunchKernel(kernel.function, shape.grid[0], shape.grid[1], shape.grid[2],
                                   shape.block[0], shape.block[1], shape.block[2],
                                   unsigned(shape.dynamic_shared_bytes), as_stream(stream),
                                   params, nullptr),
                "cuLaunchKernel");
}

DevicePtr allocate_async(std::size_t bytes, StreamHandle stream) {
  if (bytes == 0) return 0;
  const driver::Api& api = driver::api();
  current_device();  // a context must be current; device 0 when none is
  driver::CUdeviceptr ptr = 0;
  driver::check(api.cuMemAllocAsync(&ptr, bytes, as_stream(stream)), "cuMemAllocAsync");
  return ptr;
}

void free_async(DevicePtr ptr, StreamHandle stream) {
  if (ptr == 0) return;
  driver::check(driver::api().cuMemFreeAsync(ptr, as_stream(stream)), "cuMemFreeAsync");
}

void fill_bytes_async(DevicePtr ptr, unsigned char value, std::size_t bytes,
                      StreamHandle stream) {
  if (bytes == 0) return;
  driver::check(driver::api().cuMemsetD8Async(ptr, value, bytes, as_stream(stream)),
                "cuMemsetD8Async");
}

void copy_to_host(void* host, DevicePtr source, std::size_t bytes, StreamHandle stream) {
  const driver::Api& api = driver::api();
  driver::check(api.cuMemcpyDtoHAsync(host, source, bytes, as_stream(stream)),
                "cuMemcpyDtoHAsync");
  driver::check(api.cuStreamSynchronize(as_stream(stream)), "cuStreamSynchronize");
}

void synchronize() {
  const driver::Api& api = driver::api();
  current_device();
  driver::check(api.cuCtxSynchronize(), "cuCtxSynchronize");
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  const driver::Api& api = driver::api();
  current_device();
  driver::CUdeviceptr ptr = 0;
  driver::check(api.cuMemAlloc(&ptr, bytes), "cuMemAlloc");
  ptr_ = ptr;
}

DeviceBuffer::~DeviceBuffer() {
  // A destructor cannot throw; a failed free at exit leaks nothing the
  // driver does not reclaim with the context.
  if (ptr_) driver::api().cuMemFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept : ptr_(other.ptr_), bytes_(other.bytes_) {
  other.ptr_ = 0;
  other.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    DeviceBuffer old(std::move(*this));  // freed at the end of this scope
    ptr_ = other.ptr_;
    bytes_ = other.bytes_;
    other.ptr_ = 0;
    other.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, std::size_t bytes, std::size_t offset) {
  check_range("upload", offset, bytes, bytes_);
  if (bytes == 0) return;
  driver::check(driver::api().cuMemcpyHtoD(ptr_ + offset, host, bytes), "cuMemcpyHtoD");
}

void DeviceBuffer::download(void* host, std::size_t bytes, std::size_t offset) const {
  check_range("download", offset, bytes, bytes_);
  if (bytes == 0) return;
  driver::check(driver::api().cuMemcpyDtoH(host, ptr_ + offset, bytes), "cuMemcpyDtoH");
}

void DeviceBuffer::fill_bytes(unsigned char value) {
  if (bytes_ == 0) return;
  driver::check(driver::api().cuMemsetD8(ptr_, value, bytes_), "cuMemsetD8");
  // cuMemsetD8 may run asynchronously to the host for device memory; make the
  // fill visible before a following synchronous copy on another stream.
  driver::check(driver::api().cuCtxSynchronize(), "cuCtxSynchronize");
}

std::vector<double> time_ms_impl(void (*call)(void*), void* context, StreamHandle stream,
                                 int warmup, int repeats) {
  if (warmup < 0)
    throw Error(ErrorCode::invalid_argument, "time_ms: warmup must be >= 0, got " + std::to_string(warmup));
  if (repeats < 1)
    throw Error(ErrorCode::invalid_argument, "time_ms: repeats must be >= 1, got " + std::to_string(repeats));
  const driver::Api& api = driver::api();
  current_device();
  for (int i = 0; i < warmup; ++i) call(context);
  // One event pair per repeat: each time is that call alone, so the caller
  // can take a median rather than a mean polluted by one slow run.
  EventPairs events(repeats);
  driver::CUstream s = as_stream(stream);
  for (int i = 0; i < repeats; ++i) {
    driver::check(api.cuEventRecord(events.start(i), s), "cuEventRecord");
    call(context);
    driver::check(api.cuEventRecord(events.end(i), s), "cuEventRecord");
  }
  driver::check(api.cuEventSynchronize(events.end(repeats - 1)), "cuEventSynchronize");
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    float ms = 0;
    driver::check(api.cuEventElapsedTime(&ms, events.start(i), events.end(i)), "cuEventElapsedTime");
    times.push_back(ms);
  }
  return times;
}

}  // namespace flashgen::cuda
