// The on-disk kernel cache: one file per kernel key holding the cubin, the
// ptxas report and the parsed resources. Needs neither a GPU nor NVRTC, so it
// is tested on its own.
//
// Contract (readers never see a partial file, nothing here is ever fatal):
// - a file is written to a unique temporary name in the same directory and
//   rename()d over the final name, which is atomic on POSIX file systems, so
//   concurrent builders of one key each publish a whole file and the last
//   one wins;
// - a file is used only when its magic, lengths, checksum, key text and ELF
//   magic all check out; a missing, truncated, stale or corrupt file is
//   rebuilt and rewritten;
// - a directory that cannot be created or written costs a rebuild each time,
//   not an error.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "cuda/runtime/runtime.hpp"

namespace flashgen::cuda {

// Everything that determines a kernel binary, as readable text, and its
// SHA-256 (the file name stem).
struct KernelKey {
  std::string text;
  std::string digest;  // 64 hex characters
};
KernelKey make_key(const std::string& text);

// What compiling one kernel produces and the cache keeps.
struct CubinArtifact {
  std::string cubin;  // ELF image for cuModuleLoadData
  KernelResources resources;
  std::string log;  // the NVRTC/ptxas report
};

class CubinCache {
 public:
  // An empty directory disables the disk cache (every call builds).
  explicit CubinCache(std::string directory) : directory_(std::move(directory)) {}

  // The cached artifact for `key`, or build() stored (best effort) and
  // returned. *from_disk (when given) says which. Exceptions from build()
  // propagate; no file is written then.
  CubinArtifact load_or_build(const KernelKey& key, const std::function<CubinArtifact()>& build,
                              bool* from_disk = nullptr) const;

  // The valid cached artifact for `key`, or nothing.
  std::optional<CubinArtifact> load(const KernelKey& key) const;
  // Publishes `artifact` atomically; false when the directory is unusable.
  bool store(const KernelKey& key, const CubinArtifact& artifact) const;

  std::string path_for(const KernelKey& key) const;  // "" when disabled
  const std::string& directory() const { return directory_; }

 private:
  std::string directory_;
};

// File encoding, exposed for tests.
std::string encode_cache_file(const KernelKey& key, const CubinArtifact& artifact);
std::optional<CubinArtifact> decode_cache_file(const std::string& bytes, const KernelKey& key);

}  // namespace flashgen::cuda
