#include "device_storage.hpp"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda/cuda_backend.hpp"
#include "cuda/runtime/driver_api.hpp"
#include "cuda/runtime/runtime.hpp"

namespace flashgen::testing {
namespace {

namespace driver = cuda::driver;

class HostStorage final : public Storage {
 public:
  explicit HostStorage(std::size_t bytes) : bytes_(bytes) {}
  void* data() override { return bytes_.data(); }
  std::size_t bytes() const override { return bytes_.size(); }
  void upload(const void* host, std::size_t n) override { std::memcpy(bytes_.data(), host, n); }
  void download(void* host, std::size_t n) const override { std::memcpy(host, bytes_.data(), n); }

 private:
  std::vector<unsigned char> bytes_;
};

class CudaStorage final : public Storage {
 public:
  explicit CudaStorage(std::size_t bytes) : buffer_(bytes) {}
  void* data() override { return buffer_.data(); }
  std::size_t bytes() const override { return buffer_.bytes(); }
  void upload(const void* host, std::size_t n) override { buffer_.upload(host, n); }
  void download(void* host, std::size_t n) const override { buffer_.download(host, n); }

 private:
  cuda::DeviceBuffer buffer_;
};

std::size_t round_up(std::size_t bytes, std::size_t granule) {
  return (bytes + granule - 1) / granule * granule;
}

// Host bytes ending where a PROT_NONE page begins.
class HostPageEndStorage final : public Storage {
 public:
  explicit HostPageEndStorage(std::size_t bytes) : bytes_(bytes) {
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    mapped_ = round_up(bytes, page);
    void* base = mmap(nullptr, mapped_ + page, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) throw Error(ErrorCode::runtime, "mmap of a guarded host range failed");
    base_ = static_cast<unsigned char*>(base);
    mprotect(base_ + mapped_, page, PROT_NONE);
  }
  ~HostPageEndStorage() override {
    munmap(base_, mapped_ + static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));
  }
  void* data() override { return base_ + mapped_ - bytes_; }
  std::size_t bytes() const override { return bytes_; }
  void upload(const void* host, std::size_t n) override { std::memcpy(data(), host, n); }
  void download(void* host, std::size_t n) const override {
    std::memcpy(host, base_ + mapped_ - bytes_, n);
  }

 private:
  std::size_t bytes_, mapped_;
  unsigned char* base_ = nullptr;
};

// The driver's virtual memory API (cuda.h's types and values; the ABI is
// stable), resolved from the libcuda.so.1 the library has loaded.
struct VirtualMemoryApi {
  struct Location {
    int type;  // CU_MEM_LOCATION_TYPE_DEVICE = 1
    int id;
  };
  struct AllocationProp {
    int type;                    // CU_MEM_ALLOCATION_TYPE_PINNED = 1
    int requested_handle_types;  // none
    Location location;
    void* win32_metadata;
    unsigned char compression_type, rdma_capable;
    unsigned short usage;
    unsigned char reserved[4];
  };
  struct AccessDesc {
    Location location;
    int flags;  // CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
  };
  using Ptr = driver::CUdeviceptr;
  using Handle = unsigned long long;
  driver::CUresult (*reserve)(Ptr*, std::size_t, std::size_t, Ptr, unsigned long long);
  driver::CUresult (*create)(Handle*, std::size_t, const AllocationProp*, unsigned long long);
  driver::CUresult (*map)(Ptr, std::size_t, std::size_t, Handle, unsigned long long);
  driver::CUresult (*set_access)(Ptr, std::size_t, const AccessDesc*, std::size_t);
  driver::CUresult (*granularity)(std::size_t*, const AllocationProp*, int);
  driver::CUresult (*unmap)(Ptr, std::size_t);
  driver::CUresult (*release)(Handle);
  driver::CUresult (*address_free)(Ptr, std::size_t);

  static const VirtualMemoryApi& get() {
    static const VirtualMemoryApi api = [] {
      driver::api();  // loads libcuda and initializes the driver, or throws
      void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
      if (library == nullptr) throw Error(ErrorCode::unsupported, "libcuda.so.1 is not loaded");
      VirtualMemoryApi a;
      const auto resolve = [&](auto& fn, const char* name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(library, name));
        if (fn == nullptr) throw Error(ErrorCode::unsupported, std::string("no ") + name);
      };
      resolve(a.reserve, "cuMemAddressReserve");
      resolve(a.create, "cuMemCreate");
      resolve(a.map, "cuMemMap");
      resolve(a.set_access, "cuMemSetAccess");
      resolve(a.granularity, "cuMemGetAllocationGranularity");
      resolve(a.unmap, "cuMemUnmap");
      resolve(a.release, "cuMemRelease");
      resolve(a.address_free, "cuMemAddressFree");
      return a;
    }();
    return api;
  }
};

// Device bytes ending at the end of a mapped range, followed by a reserved
// granule that is never mapped.
class CudaPageEndStorage final : public Storage {
 public:
  explicit CudaPageEndStorage(std::size_t bytes) : bytes_(bytes) {
    const VirtualMemoryApi& vm = VirtualMemoryApi::get();
    const int device = cuda::current_device();  // makes a context current where none is
    VirtualMemoryApi::AllocationProp prop{};
    prop.type = 1;
    prop.location = {1, device};
    std::size_t granule = 0;
    driver::check(vm.granularity(&granule, &prop, 0), "cuMemGetAllocationGranularity");
    mapped_ = round_up(bytes, granule);
    reserved_ = mapped_ + granule;
    driver::check(vm.reserve(&base_, reserved_, 0, 0, 0), "cuMemAddressReserve");
    driver::check(vm.create(&handle_, mapped_, &prop, 0), "cuMemCreate");
    driver::check(vm.map(base_, mapped_, 0, handle_, 0), "cuMemMap");
    const VirtualMemoryApi::AccessDesc access{{1, device}, 3};
    driver::check(vm.set_access(base_, mapped_, &access, 1), "cuMemSetAccess");
  }
  ~CudaPageEndStorage() override {
    const VirtualMemoryApi& vm = VirtualMemoryApi::get();
    vm.unmap(base_, mapped_);
    vm.release(handle_);
    vm.address_free(base_, reserved_);
  }
  void* data() override { return reinterpret_cast<void*>(base_ + mapped_ - bytes_); }
  std::size_t bytes() const override { return bytes_; }
  void upload(const void* host, std::size_t n) override {
    driver::check(driver::api().cuMemcpyHtoD(base_ + mapped_ - bytes_, host, n), "cuMemcpyHtoD");
  }
  void download(void* host, std::size_t n) const override {
    driver::check(driver::api().cuMemcpyDtoH(host, base_ + mapped_ - bytes_, n), "cuMemcpyDtoH");
  }

 private:
  std::size_t bytes_, mapped_ = 0, reserved_ = 0;
  driver::CUdeviceptr base_ = 0;
  unsigned long long handle_ = 0;
};

}  // namespace

std::unique_ptr<Storage> make_storage(MemoryKind memory, std::size_t bytes, Placement placement) {
  if (placement == Placement::ends_at_unmapped_page) {
    if (memory == MemoryKind::cuda) return std::make_unique<CudaPageEndStorage>(bytes);
    return std::make_unique<HostPageEndStorage>(bytes);
  }
  if (memory == MemoryKind::cuda) return std::make_unique<CudaStorage>(bytes);
  return std::make_unique<HostStorage>(bytes);
}

bool gpu_available(std::string* reason) {
  cuda::Availability a = cuda::availability();
  if (!a.ok && reason) *reason = a.reason;
  return a.ok;
}

}  // namespace flashgen::testing
