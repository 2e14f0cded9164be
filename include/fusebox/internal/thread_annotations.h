// Thread-safety annotations for clang's -Wthread-safety analysis.
//
// Each macro expands to a clang attribute that states a locking contract: which
// mutex guards a field, which mutex a function needs, acquires or releases.
// Clang checks those contracts at compile time; our CI runs clang 14 with
// -Wthread-safety -Werror (the asan and tsan presets). On every other compiler,
// gcc 12 included, the macros expand to nothing, so they cost nothing and change
// no behaviour.
//
// libstdc++'s std::mutex carries no capability attribute, so clang cannot check
// code that locks it directly. Guard fields with fusebox::internal::Mutex
// (fusebox/internal/mutex.h), which carries these annotations.
//
// Example:
//
//   class Counter {
//    public:
//     void Add(int n) FUSEBOX_EXCLUDES(mu_) {
//       internal::MutexLock lock(&mu_);
//       AddLocked(n);
//     }
//
//    private:
//     void AddLocked(int n) FUSEBOX_REQUIRES(mu_) { value_ += n; }
//
//     internal::Mutex mu_;
//     int value_ FUSEBOX_GUARDED_BY(mu_) = 0;
//   };
//
// The names follow leveldb's port/thread_annotations.h and abseil's
// absl/base/thread_annotations.h; clang's reference is
// https://clang.llvm.org/docs/ThreadSafetyAnalysis.html.
//
// This header is shipped with the library because public headers may use it,
// but it is internal: the macros are not part of fusebox's API and may change.

#ifndef FUSEBOX_INTERNAL_THREAD_ANNOTATIONS_H_
#define FUSEBOX_INTERNAL_THREAD_ANNOTATIONS_H_

#if defined(__clang__) && !defined(SWIG)
#define FUSEBOX_THREAD_ANNOTATION_ATTRIBUTE_(x) __attribute__((x))
#else
#define FUSEBOX_THREAD_ANNOTATION_ATTRIBUTE_(x)  // no-op
#endif

// Marks a class as a capability (a lockable thing); `x` names its kind in
// diagnostics, e.g. FUSEBOX_CAPABILITY("mutex").
#define FUSEBOX_CAPABILITY(x) FUSEBOX_THREAD_ANNOTATION_ATTRIBUTE_(capability(x))

// Marks an RAII class whose constructor acquires and whose destructor releases
// a capability, such as internal::MutexLock.
#define FUSEBOX_SCOPED_CAPABILITY FUSEBOX_THREAD_ANNOTATION_ATTRIBUTE_(scoped_lockable)

// The field may be read or written only while holding `x`.
#define FUSEBOX_GUARDED_BY(x) FUSEBOX_THREAD_ANNOTATION_ATTRIBUTE_(guarded_by(x))

// The data the pointer field points to may be accessed only while holding `x`;
// the pointer itself is unguarded.
#define FUSEBOX_PT_GUARDED_BY(x) FUSEBOX_THREAD_ANNOTATION_ATTRIBUTE_(pt_guarded_by(x))

// The caller must hold the listed capabilities when calling the function, and
// still holds them when it returns. Helpers named ...Locked carry this.
#define FUSEBOX_REQUIRES(...) FUSEBOX_THREAD_ANNOTATION_ATTRIBUTE_(requires_capability(__VA_ARGS__))

// The caller must not hold the listed capabilities, typically because the
// function acquires them itself (non-reentrant mutexes).
#define FUSEBOX_EXCLUDES(...) FUSEBOX_THREAD_ANNOTATION_ATTRIBUTE_(locks_excluded(__VA_ARGS__))

// The function acquires the listed capabilities and returns holding them. With
// no argument on a member function, the capability is `this`.
#define FUSEBOX_ACQUIRE(...) FUSEBOX_THREAD_ANNOTATION_ATTRIBUTE_(acquire_capability(__VA_ARGS__))

// The function releases the listed capabilities, which the caller held. With
// no argument on a member function, the capability is `this`.
#define FUSEBOX_RELEASE(...) FUSEBOX_THREAD_ANNOTATION_ATTRIBUTE_(release_capability(__VA_ARGS__))

// The function tries to acquire the capabilities; the first argument is the
// return value that means success, e.g. FUSEBOX_TRY_ACQUIRE(true).
#define FUSEBOX_TRY_ACQUIRE(...) \
  FUSEBOX_THREAD_ANNOTATION_ATTRIBUTE_(try_acquire_capability(__VA_ARGS__))

// Tells the analysis that the capability is held after the call (the function
// is expected to check this at run time, or abort).
#define FUSEBOX_ASSERT_CAPABILITY(...) \
  FUSEBOX_THREAD_ANNOTATION_ATTRIBUTE_(assert_capability(__VA_ARGS__))

// The function returns a reference to the given capability; lets accessors
// such as `Mutex& mu()` take part in the analysis.
#define FUSEBOX_RETURN_CAPABILITY(x) FUSEBOX_THREAD_ANNOTATION_ATTRIBUTE_(lock_returned(x))

// Documents (and, with -Wthread-safety-beta, checks) lock ordering between
// mutexes that may be held together.
#define FUSEBOX_ACQUIRED_AFTER(...) \
  FUSEBOX_THREAD_ANNOTATION_ATTRIBUTE_(acquired_after(__VA_ARGS__))
#define FUSEBOX_ACQUIRED_BEFORE(...) \
  FUSEBOX_THREAD_ANNOTATION_ATTRIBUTE_(acquired_before(__VA_ARGS__))

// Turns the analysis off for one function. Use it only where the analysis
// cannot follow correct code, and say why in a comment next to it.
#define FUSEBOX_NO_THREAD_SAFETY_ANALYSIS \
  FUSEBOX_THREAD_ANNOTATION_ATTRIBUTE_(no_thread_safety_analysis)

#endif  // FUSEBOX_INTERNAL_THREAD_ANNOTATIONS_H_
