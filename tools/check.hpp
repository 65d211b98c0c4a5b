// The correctness rule of the commands, against the fp64 reference of
// cpu/reference.hpp, per output X in (O, LSE) and (dQ, dK, dV):
//     max |X - ref| <= 2 · max |X_naive - ref| + atol,  atol = 2e-5 · max(1, max |ref|)
// where X_naive is the naive computation in the storage dtype (FlashAttention's
// rule; the slack matches the test suite's). NaN never passes.
//
// The reference costs O(N²·D) per head in fp64, so large problems are checked
// on a subset: the first `batches` batches and the first `kv_heads` key/value
// heads with the query heads of their groups (dK and dV sum over the group, so
// a group is the smallest subset whose gradients are complete).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/problem.hpp"
#include "workload.hpp"

namespace flashgen::cli {

struct OutputCheck {
  std::string name;           // "O", "LSE", "dQ", "dK", "dV"
  double error = 0;           // max |X - ref|  (NaN when X holds a NaN)
  double naive_error = 0;     // max |X_naive - ref|
  double bound = 0;           // 2 · naive_error + atol
  bool pass = false;
};

struct CheckReport {
  std::string subset;  // "batch 0, kv head 0 (query heads 0..3)"
  std::vector<OutputCheck> outputs;
  bool pass() const;
  // The first failing output as "dK max|out-ref| 3.1e-02 > bound 1.2e-02", or "".
  std::string first_failure() const;
};

// `w` holds the outputs of a forward (and, when `backward`, of a backward)
// for problem `p`. threads: for the reference (<= 0: all).
CheckReport check_outputs(const Workload& w, const Problem& p, bool backward,
                          std::int64_t batches, std::int64_t kv_heads, int threads);

void print_check(const CheckReport& report, std::FILE* stream);

}  // namespace flashgen::cli
