// ThreadSanitizer cannot see Debian's absl::Mutex, CondVar and Notification synchronise: the
// libraries are not instrumented, so every access they guard reads as a race. This file,
// linked into each binary under --config=tsan (--custom_malloc, see .bazelrc), interposes
// the out-of-line functions R2SP calls (Debian's inline namespace absl::debian3), calls the
// library's own (dlsym RTLD_NEXT) and tells TSan the happens-before edge each one makes: an
// unlock or a Notify releases, a lock or a completed wait acquires. Reads inside the
// library's unlocks and waits are not checked: they are absl::Condition functions, which read
// guarded state with the mutex held, at a moment these edges cannot place. No lock-order
// checking: TSan does not know these are mutexes, only what they order.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace {

// The library's definition of `symbol` (the one this file interposes).
void* Next(const char* symbol) {
  void* fn = dlsym(RTLD_NEXT, symbol);
  if (fn == nullptr) {
    std::fprintf(stderr, "tsan_absl_annotations: no %s in the absl libraries\n", symbol);
    std::abort();
  }
  return fn;
}

// Notification's atomic flag follows its Mutex; the inline HasBeenNotified() reads it with an
// acquire load, which TSan pairs with a release on that address.
static_assert(sizeof(absl::Mutex) == sizeof(void*) && sizeof(absl::Notification) == 16,
              "absl::Notification's layout changed");
void* NotifiedFlag(const absl::Notification* n) {
  return reinterpret_cast<char*>(const_cast<absl::Notification*>(n)) + sizeof(absl::Mutex);
}

// The TSan runtime's (dynamic annotations): this thread's reads go unchecked in between.
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);

// Runs the library's call with condition reads unchecked.
template <typename Fn>
auto Unchecked(Fn fn) {
  AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
  auto result = fn();
  AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
  return result;
}

}  // namespace

// A function `name` with the library's mangled symbol; `real` is the library's.
#define R2SP_INTERPOSE(ret, name, symbol, params) \
  extern "C" ret name params __asm__(symbol);     \
  extern "C" ret name params

#define R2SP_REAL(type, symbol) static const auto real = reinterpret_cast<type>(Next(symbol))

using Mu = absl::Mutex;
using Cond = absl::Condition;

