#include "cpu/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace flashgen::cpu {
namespace {

// Workers sleep between jobs; a job is one parallel_for call. The calling
// thread takes part, so a pool for n threads keeps n - 1 workers.
class ThreadPool {
 public:
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& worker : workers_) worker.join();
  }

  void run(std::int64_t tasks, int threads, const std::function<void(std::int64_t)>& body) {
    std::lock_guard<std::mutex> one_job_at_a_time(job_mutex_);
    const int helpers = static_cast<int>(std::min<std::int64_t>(threads, tasks)) - 1;
    if (helpers <= 0) {
      for (std::int64_t t = 0; t < tasks; ++t) body(t);
      return;
    }
    grow(helpers);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      body_ = &body;
      task_count_ = tasks;
      next_task_.store(0);
      helpers_wanted_ = helpers;
      helpers_done_ = 0;
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    work();
    std::unique_lock<std::mutex> lock(mutex_);
    finished_.wait(lock, [&] { return helpers_done_ == helpers_wanted_; });
    body_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void grow(int helpers) {
    while (static_cast<int>(workers_.size()) < helpers) {
      const int index = static_cast<int>(workers_.size());
      workers_.emplace_back([this, index] { worker_loop(index); });
    }
  }

  void worker_loop(int index) {
    std::uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] {
          return stopping_ || (generation_ != seen && index < helpers_wanted_);
        });
        if (stopping_) return;
        seen = generation_;
      }
      work();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++helpers_done_;
      }
      finished_.notify_one();
    }
  }

  // Takes tasks until none is left; after a failure, remaining tasks are skipped.
  void work() {
    for (;;) {
      const std::int64_t task = next_task_.fetch_add(1);
      if (task >= task_count_) return;
      try {
        (*body_)(task);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = std::current_exception();
        next_task_.store(task_count_);
      }
    }
  }

  std::mutex job_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  std::vector<std::thread> workers_;
  const std::function<void(std::int64_t)>* body_ = nullptr;
  std::int64_t task_count_ = 0;
  std::atomic<std::int64_t> next_task_{0};
  int helpers_wanted_ = 0;
  int helpers_done_ = 0;
  std::uint64_t generation_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
};

ThreadPool& shared_pool() {
  static ThreadPool pool;
  return pool;
}

}  // namespace

int resolve_thread_count(int requested) {
  if (requested > 0) return requested;
  const unsigned hardware = std::thread::hardware_concurrency();
  return hardware == 0 ? 1 : static_cast<int>(hardware);
}

void parallel_for(std::int64_t tasks, int threads,
                  const std::function<void(std::int64_t task)>& body) {
  if (tasks <= 0) return;
  shared_pool().run(tasks, resolve_thread_count(threads), body);
}

}  // namespace flashgen::cpu
