// The mask program's interpreter (mask_program.hpp says how it evaluates).
// One instruction at a time over all lanes of a run; a slot whose lanes all
// hold one value computes it once until it meets a varying one.
#include <algorithm>
#include <limits>
#include <string>

#include "cpu/mask_program.hpp"

namespace flashgen::cpu {
namespace {

using Code = MaskProgram::Code;

// One stack slot: int64 or float lanes (by the code's static type), whether
// all lanes hold one value (lane 0), and poison flags when any lane has one.
struct Slot {
  std::int64_t* i;
  float* f;
  std::uint8_t* poison;
  bool uniform, poisoned;
};

struct Stack {
  std::vector<std::int64_t> ints;
  std::vector<float> floats;
  std::vector<std::uint8_t> poison;
  std::vector<Slot> slots;
  void prepare(int depth) {
    if (static_cast<int>(slots.size()) >= depth) return;
    ints.resize(static_cast<std::size_t>(depth) * kMaskLanes);
    floats.resize(ints.size());
    poison.resize(ints.size());
    slots.resize(depth);
    for (int s = 0; s < depth; ++s)
      slots[s] = {ints.data() + s * kMaskLanes, floats.data() + s * kMaskLanes, poison.data() + s * kMaskLanes,
                  true, false};
  }
};

// Makes a uniform slot hold its value in every lane.
void spread(Slot& s, int n, bool floating) {
  if (!s.uniform) return;
  if (floating) std::fill(s.f + 1, s.f + n, s.f[0]);
  else std::fill(s.i + 1, s.i + n, s.i[0]);
  if (s.poisoned) std::fill(s.poison + 1, s.poison + n, s.poison[0]);
  s.uniform = false;
}

void clear_poison(Slot& s, int n) {
  if (!s.poisoned) std::fill(s.poison, s.poison + (s.uniform ? 1 : n), 0);
  s.poisoned = true;
}

// Both slots uniform, or both spread; returns the lanes to compute.
int match(Slot& a, Slot& b, int n, bool floating) {
  if (a.uniform != b.uniform) {
    spread(a, n, floating);
    spread(b, n, floating);
  }
  return a.uniform ? 1 : n;
}

// a's poison |= b's, lane by lane.
void merge_poison(Slot& a, const Slot& b, int m) {
  if (!b.poisoned) return;
  clear_poison(a, m);
  for (int l = 0; l < m; ++l) a.poison[l] |= b.poison[l];
}

template <class F>
void integers(Slot& a, const Slot& b, int m, F f) {
  for (int l = 0; l < m; ++l) a.i[l] = f(a.i[l], b.i[l]);
}
template <class F>
void floats(Slot& a, const Slot& b, int m, F f) {
  for (int l = 0; l < m; ++l) a.f[l] = f(a.f[l], b.f[l]);
}
template <class F>
void compare_floats(Slot& a, const Slot& b, int m, F f) {
  for (int l = 0; l < m; ++l) a.i[l] = f(a.f[l], b.f[l]) ? 1 : 0;
}

std::int64_t wrap(std::uint64_t x) { return static_cast<std::int64_t>(x); }

// a / b or a % b; lanes that fault (b == 0, INT64_MIN / -1) get 0 and poison.
void divide(Slot& a, const Slot& b, int m, bool modulo) {
  std::uint8_t bad[kMaskLanes];
  bool fault = false;
  for (int l = 0; l < m; ++l) {
    const std::int64_t x = a.i[l], y = b.i[l];
    bad[l] = y == 0 || (x == std::numeric_limits<std::int64_t>::min() && y == -1);
    fault |= bad[l] != 0;
    const std::int64_t safe = bad[l] ? 1 : y;
    a.i[l] = bad[l] ? 0 : (modulo ? x % safe : x / safe);
  }
  if (!fault) return;
  clear_poison(a, m);
  for (int l = 0; l < m; ++l) a.poison[l] |= bad[l];
}

// array[index] for each lane; an index outside [0, size) reads nothing and poisons.
void read(Slot& t, const mask::ArrayData& a, int m) {
  std::uint8_t outside[kMaskLanes];
  bool fault = false;
  for (int l = 0; l < m; ++l) {
    const std::int64_t i = t.i[l];
    const bool inside = i >= 0 && i < a.size;
    outside[l] = !inside;
    fault |= !inside;
    const std::int64_t at = inside ? i * a.stride : 0;
    if (a.floating) t.f[l] = inside ? static_cast<const float*>(a.data)[at] : 0.0f;
    else t.i[l] = inside ? static_cast<const std::int32_t*>(a.data)[at] : 0;
  }
  if (!fault) return;
  clear_poison(t, m);
  for (int l = 0; l < m; ++l) t.poison[l] |= outside[l];
}

}  // namespace

int MaskProgram::chunk(const std::int64_t (&base)[4], const std::int64_t (&step)[4], int n,
                       std::uint8_t* attend) const {
  thread_local Stack stack;
  stack.prepare(depth_);
  Slot* s = stack.slots.data();
  int sp = 0;
  for (const Instruction& in : code_) {
    switch (in.code) {
      case Code::push_integer:
      case Code::push_float: {
        Slot& t = s[sp++];
        t.uniform = true, t.poisoned = false;
        t.i[0] = in.integer, t.f[0] = in.floating;
        break;
      }
      case Code::push_variable: {
        Slot& t = s[sp++];
        const int v = static_cast<int>(in.integer);
        t.poisoned = false;
        t.uniform = step[v] == 0;
        for (int l = 0; l < (t.uniform ? 1 : n); ++l) t.i[l] = base[v] + step[v] * l;
        break;
      }
      case Code::index: {
        Slot& t = s[sp - 1];
        read(t, p_.mask->arrays[in.array], t.uniform ? 1 : n);
        break;
      }
      default: break;
    }
    if (in.code <= Code::index) continue;
    Slot& t = s[sp - 1];
    const int m1 = t.uniform ? 1 : n;
    switch (in.code) {
      case Code::to_float: for (int l = 0; l < m1; ++l) t.f[l] = static_cast<float>(t.i[l]); continue;
      case Code::truth: for (int l = 0; l < m1; ++l) t.i[l] = t.f[l] != 0.0f; continue;
      case Code::negate_i:
        for (int l = 0; l < m1; ++l) t.i[l] = wrap(0ull - static_cast<std::uint64_t>(t.i[l]));
        continue;
      case Code::negate_f: for (int l = 0; l < m1; ++l) t.f[l] = -t.f[l]; continue;
      case Code::logical_not: for (int l = 0; l < m1; ++l) t.i[l] = t.i[l] == 0; continue;
      default: break;
    }
    if (in.code == Code::select) {
      Slot &c = s[sp - 3], &x = s[sp - 2], &y = s[sp - 1];
      const bool fl = in.integer != 0;
      if (!(c.uniform && x.uniform && y.uniform)) {
        spread(c, n, false), spread(x, n, fl), spread(y, n, fl);
      }
      const int m = c.uniform ? 1 : n;
      if (x.poisoned || y.poisoned) {  // the branch C evaluates brings its poison
        clear_poison(c, m);
        for (int l = 0; l < m; ++l)
          c.poison[l] |= c.i[l] != 0 ? (x.poisoned && x.poison[l]) : (y.poisoned && y.poison[l]);
      }
      if (fl) for (int l = 0; l < m; ++l) c.f[l] = c.i[l] != 0 ? x.f[l] : y.f[l];
      else for (int l = 0; l < m; ++l) c.i[l] = c.i[l] != 0 ? x.i[l] : y.i[l];
      sp -= 2;
      continue;
    }
    Slot &a = s[sp - 2], &b = s[sp - 1];
    const bool fl = in.code >= Code::add_f && in.code <= Code::divide_f;
    const bool compare_f = in.code >= Code::less_f && in.code <= Code::not_equal_f;
    const int m = match(a, b, n, fl || compare_f);
    --sp;
    if (in.code == Code::logical_and || in.code == Code::logical_or) {
      // b's poison counts only where C evaluates b: a true (&&), a false (||).
      const bool want = in.code == Code::logical_and;
      if (b.poisoned) {
        clear_poison(a, m);
        for (int l = 0; l < m; ++l) a.poison[l] |= ((a.i[l] != 0) == want) && b.poison[l];
      }
      if (want) integers(a, b, m, [](std::int64_t x, std::int64_t y) -> std::int64_t { return x != 0 && y != 0; });
      else integers(a, b, m, [](std::int64_t x, std::int64_t y) -> std::int64_t { return x != 0 || y != 0; });
      continue;
    }
    merge_poison(a, b, m);
    using I = std::int64_t;
    using U = std::uint64_t;
    switch (in.code) {
      case Code::add_i: integers(a, b, m, [](I x, I y) { return wrap(U(x) + U(y)); }); break;
      case Code::subtract_i: integers(a, b, m, [](I x, I y) { return wrap(U(x) - U(y)); }); break;
      case Code::multiply_i: integers(a, b, m, [](I x, I y) { return wrap(U(x) * U(y)); }); break;
      case Code::divide_i: divide(a, b, m, false); break;
      case Code::modulo_i: divide(a, b, m, true); break;
      case Code::add_f: floats(a, b, m, [](float x, float y) { return x + y; }); break;
      case Code::subtract_f: floats(a, b, m, [](float x, float y) { return x - y; }); break;
      case Code::multiply_f: floats(a, b, m, [](float x, float y) { return x * y; }); break;
      case Code::divide_f: floats(a, b, m, [](float x, float y) { return x / y; }); break;
      case Code::less_i: integers(a, b, m, [](I x, I y) -> I { return x < y; }); break;
      case Code::less_equal_i: integers(a, b, m, [](I x, I y) -> I { return x <= y; }); break;
      case Code::greater_i: integers(a, b, m, [](I x, I y) -> I { return x > y; }); break;
      case Code::greater_equal_i: integers(a, b, m, [](I x, I y) -> I { return x >= y; }); break;
      case Code::equal_i: integers(a, b, m, [](I x, I y) -> I { return x == y; }); break;
      case Code::not_equal_i: integers(a, b, m, [](I x, I y) -> I { return x != y; }); break;
      case Code::less_f: compare_floats(a, b, m, [](float x, float y) { return x < y; }); break;
      case Code::less_equal_f: compare_floats(a, b, m, [](float x, float y) { return x <= y; }); break;
      case Code::greater_f: compare_floats(a, b, m, [](float x, float y) { return x > y; }); break;
      case Code::greater_equal_f: compare_floats(a, b, m, [](float x, float y) { return x >= y; }); break;
      case Code::equal_f: compare_floats(a, b, m, [](float x, float y) { return x == y; }); break;
      case Code::not_equal_f: compare_floats(a, b, m, [](float x, float y) { return x != y; }); break;
      default: break;
    }
  }
  const Slot& r = s[0];
  if (r.poisoned) {
    for (int l = 0; l < n; ++l) {
      if (!r.poison[r.uniform ? 0 : l]) continue;
      // The node-by-node evaluator words the fault (and throws).
      mask::attends(*p_.mask, {base[0], base[1], base[2] + step[2] * l, base[3] + step[3] * l});
      throw Error(ErrorCode::runtime, "mask_mod: internal error: a faulting pair evaluated cleanly");
    }
  }
  if (r.uniform) {
    std::fill(attend, attend + n, static_cast<std::uint8_t>(r.i[0] != 0));
    return r.i[0] != 0 ? n : 0;
  }
  int count = 0;
  for (int l = 0; l < n; ++l) {
    attend[l] = r.i[l] != 0;
    count += attend[l];
  }
  return count;
}

}  // namespace flashgen::cpu