R2SP_INTERPOSE(void, R2spMutexLock, "_ZN4absl7debian35Mutex4LockEv", (Mu* mu)) {
  R2SP_REAL(void (*)(Mu*), "_ZN4absl7debian35Mutex4LockEv");
  real(mu);
  __tsan_acquire(mu);
}
R2SP_INTERPOSE(void, R2spMutexReaderLock, "_ZN4absl7debian35Mutex10ReaderLockEv", (Mu* mu)) {
  R2SP_REAL(void (*)(Mu*), "_ZN4absl7debian35Mutex10ReaderLockEv");
  real(mu);
  __tsan_acquire(mu);
}
R2SP_INTERPOSE(void, R2spMutexUnlock, "_ZN4absl7debian35Mutex6UnlockEv", (Mu* mu)) {
  R2SP_REAL(void (*)(Mu*), "_ZN4absl7debian35Mutex6UnlockEv");
  __tsan_release(mu);
  Unchecked([&] { return (real(mu), 0); });
}
R2SP_INTERPOSE(void, R2spMutexReaderUnlock, "_ZN4absl7debian35Mutex12ReaderUnlockEv", (Mu* mu)) {
  R2SP_REAL(void (*)(Mu*), "_ZN4absl7debian35Mutex12ReaderUnlockEv");
  __tsan_release(mu);
  Unchecked([&] { return (real(mu), 0); });
}
R2SP_INTERPOSE(bool, R2spMutexTryLock, "_ZN4absl7debian35Mutex7TryLockEv", (Mu* mu)) {
  R2SP_REAL(bool (*)(Mu*), "_ZN4absl7debian35Mutex7TryLockEv");
  const bool locked = real(mu);
  if (locked) __tsan_acquire(mu);
  return locked;
}
R2SP_INTERPOSE(bool, R2spMutexReaderTryLock, "_ZN4absl7debian35Mutex13ReaderTryLockEv",
               (Mu* mu)) {
  R2SP_REAL(bool (*)(Mu*), "_ZN4absl7debian35Mutex13ReaderTryLockEv");
  const bool locked = real(mu);
  if (locked) __tsan_acquire(mu);
  return locked;
}
R2SP_INTERPOSE(void, R2spMutexLockWhen, "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE",
               (Mu* mu, const Cond& c)) {
  R2SP_REAL(void (*)(Mu*, const Cond&), "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  Unchecked([&] { return (real(mu, c), 0); });
  __tsan_acquire(mu);
}
R2SP_INTERPOSE(bool, R2spMutexLockWhenWithTimeout,
               "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE",
               (Mu* mu, const Cond& c, absl::Duration d)) {
  R2SP_REAL(bool (*)(Mu*, const Cond&, absl::Duration),
            "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const bool met = Unchecked([&] { return real(mu, c, d); });
  __tsan_acquire(mu);  // held either way
  return met;
}
R2SP_INTERPOSE(void, R2spMutexAwait, "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE",
               (Mu* mu, const Cond& c)) {
  R2SP_REAL(void (*)(Mu*, const Cond&), "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  __tsan_release(mu);
  Unchecked([&] { return (real(mu, c), 0); });
  __tsan_acquire(mu);
}
R2SP_INTERPOSE(bool, R2spMutexAwaitWithTimeout,
               "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE",
               (Mu* mu, const Cond& c, absl::Duration d)) {
  R2SP_REAL(bool (*)(Mu*, const Cond&, absl::Duration),
            "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_release(mu);
  const bool met = Unchecked([&] { return real(mu, c, d); });
  __tsan_acquire(mu);
  return met;
}
R2SP_INTERPOSE(bool, R2spMutexAwaitWithDeadline,
               "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE",
               (Mu* mu, const Cond& c, absl::Time t)) {
  R2SP_REAL(bool (*)(Mu*, const Cond&, absl::Time),
            "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_release(mu);
  const bool met = Unchecked([&] { return real(mu, c, t); });
  __tsan_acquire(mu);
  return met;
}
R2SP_INTERPOSE(void, R2spCondVarWait, "_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE",
               (absl::CondVar* cv, Mu* mu)) {
  R2SP_REAL(void (*)(absl::CondVar*, Mu*), "_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  Unchecked([&] { return (real(cv, mu), 0); });
  __tsan_acquire(mu);
}
R2SP_INTERPOSE(bool, R2spCondVarWaitWithTimeout,
               "_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE",
               (absl::CondVar* cv, Mu* mu, absl::Duration d)) {
  R2SP_REAL(bool (*)(absl::CondVar*, Mu*, absl::Duration),
            "_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  const bool timed_out = Unchecked([&] { return real(cv, mu, d); });
  __tsan_acquire(mu);
  return timed_out;
}
R2SP_INTERPOSE(bool, R2spCondVarWaitWithDeadline,
               "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE",
               (absl::CondVar* cv, Mu* mu, absl::Time t)) {
  R2SP_REAL(bool (*)(absl::CondVar*, Mu*, absl::Time),
            "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  __tsan_release(mu);
  const bool timed_out = Unchecked([&] { return real(cv, mu, t); });
  __tsan_acquire(mu);
  return timed_out;
}
R2SP_INTERPOSE(void, R2spNotify, "_ZN4absl7debian312Notification6NotifyEv",
               (absl::Notification* n)) {
  R2SP_REAL(void (*)(absl::Notification*), "_ZN4absl7debian312Notification6NotifyEv");
  __tsan_release(n);
  __tsan_release(NotifiedFlag(n));
  real(n);
}
R2SP_INTERPOSE(void, R2spWaitForNotification,
               "_ZNK4absl7debian312Notification19WaitForNotificationEv",
               (const absl::Notification* n)) {
  R2SP_REAL(void (*)(const absl::Notification*),
            "_ZNK4absl7debian312Notification19WaitForNotificationEv");
  real(n);
  __tsan_acquire(const_cast<absl::Notification*>(n));
}
R2SP_INTERPOSE(bool, R2spWaitForNotificationWithTimeout,
               "_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE",
               (const absl::Notification* n, absl::Duration d)) {
  R2SP_REAL(bool (*)(const absl::Notification*, absl::Duration),
            "_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  const bool notified = real(n, d);
  if (notified) __tsan_acquire(const_cast<absl::Notification*>(n));
  return notified;
}
