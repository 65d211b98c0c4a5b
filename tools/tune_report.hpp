// What `flashgen tune` shows: a progress bar on stderr (candidates done of
// the planned total, elapsed time, time left), and per configuration one
// row per kernel kind on stdout: the default's time, the winner's, the gain,
// every candidate that gave wrong results, and on request every candidate
// timed.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "tune/tuner.hpp"

namespace flashgen::cli {

// Progress over weighted work units (planned seconds: a candidate weighs its
// timed calls at a planning rate, a kind's pruning its compiles), so the time
// left accounts for large head dimensions costing more than small ones.
class TuneProgress {
 public:
  explicit TuneProgress(double planned_weight);

  void set_label(const std::string& label);  // "bf16 D=128 causal=0 backward_query"
  void replan(double weight_delta);          // a kind has fewer (or more) candidates than planned
  void advance(double weight, int candidates = 1);
  void clear() const;  // erase the bar before printing to stdout

  double elapsed_s() const;
  // Seconds left at the rate so far; < 0 before the first unit is done.
  double remaining_s() const;

 private:
  void draw() const;

  std::chrono::steady_clock::time_point start_;
  double planned_ = 0, done_ = 0;
  int candidates_done_ = 0;
  std::string label_;
  bool terminal_ = false;
  mutable std::chrono::steady_clock::time_point last_line_{};  // of a log line
};

// "1h02m", "12m40s", "35s".
std::string duration_text(double seconds);

// The configuration's header and one line per kind; with list_timed, under
// each kind every timed candidate, fastest first.
void print_configuration(const std::string& title, const std::vector<KindResult>& results,
                         bool list_timed = false);

}  // namespace flashgen::cli
