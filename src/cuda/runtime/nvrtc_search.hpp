// Where libnvrtc is looked for, in order, and which kind of install each
// place is, so `flashgen info` can say where NVRTC came from.
#pragma once

#include <string>
#include <vector>

namespace flashgen::cuda::nvrtc {

// One file (or bare soname) to try with dlopen, and the install it belongs to.
struct LibraryCandidate {
  std::string path;
  std::string origin;  // "pip wheel", "CUDA toolkit" or "loader path"
};

// What the search depends on, gathered once from the process (or made up by a test).
struct SearchRoots {
  std::string own_directory;  // the folder of libflashgen.so or of the executable holding it
  std::string cuda_home;      // $CUDA_HOME
  std::string cuda_path;      // $CUDA_PATH
};

SearchRoots search_roots();

// The candidates, first to try first:
//   1. pip wheels beside the package: nvidia-cuda-nvrtc (nvidia/cu13/lib) and
//      nvidia-cuda-nvrtc-cu12 (nvidia/cuda_nvrtc/lib) under an ancestor of
//      own_directory (a wheel installs flashgen/_lib/lib/ three levels
//      below site-packages),
//   2. a CUDA toolkit: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda,
//   3. the loader's own search (LD_LIBRARY_PATH, ldconfig) by soname.
// Newest major version first within each place. Only pip folders that exist
// are listed, so the list stays short in a message.
std::vector<LibraryCandidate> candidates(const SearchRoots& roots);

}  // namespace flashgen::cuda::nvrtc
