// dlopen/dlsym with the error text kept, so "library missing" reaches the
// caller as a reason rather than a crash at load time.
#pragma once

#include <string>
#include <vector>

namespace flashgen::cuda {

class DynamicLibrary {
 public:
  // Opens the first candidate that loads; `attempts` collects "name: dlerror"
  // for each one that did not, for the caller's message.
  static DynamicLibrary open_first(const std::vector<std::string>& candidates,
                                   std::string* attempts);
  bool loaded() const { return handle_ != nullptr; }
  const std::string& name() const { return name_; }

  // Address of `symbol`, or null when the library does not export it.
  void* find(const char* symbol) const;
  // Address of `symbol` cast to F; null when missing.
  template <class F>
  F find_as(const char* symbol) const {
    return reinterpret_cast<F>(find(symbol));
  }

 private:
  void* handle_ = nullptr;  // never dlclose'd: function pointers outlive every caller
  std::string name_;
};

}  // namespace flashgen::cuda
