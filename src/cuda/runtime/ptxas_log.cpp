#include "cuda/runtime/ptxas_log.hpp"

#include <cctype>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace flashgen::cuda {
namespace {

struct EntryBlock {
  std::string name;
  std::vector<std::string> lines;
};

// Text between the first pair of single quotes after `marker`, or "".
std::string quoted_after(const std::string& line, const std::string& marker) {
  std::size_t at = line.find(marker);
  if (at == std::string::npos) return "";
  std::size_t open = line.find('\'', at + marker.size());
  if (open == std::string::npos) return "";
  std::size_t close = line.find('\'', open + 1);
  if (close == std::string::npos) return "";
  return line.substr(open + 1, close - open - 1);
}

// The integer written just before `suffix` ("400 bytes stack frame" -> 400);
// false when `suffix` is absent or not preceded by a number.
bool number_before(const std::string& line, const std::string& suffix, int* out) {
  std::size_t at = line.find(suffix);
  if (at == std::string::npos) return false;
  std::size_t end = at;
  while (end > 0 && line[end - 1] == ' ') --end;
  std::size_t begin = end;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(line[begin - 1]))) --begin;
  if (begin == end) return false;
  *out = std::atoi(line.substr(begin, end - begin).c_str());
  return true;
}

// The integer written just after `prefix` ("Used 32 registers" -> 32).
bool number_after(const std::string& line, const std::string& prefix, int* out) {
  std::size_t at = line.find(prefix);
  if (at == std::string::npos) return false;
  std::size_t begin = at + prefix.size();
  std::size_t end = begin;
  while (end < line.size() && std::isdigit(static_cast<unsigned char>(line[end]))) ++end;
  if (begin == end) return false;
  *out = std::atoi(line.substr(begin, end - begin).c_str());
  return true;
}

std::vector<EntryBlock> split_entries(const std::string& log) {
  const std::string marker = "Compiling entry function";
  std::vector<EntryBlock> blocks;
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(marker) != std::string::npos) {
      blocks.push_back({quoted_after(line, marker), {}});
      continue;
    }
    if (!blocks.empty()) blocks.back().lines.push_back(line);
  }
  return blocks;
}

void read_block(const EntryBlock& block, KernelResources* out) {
  const std::string properties = "Function properties for ";
  // Stack/spill lines follow a "Function properties for <f>" line; they
  // count only when <f> is the entry itself.
  bool in_entry_properties = true;
  for (const std::string& line : block.lines) {
    std::size_t at = line.find(properties);
    if (at != std::string::npos) {
      std::string function = line.substr(at + properties.size());
      while (!function.empty() && (function.back() == ' ' || function.back() == '\r'))
        function.pop_back();
      in_entry_properties = function == block.name;
      continue;
    }
    if (in_entry_properties) {
      number_before(line, "bytes stack frame", &out->stack_frame_bytes);
      number_before(line, "bytes spill stores", &out->spill_store_bytes);
      number_before(line, "bytes spill loads", &out->spill_load_bytes);
    }
    if (number_after(line, "Used ", &out->registers)) {
      number_before(line, "bytes smem", &out->static_shared_bytes);
      in_entry_properties = true;
    }
  }
}

}  // namespace

bool parse_ptxas_log(const std::string& log, const std::string& entry, KernelResources* out) {
  *out = KernelResources{};
  std::vector<EntryBlock> blocks = split_entries(log);
  for (const EntryBlock& block : blocks) {
    if (block.name == entry) {
      read_block(block, out);
      return true;
    }
  }
  return false;
}

std::vector<std::string> ptxas_entry_names(const std::string& log) {
  std::vector<std::string> names;
  for (const EntryBlock& block : split_entries(log)) names.push_back(block.name);
  return names;
}

}  // namespace flashgen::cuda
