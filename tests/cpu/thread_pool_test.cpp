#include "cpu/thread_pool.hpp"

#include <atomic>
#include <chrono>
#include <thread>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

namespace flashgen::cpu {
namespace {

TEST(ThreadPool, RunsEveryTaskExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    std::vector<std::atomic<int>> runs(1000);
    parallel_for(static_cast<std::int64_t>(runs.size()), threads,
                 [&](std::int64_t task) { runs[static_cast<std::size_t>(task)]++; });
    for (std::size_t i = 0; i < runs.size(); ++i) ASSERT_EQ(runs[i].load(), 1) << i;
  }
}

TEST(ThreadPool, UsesSeveralThreads) {
  std::atomic<int> inside{0}, most{0};
  parallel_for(64, 4, [&](std::int64_t) {
    const int now = ++inside;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    // Stay inside long enough for another thread to arrive.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    --inside;
  });
  EXPECT_GT(most.load(), 1);
}

TEST(ThreadPool, RethrowsTheFirstError) {
  std::atomic<int> runs{0};
  EXPECT_THROW(parallel_for(100, 3,
                            [&](std::int64_t task) {
                              ++runs;
                              if (task == 10) throw std::runtime_error("task 10 failed");
                            }),
               std::runtime_error);
  // The pool is usable afterwards.
  std::atomic<int> after{0};
  parallel_for(50, 3, [&](std::int64_t) { ++after; });
  EXPECT_EQ(after.load(), 50);
}

TEST(ThreadPool, NoTasksIsANoOp) {
  parallel_for(0, 4, [](std::int64_t) { FAIL() << "no task should run"; });
  EXPECT_GE(resolve_thread_count(0), 1);
  EXPECT_EQ(resolve_thread_count(3), 3);
}

}  // namespace
}  // namespace flashgen::cpu
