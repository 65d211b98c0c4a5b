// dlopen/dlsym with the error text kept, so "library missing" reaches the
// caller as a reason rather than a crash at load time.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "flashgen/flashgen.hpp"

namespace flashgen::cuda {

class DynamicLibrary {
 public:
  // Opens the first candidate that loads; `attempts` collects "name: dlerror"
  // for each one that did not, for the caller's message.
  static DynamicLibrary open_first(const std::vector<std::string>& candidates,
                                   std::string* attempts);
  bool loaded() const { return handle_ != nullptr; }
  const std::string& name() const { return name_; }
  // True when the process held the library before this open (e.g. a
  // framework loaded it), so the search order did not choose it.
  bool was_loaded() const { return was_loaded_; }

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
  bool was_loaded_ = false;
};

// What loading a library's API gives: its function pointers and the status
// (`ok`, or the reason the API is not there), as load_once keeps it.
template <class Api, class Status>
struct LoadedApi {
  Api api{};
  Status status;
};

// Resolves `symbol` of `library` into `slot`; records the first missing one
// in `missing`, so that one message can name it after every symbol is tried.
template <class F>
void resolve(const DynamicLibrary& library, const char* symbol, F& slot, std::string* missing) {
  slot = library.find_as<F>(symbol);
  if (!slot && missing->empty()) *missing = symbol;
}

// A library's API, loaded by `Load` on first use from any thread and kept
// until exit (never destroyed: its function pointers outlive every caller).
// Loaded must have `status.ok`, `status.reason` and `api`.
template <class Loaded, Loaded (*Load)()>
const Loaded& load_once() {
  static std::once_flag once;
  static Loaded* instance = nullptr;
  std::call_once(once, [] { instance = new Loaded(Load()); });
  return *instance;
}

// The API of a loaded library, or Error(unsupported) with the reason it is not there.
template <class Loaded>
const auto& api_or_throw(const Loaded& loaded) {
  if (!loaded.status.ok) throw Error(ErrorCode::unsupported, loaded.status.reason);
  return loaded.api;
}

}  // namespace flashgen::cuda
