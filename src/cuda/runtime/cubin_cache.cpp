#include "cuda/runtime/cubin_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cuda/runtime/sha256.hpp"

namespace flashgen::cuda {
namespace {

// File layout (host byte order; the cache never leaves the machine):
//   magic[8]            "FGCUBIN" + format version byte
//   u64 key_bytes, u64 log_bytes, u64 cubin_bytes
//   i32 registers, spill_store, spill_load, stack_frame, static_shared
//   key text, log, cubin
//   sha256[32]          over everything before it
constexpr char kMagic[8] = {'F', 'G', 'C', 'U', 'B', 'I', 'N', 1};
constexpr std::size_t kLengthFields = 3;
constexpr std::size_t kResourceFields = 5;
constexpr std::size_t kHeaderBytes =
    sizeof(kMagic) + kLengthFields * sizeof(std::uint64_t) + kResourceFields * sizeof(std::int32_t);
constexpr std::size_t kChecksumBytes = 32;
constexpr char kElfMagic[4] = {0x7f, 'E', 'L', 'F'};
// Larger files are not kernels; refuse to read them into memory.
constexpr std::uintmax_t kMaxFileBytes = std::uintmax_t(1) << 30;

template <class T>
void put(std::string* out, T value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

template <class T>
T get(const std::string& in, std::size_t* at) {
  T value;
  std::memcpy(&value, in.data() + *at, sizeof(T));
  *at += sizeof(T);
  return value;
}

std::string checksum(const char* data, std::size_t bytes) {
  Sha256 hash;
  hash.update(data, bytes);
  auto digest = hash.digest();
  return std::string(reinterpret_cast<const char*>(digest.data()), digest.size());
}

bool has_elf_magic(const std::string& cubin) {
  return cubin.size() >= sizeof(kElfMagic) &&
         std::memcmp(cubin.data(), kElfMagic, sizeof(kElfMagic)) == 0;
}

std::optional<std::string> read_file(const std::string& path) {
  std::error_code error;
  std::uintmax_t size = std::filesystem::file_size(path, error);
  if (error || size > kMaxFileBytes) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return std::move(bytes).str();
}

bool write_all(int fd, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += std::size_t(n);
  }
  return true;
}

}  // namespace

KernelKey make_key(const std::string& text) { return {text, sha256_hex(text)}; }

std::string encode_cache_file(const KernelKey& key, const CubinArtifact& artifact) {
  std::string out;
  out.reserve(kHeaderBytes + key.text.size() + artifact.log.size() + artifact.cubin.size() +
              kChecksumBytes);
  out.append(kMagic, sizeof(kMagic));
  put<std::uint64_t>(&out, key.text.size());
  put<std::uint64_t>(&out, artifact.log.size());
  put<std::uint64_t>(&out, artifact.cubin.size());
  const KernelResources& r = artifact.resources;
  put<std::int32_t>(&out, r.registers);
  put<std::int32_t>(&out, r.spill_store_bytes);
  put<std::int32_t>(&out, r.spill_load_bytes);
  put<std::int32_t>(&out, r.stack_frame_bytes);
  put<std::int32_t>(&out, r.static_shared_bytes);
  out += key.text;
  out += artifact.log;
  out += artifact.cubin;
  out += checksum(out.data(), out.size());
  return out;
}

std::optional<CubinArtifact> decode_cache_file(const std::string& bytes, const KernelKey& key) {
  if (bytes.size() < kHeaderBytes + kChecksumBytes) return std::nullopt;
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) return std::nullopt;
  std::size_t at = sizeof(kMagic);
  std::uint64_t key_bytes = get<std::uint64_t>(bytes, &at);
  std::uint64_t log_bytes = get<std::uint64_t>(bytes, &at);
  std::uint64_t cubin_bytes = get<std::uint64_t>(bytes, &at);
  // Compare without summing first, so huge garbage lengths cannot overflow.
  const std::uint64_t payload = bytes.size() - kHeaderBytes - kChecksumBytes;
  if (key_bytes > payload || log_bytes > payload - key_bytes ||
      cubin_bytes != payload - key_bytes - log_bytes)
    return std::nullopt;
  const std::size_t body = bytes.size() - kChecksumBytes;
  if (checksum(bytes.data(), body) != bytes.substr(body)) return std::nullopt;
  CubinArtifact artifact;
  KernelResources& r = artifact.resources;
  r.registers = get<std::int32_t>(bytes, &at);
  r.spill_store_bytes = get<std::int32_t>(bytes, &at);
  r.spill_load_bytes = get<std::int32_t>(bytes, &at);
  r.stack_frame_bytes = get<std::int32_t>(bytes, &at);
  r.static_shared_bytes = get<std::int32_t>(bytes, &at);
  // A digest collision or a hand-copied file: the key must match exactly.
  if (bytes.compare(at, key_bytes, key.text) != 0 || key_bytes != key.text.size())
    return std::nullopt;
  at += key_bytes;
  artifact.log = bytes.substr(at, log_bytes);
  at += log_bytes;
  artifact.cubin = bytes.substr(at, cubin_bytes);
  if (!has_elf_magic(artifact.cubin)) return std::nullopt;
  return artifact;
}

std::string CubinCache::path_for(const KernelKey& key) const {
  if (directory_.empty()) return "";
  return (std::filesystem::path(directory_) / (key.digest + ".cubin")).string();
}

std::optional<CubinArtifact> CubinCache::load(const KernelKey& key) const {
  std::string path = path_for(key);
  if (path.empty()) return std::nullopt;
  std::optional<std::string> bytes = read_file(path);
  if (!bytes) return std::nullopt;
  return decode_cache_file(*bytes, key);
}

bool CubinCache::store(const KernelKey& key, const CubinArtifact& artifact) const {
  std::string path = path_for(key);
  if (path.empty()) return false;
  std::error_code error;
  std::filesystem::create_directories(directory_, error);
  if (error) return false;
  // mkstemp gives a name no other thread or process uses; the same directory
  // keeps rename() on one file system, hence atomic.
  std::string temp = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(temp.data());
  if (fd < 0) return false;
  constexpr mode_t kReadableByAll = 0644;
  ::fchmod(fd, kReadableByAll);
  bool ok = write_all(fd, encode_cache_file(key, artifact));
  ok = (::close(fd) == 0) && ok;
  if (ok) ok = ::rename(temp.c_str(), path.c_str()) == 0;
  if (!ok) ::unlink(temp.c_str());
  return ok;
}

CubinArtifact CubinCache::load_or_build(const KernelKey& key,
                                        const std::function<CubinArtifact()>& build,
                                        bool* from_disk) const {
  if (std::optional<CubinArtifact> cached = load(key)) {
    if (from_disk) *from_disk = true;
    return std::move(*cached);
  }
  if (from_disk) *from_disk = false;
  CubinArtifact artifact = build();
  store(key, artifact);  // best effort: a failed store only costs a rebuild later
  return artifact;
}

}  // namespace flashgen::cuda
