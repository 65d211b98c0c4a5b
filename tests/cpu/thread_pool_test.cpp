#include "cpu/thread_pool.hpp"

#include <atomic>
#include <chrono>
#include <thread>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

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

// In a child process: runs parallel_for on several threads and exits 0 when
// every task ran once. A child that hangs is killed by the alarm.
[[noreturn]] void child_runs_a_job() {
  alarm(10);
  std::vector<std::atomic<int>> runs(200);
  parallel_for(static_cast<std::int64_t>(runs.size()), 4,
               [&](std::int64_t task) { runs[static_cast<std::size_t>(task)]++; });
  for (const std::atomic<int>& r : runs) {
    if (r.load() != 1) _exit(1);
  }
  _exit(0);
}

// The child's exit status, or a description of how it ended otherwise.
std::string wait_for(pid_t child) {
  int status = 0;
  if (waitpid(child, &status, 0) != child) return "waitpid failed";
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "ended otherwise";
}

TEST(ThreadPool, ChildProcessForkedAfterAJobRunsJobs) {
  // Workers exist in the parent before the fork; none survives into the child.
  parallel_for(64, 4, [](std::int64_t) {});
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) child_runs_a_job();
  EXPECT_EQ(wait_for(child), "exit 0");
  // The parent's pool still works.
  std::atomic<int> after{0};
  parallel_for(50, 4, [&](std::int64_t) { ++after; });
  EXPECT_EQ(after.load(), 50);
}

TEST(ThreadPool, ForkDuringAJobWaitsForItAndTheChildRunsJobs) {
  std::atomic<bool> started{false};
  std::atomic<int> done{0};
  std::thread job([&] {
    parallel_for(40, 3, [&](std::int64_t) {
      started = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      ++done;
    });
  });
  while (!started) std::this_thread::yield();
  const pid_t child = fork();
  if (child == 0) child_runs_a_job();
  // The fork waited for the job: it had finished when fork() returned.
  EXPECT_EQ(done.load(), 40);
  job.join();
  ASSERT_GE(child, 0);
  EXPECT_EQ(wait_for(child), "exit 0");
}

}  // namespace
}  // namespace flashgen::cpu
