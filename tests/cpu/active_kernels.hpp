// Runs the CPU backend on one table of tile kernels for a scope, whatever the
// dispatcher chose (tests run every instruction set this machine has).
#pragma once

#include "cpu/isa_dispatch.hpp"

namespace flashgen::testing {

class ActiveKernels {
 public:
  explicit ActiveKernels(const cpu::TileKernels& kernels) : saved_(cpu::active_tile_kernels()) {
    cpu::set_active_tile_kernels(kernels);
  }
  ~ActiveKernels() { cpu::set_active_tile_kernels(saved_); }
  ActiveKernels(const ActiveKernels&) = delete;
  ActiveKernels& operator=(const ActiveKernels&) = delete;

 private:
  const cpu::TileKernels& saved_;
};

}  // namespace flashgen::testing
