// The user mask (Problem::mask) compiled for the CPU backend: a postfix
// program over a stack of lane vectors, run for up to a tile row of pairs at
// a time (one query and a run of keys, or one key and a run of queries).
// Each instruction is one tight loop over the lanes, so the per-pair cost is
// a few vector operations rather than a walk of the tree per pair; values
// that do not vary along the run (b, h, the fixed index and what is computed
// from them alone, e.g. doc[q_idx]) stay scalars.
//
// && || and ?: evaluate both sides for every lane; an error a lane meets
// (index outside [0, size), integer division by zero) is carried with it as
// a poison flag that these operators drop where C would not have evaluated
// the side. A lane still poisoned at the end is re-evaluated by the node-by-
// node evaluator (common/mask_expression.hpp), which throws the worded error.
#pragma once

#include <cstdint>
#include <vector>

#include "common/problem.hpp"

namespace flashgen::cpu {

// Pairs per run of the program: a score tile's row at most.
inline constexpr int kMaskLanes = 256;

class MaskProgram {
 public:
  // p.mask must be set.
  explicit MaskProgram(const Problem& p);

  // attend[i] = 1 when the pair (batch, head, query0 + query_step · i,
  // key0 + key_step · i) is attended, else 0, for i < n; `batch` is the
  // problem's batch entry. Returns how many are attended. Throws
  // flashgen::Error(invalid_argument) for a pair whose evaluation faults.
  int evaluate(std::int64_t batch, std::int64_t head, std::int64_t query0, std::int64_t query_step,
               std::int64_t key0, std::int64_t key_step, int n, std::uint8_t* attend) const;

  enum class Code : std::uint8_t {
    push_integer, push_float, push_variable,  // variable: Instruction::integer = 0 b, 1 h, 2 q, 3 kv
    index,                                    // pops an integer index, pushes the element
    to_float, truth,                          // convert the top: int64 -> float; float -> 0/1
    negate_i, negate_f, logical_not,          // logical_not takes an integer (truth first)
    add_i, subtract_i, multiply_i, divide_i, modulo_i, add_f, subtract_f, multiply_f, divide_f,
    less_i, less_equal_i, greater_i, greater_equal_i, equal_i, not_equal_i,
    less_f, less_equal_f, greater_f, greater_equal_f, equal_f, not_equal_f,
    logical_and, logical_or,  // integer (truth) operands
    select,                   // integer condition; Instruction::integer = 1: float branches
  };
  struct Instruction {
    Code code;
    std::int64_t integer = 0;
    float floating = 0.0f;
    int array = -1;  // index: which array
  };

 private:
  int chunk(const std::int64_t (&base)[4], const std::int64_t (&step)[4], int n,
            std::uint8_t* attend) const;

  const Problem& p_;
  std::vector<Instruction> code_;
  int depth_ = 0;  // stack slots the program needs
};

// scores[c] = kMaskedScore where attend[c] == 0, for c in [begin, end): the
// softmax steps then give those pairs P = 0 (the scores must be the score
// modifier's, in natural-log units: ScoreModifier is active with a mask).
void mask_scores(float* scores, const std::uint8_t* attend, int begin, int end);

}  // namespace flashgen::cpu
