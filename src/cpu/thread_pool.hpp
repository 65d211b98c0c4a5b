// A small persistent thread pool for the CPU backend and the reference.
//
// parallel_for hands out task indices dynamically; results never depend on
// which thread ran a task, because every task writes its own outputs with a
// fixed summation order. That is what makes the CPU backend bit-identical for
// any thread count.
//
// Fork-safe: fork() waits for a running parallel_for to finish, and the
// child process starts a pool of its own on its first parallel_for (as a
// DataLoader worker forked after a call does).
#pragma once

#include <cstdint>
#include <functional>

namespace flashgen::cpu {

// Threads to use for a request: requested <= 0 means all hardware threads.
int resolve_thread_count(int requested);

// Runs body(task) for task in [0, tasks) on up to `threads` threads (the
// caller's thread included) and returns when all are done. The first
// exception thrown by a task is rethrown here after the others finish.
// Calls from several threads are serialized on one shared pool; body must not
// call parallel_for itself.
void parallel_for(std::int64_t tasks, int threads,
                  const std::function<void(std::int64_t task)>& body);

}  // namespace flashgen::cpu
