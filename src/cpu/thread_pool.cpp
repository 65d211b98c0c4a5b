#include "cpu/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <pthread.h>
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

  void lock_for_fork() {
    job_mutex_.lock();
    mutex_.lock();
  }
  void unlock_after_fork() {
    mutex_.unlock();
    job_mutex_.unlock();
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

// The process's pool. It is never destroyed: a worker may still be asleep
// in it while static destructors run at exit.
std::atomic<ThreadPool*> the_pool{nullptr};

// fork() copies only the calling thread: in the child, the pool's workers are
// gone while its state says they exist, and a mutex held by one of them stays
// held. So the fork waits until no job runs and holds the pool's locks across
// it; the parent then goes on with its pool, the child with a new one (the
// old one, whose workers did not survive, is left untouched).
void lock_before_fork() { the_pool.load()->lock_for_fork(); }
void unlock_in_parent() { the_pool.load()->unlock_after_fork(); }
void replace_in_child() { the_pool.store(new ThreadPool); }

ThreadPool& shared_pool() {
  static std::once_flag once;
  std::call_once(once, [] {
    the_pool.store(new ThreadPool);
    pthread_atfork(lock_before_fork, unlock_in_parent, replace_in_child);
  });
  return *the_pool.load();
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
