// Devices and contexts: facts about each GPU, and the primary context every
// kernel, buffer and event of flashgen lives in.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/runtime/driver_api.hpp"
#include "cuda/runtime/runtime.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::cuda {
namespace {

// Hopper's arch-specific features (wgmma, setmaxnreg) need the "a" target.
constexpr int kHopperMajor = 9;
constexpr int kHopperMinor = 0;
constexpr std::size_t kDeviceNameBytes = 256;
// cuDriverGetVersion encodes 13.0 as 13000.
constexpr int kDriverMajorScale = 1000;
constexpr int kDriverMinorScale = 10;

struct DeviceState {
  std::once_flag once;
  driver::CUcontext context = nullptr;  // primary context, retained for the process
  DeviceInfo info;
};

// One slot per device; filled lazily, never freed, so references stay valid.
class Devices {
 public:
  static Devices& instance() {
    static Devices* devices = new Devices();  // leaked on purpose: used until exit
    return *devices;
  }
  int count() const { return int(states_.size()); }

  DeviceState& state(int ordinal) {
    if (ordinal < 0 || ordinal >= count())
      throw Error(ErrorCode::invalid_argument,
                  "device ordinal " + std::to_string(ordinal) + " out of range: " +
                      std::to_string(count()) + " CUDA device(s) present");
    DeviceState& s = *states_[std::size_t(ordinal)];
    std::call_once(s.once, [&] { initialise(ordinal, &s); });
    return s;
  }

 private:
  Devices() {
    int n = 0;
    driver::check(driver::api().cuDeviceGetCount(&n), "cuDeviceGetCount");
    for (int i = 0; i < n; ++i) states_.push_back(std::make_unique<DeviceState>());
  }

  static int attribute(driver::CUdevice device, int which, const char* name) {
    int value = 0;
    driver::check(driver::api().cuDeviceGetAttribute(&value, which, device),
                  (std::string("cuDeviceGetAttribute(") + name + ")").c_str());
    return value;
  }

  static void initialise(int ordinal, DeviceState* s) {
    const driver::Api& api = driver::api();
    driver::CUdevice device = 0;
    driver::check(api.cuDeviceGet(&device, ordinal), "cuDeviceGet");
    driver::check(api.cuDevicePrimaryCtxRetain(&s->context, device), "cuDevicePrimaryCtxRetain");
    DeviceInfo& info = s->info;
    info.ordinal = ordinal;
    char name[kDeviceNameBytes] = {};
    driver::check(api.cuDeviceGetName(name, int(sizeof(name)), device), "cuDeviceGetName");
    info.name = name;
    using namespace driver;
    info.cc_major = attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "COMPUTE_CAPABILITY_MAJOR");
    info.cc_minor = attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "COMPUTE_CAPABILITY_MINOR");
    info.sm_count = attribute(device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "MULTIPROCESSOR_COUNT");
    info.shared_per_block_optin = std::size_t(attribute(
        device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"));
    info.shared_per_sm = std::size_t(attribute(
        device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"));
    info.registers_per_sm = attribute(device, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR,
                                      "MAX_REGISTERS_PER_MULTIPROCESSOR");
    int version = 0;
    driver::check(api.cuDriverGetVersion(&version), "cuDriverGetVersion");
    info.driver_version = std::to_string(version / kDriverMajorScale) + "." +
                          std::to_string((version % kDriverMajorScale) / kDriverMinorScale);
  }

  std::vector<std::unique_ptr<DeviceState>> states_;
};

}  // namespace

std::string DeviceInfo::arch() const {
  if (cc_major == kHopperMajor && cc_minor == kHopperMinor) return "sm_90a";
  return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
}

int device_count() {
  driver::api();  // throws with the reason when there is no driver or device
  return Devices::instance().count();
}

const DeviceInfo& device_info(int ordinal) {
  driver::api();
  return Devices::instance().state(ordinal).info;
}

void use_device(int ordinal) {
  const driver::Api& api = driver::api();
  driver::CUcontext wanted = Devices::instance().state(ordinal).context;
  driver::CUcontext current = nullptr;
  driver::check(api.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current != wanted) driver::check(api.cuCtxSetCurrent(wanted), "cuCtxSetCurrent");
}

int current_device() {
  const driver::Api& api = driver::api();
  driver::CUcontext current = nullptr;
  driver::check(api.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (!current) {
    use_device(0);
    return 0;
  }
  driver::CUdevice device = 0;
  driver::check(api.cuCtxGetDevice(&device), "cuCtxGetDevice");
  return device;
}

int pointer_device(const void* ptr) {
  // No driver: nothing can be device memory.
  if (!ptr || !driver::status().ok) return -1;
  int ordinal = -1;
  driver::CUresult result = driver::api().cuPointerGetAttribute(
      &ordinal, driver::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
      driver::CUdeviceptr(reinterpret_cast<std::uintptr_t>(ptr)));
  // Plain host memory is unknown to the driver (CUDA_ERROR_INVALID_VALUE);
  // whatever the driver cannot place on a device is not device memory to us.
  return result == driver::CUDA_SUCCESS ? ordinal : -1;
}

}  // namespace flashgen::cuda
