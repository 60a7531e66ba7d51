// Clang thread-safety annotations (as in leveldb's port/thread_annotations.h
// and Abseil's) and an annotated mutex, so `clang++ -Wthread-safety` checks
// the locking rules that comments used to state. The macros expand to
// nothing on other compilers; scripts/check-thread-safety.sh runs the check
// over every file that includes this header.
//
//   class Counter {
//    public:
//     void Add() EXCLUDES(mu_) { MutexLock l(&mu_); ++n_; }
//    private:
//     Mutex mu_;
//     int n_ GUARDED_BY(mu_) = 0;
//   };
//
// Condition waits: Mutex is BasicLockable, so std::condition_variable_any can
// wait on it directly while a MutexLock holds it (cv.wait_until(mu_, t)).
// Write the wait loop out rather than passing a predicate lambda: the
// analysis checks a lambda's body as a separate function that holds no locks.
#pragma once

#include <mutex>

#if defined(__clang__)
#define SPECD_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define SPECD_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) SPECD_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY SPECD_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) SPECD_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) SPECD_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) SPECD_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) SPECD_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define REQUIRES(...) SPECD_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) SPECD_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define ACQUIRE(...) SPECD_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) SPECD_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) SPECD_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) SPECD_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) SPECD_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) SPECD_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) SPECD_THREAD_ANNOTATION(assert_capability(x))
#define RETURN_CAPABILITY(x) SPECD_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS SPECD_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace specd {

// std::mutex with capability annotations. lock()/unlock() keep the standard
// names so std::condition_variable_any and std::lock_guard accept it.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis the caller holds the lock (no runtime check).
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  std::mutex mu_;
};

// Holds `mu` for the scope (std::lock_guard, annotated).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->lock(); }
  ~MutexLock() RELEASE() { mu_->unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace specd
