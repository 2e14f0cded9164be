// fusebox/observer.h: the ports through which breakers are watched.
//
// Two ports, each with the implementations core can offer with the standard
// library alone:
//
//   - LineSink: where a log writes its lines (one JSON object per line).
//     MemoryLineSink keeps them (tests, an admin page's recent events);
//     FileLineSink appends them to a file (the audit log). An adapter for
//     spdlog lives in fusebox/spdlog_sink.h, a header-only file that only a
//     program which includes it (and links spdlog) compiles, so that
//     fusebox::core itself never depends on spdlog.
//   - BreakerObserver: something that watches every breaker it is attached to:
//     MetricsCollector (metrics.h), EventLog (event_log.h), AuditLog
//     (audit_log.h). ObserveRegistry() attaches observers to every breaker a
//     Registry creates, and forwards the registry's eviction events to them.
//
//   auto metrics = std::make_shared<fusebox::MetricsCollector>();
//   std::shared_ptr<fusebox::EventLog> events = *fusebox::EventLog::Create({.sink = sink});
//   fusebox::RegistryOptions options{.clock = &clock};
//   fusebox::ObserveRegistry(options, {metrics, events});
//   auto registry = *fusebox::Registry::Create(std::move(options));
//
// Thread safety is stated on each class.
#ifndef FUSEBOX_OBSERVER_H_
#define FUSEBOX_OBSERVER_H_

#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/internal/mutex.h"
#include "fusebox/internal/thread_annotations.h"
#include "fusebox/registry.h"
#include "fusebox/result.h"
#include "fusebox/status.h"

namespace fusebox {

// Receives complete lines, without their trailing newline. A log calls
// Write() from whatever thread caused the event, possibly from several at
// once, and never while holding a breaker's lock.
//
// Implementations must be thread-safe.
class LineSink {
 public:
  virtual ~LineSink() = default;
  // Writes one line. A failure is returned (and counted by the log that
  // wrote), never thrown.
  virtual Status Write(std::string_view line) = 0;
};

// Keeps every line in memory, in the order written.
//
// Thread-safe.
class MemoryLineSink final : public LineSink {
 public:
  Status Write(std::string_view line) override FUSEBOX_EXCLUDES(mu_);
  // A copy of the lines written so far.
  std::vector<std::string> lines() const FUSEBOX_EXCLUDES(mu_);
  std::size_t size() const FUSEBOX_EXCLUDES(mu_);
  void Clear() FUSEBOX_EXCLUDES(mu_);

 private:
  mutable internal::Mutex mu_;
  std::vector<std::string> lines_ FUSEBOX_GUARDED_BY(mu_);
};

// Appends lines to a file opened in append mode: existing content is never
// rewritten or truncated, and every line goes to the end of the file even when
// another process appends to it too. Each line is flushed to the operating
// system before Write() returns, so that a crash of this process loses
// nothing already written (fsync is left to the operating system).
//
// Thread-safe.
class FileLineSink final : public LineSink {
 public:
  // Opens (creating it if needed) `path` for appending. Fails with
  // kUnavailable naming the path and the system's reason.
  static Result<std::unique_ptr<FileLineSink>> Create(std::string path);

  FileLineSink(const FileLineSink&) = delete;
  FileLineSink& operator=(const FileLineSink&) = delete;
  ~FileLineSink() override;

  // kUnavailable naming the path when the line could not be written whole.
  Status Write(std::string_view line) override FUSEBOX_EXCLUDES(mu_);
  const std::string& path() const noexcept { return path_; }

 private:
  FileLineSink(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}

  const std::string path_;
  internal::Mutex mu_;
  std::FILE* const file_ FUSEBOX_PT_GUARDED_BY(mu_);
};

// Watches breakers. Attach() is called once per breaker, before the breaker
// is used (by ObserveRegistry for a registry's breakers, or by the
// application for a breaker it made itself); an observer typically adds a
// CircuitBreakerListener there. The listener, not the observer, is what the
// breaker keeps; it must not keep the breaker alive or the registry could
// never evict it.
//
// Implementations must be thread-safe.
class BreakerObserver {
 public:
  virtual ~BreakerObserver() = default;
  virtual void Attach(CircuitBreaker& breaker) = 0;
  // The registry's creation, eviction and capacity events (see registry.h).
  virtual void OnRegistryEvent(const RegistryEvent& /*event*/) {}
};

// Sets options.on_create and options.on_event so that every breaker the
// registry creates is attached to each observer, in order, and every registry
// event reaches each of them. Hooks already set in `options` keep running,
// first. The hooks keep the observers alive for as long as the registry.
void ObserveRegistry(RegistryOptions& options,
                     std::vector<std::shared_ptr<BreakerObserver>> observers);

}  // namespace fusebox

#endif  // FUSEBOX_OBSERVER_H_
