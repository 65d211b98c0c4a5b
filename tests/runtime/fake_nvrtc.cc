// A stand-in libnvrtc for the search-order tests: it exports the symbols
// flashgen resolves and reports the version it was built with, so a test can
// tell which of several copies was loaded. It compiles nothing.
#include <cstddef>

extern "C" {

int nvrtcVersion(int* major, int* minor) {
  *major = FAKE_NVRTC_MAJOR;
  *minor = FAKE_NVRTC_MINOR;
  return 0;
}
const char* nvrtcGetErrorString(int) { return "fake NVRTC"; }
int nvrtcCreateProgram(void**, const char*, const char*, int, const char* const*,
                       const char* const*) {
  return 1;
}
int nvrtcDestroyProgram(void**) { return 0; }
int nvrtcCompileProgram(void*, int, const char* const*) { return 1; }
int nvrtcGetProgramLogSize(void*, std::size_t*) { return 1; }
int nvrtcGetProgramLog(void*, char*) { return 1; }
int nvrtcGetCUBINSize(void*, std::size_t*) { return 1; }
int nvrtcGetCUBIN(void*, char*) { return 1; }
}
