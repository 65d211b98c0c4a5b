#include "tune_report.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace flashgen::cli {
namespace {

constexpr int kBarWidth = 24;
constexpr std::chrono::seconds kLogInterval{15};
constexpr double kTera = 1e12;

double tflops(double flops, double ms) { return ms > 0 ? flops / (ms * 1e-3) / kTera : 0.0; }

// "spills", "shared memory", "compile error", "invalid": the pruning reasons by kind.
std::string reason_class(const std::string& reason) {
  if (reason.rfind("spills", 0) == 0) return "spill";
  if (reason.rfind("shared memory", 0) == 0) return "shared memory";
  if (reason.rfind("compile error", 0) == 0) return "compile error";
  return "invalid";
}

}  // namespace

TuneProgress::TuneProgress(double planned_weight)
    : start_(std::chrono::steady_clock::now()),
      planned_(planned_weight),
      terminal_(isatty(STDERR_FILENO) != 0) {}

void TuneProgress::set_label(const std::string& label) {
  const bool changed = label != label_;
  label_ = label;
  if (changed) last_line_ = {};  // a log gets a line per new label
  draw();
}

void TuneProgress::replan(double weight_delta) { planned_ += weight_delta; }

void TuneProgress::advance(double weight, int candidates) {
  done_ += weight;
  candidates_done_ += candidates;
  draw();
}

double TuneProgress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

double TuneProgress::remaining_s() const {
  if (done_ <= 0) return -1;
  return elapsed_s() * std::max(0.0, planned_ - done_) / done_;
}

void TuneProgress::draw() const {
  // In a log (not a terminal), at most one line per kLogInterval.
  const auto now = std::chrono::steady_clock::now();
  if (!terminal_ && last_line_ != std::chrono::steady_clock::time_point{} &&
      now - last_line_ < kLogInterval)
    return;
  last_line_ = now;
  const double fraction = planned_ > 0 ? std::min(1.0, done_ / planned_) : 0.0;
  const int filled = static_cast<int>(std::lround(fraction * kBarWidth));
  const double left = remaining_s();
  const std::string bar = std::string(filled, '#') + std::string(kBarWidth - filled, '.');
  // On a terminal the line is rewritten in place; in a log, one line per update.
  std::fprintf(stderr, "%s[%s] %3.0f%% %d candidates  %s  elapsed %s  left %s%s",
               terminal_ ? "\r\033[K" : "", bar.c_str(), 100 * fraction, candidates_done_,
               label_.c_str(), duration_text(elapsed_s()).c_str(),
               left < 0 ? "?" : duration_text(left).c_str(), terminal_ ? "" : "\n");
  std::fflush(stderr);
}

void TuneProgress::clear() const {
  if (terminal_) std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

std::string duration_text(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char text[32];
  if (s >= 3600)
    std::snprintf(text, sizeof(text), "%ldh%02ldm", s / 3600, (s / 60) % 60);
  else if (s >= 60)
    std::snprintf(text, sizeof(text), "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(text, sizeof(text), "%lds", s);
  return text;
}

// Every timed candidate of a kind, fastest first ("cut": stopped after a
// few calls, clearly slower than the best so far).
static void print_timed(const KindResult& r) {
  std::vector<const CandidateOutcome*> timed;
  for (const CandidateOutcome& o : r.outcomes)
    if (o.ms >= 0) timed.push_back(&o);
  std::stable_sort(
      timed.begin(), timed.end(),
      [](const CandidateOutcome* a, const CandidateOutcome* b) { return a->ms < b->ms; });
  for (const CandidateOutcome* o : timed)
    std::printf("    %9.3f ms %8.1f TFLOP/s  %s%s%s\n", o->ms, tflops(r.flops, o->ms),
                o->tuning.to_string().c_str(), o->is_default ? "  (default)" : "",
                o->cut ? "  (cut)" : "");
}

void print_configuration(const std::string& title, const std::vector<KindResult>& results,
                         bool list_timed) {
  std::printf("\n%s\n", title.c_str());
  std::printf("  %-19s %-40s %9s %8s   %-40s %9s %8s %7s  %s\n", "kind", "default", "ms", "TFLOP/s",
              "winner", "ms", "TFLOP/s", "gain", "timed / space (pruned)");
  for (const KindResult& r : results) {
    if (!r.ok()) {
      std::printf("  %-19s FAILED: %s\n", to_string(r.kind), r.error.c_str());
      continue;
    }
    const double gain = r.default_ms > 0 && r.best_ms > 0 ? r.default_ms / r.best_ms - 1 : 0;
    int timed = 0;
    for (const CandidateOutcome& o : r.outcomes) timed += o.ms >= 0 ? 1 : 0;
    std::map<std::string, int> pruned;
    for (const Rejected& p : r.pruned) ++pruned[reason_class(p.reason)];
    std::string pruned_text;
    for (const auto& [reason, count] : pruned)
      pruned_text += (pruned_text.empty() ? "" : ", ") + std::to_string(count) + " " + reason;
    std::printf("  %-19s %-40s %9.3f %8.1f   %-40s %9.3f %8.1f %+6.1f%%  %d / %d (%s)\n",
                to_string(r.kind), r.default_tuning.to_string().c_str(), r.default_ms,
                tflops(r.flops, r.default_ms),
                r.best == r.default_tuning ? "= default" : r.best.to_string().c_str(), r.best_ms,
                tflops(r.flops, r.best_ms), 100 * gain, timed, r.space,
                pruned_text.empty() ? "none" : pruned_text.c_str());
    // Wrong results are never silent: each is a defect of the kernel for that tuning.
    for (const CandidateOutcome& o : r.outcomes)
      if (!o.rejected.empty())
        std::printf("    dropped %s: %s\n", o.tuning.to_string().c_str(), o.rejected.c_str());
    if (list_timed) print_timed(r);
  }
  std::fflush(stdout);
}

}  // namespace flashgen::cli
