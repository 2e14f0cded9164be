#include "fusebox/observer.h"

#include <cerrno>
#include <cstring>
#include <utility>

namespace fusebox {

Status MemoryLineSink::Write(std::string_view line) {
  internal::MutexLock lock(&mu_);
  lines_.emplace_back(line);
  return Status();
}

std::vector<std::string> MemoryLineSink::lines() const {
  internal::MutexLock lock(&mu_);
  return lines_;
}

std::size_t MemoryLineSink::size() const {
  internal::MutexLock lock(&mu_);
  return lines_.size();
}

void MemoryLineSink::Clear() {
  internal::MutexLock lock(&mu_);
  lines_.clear();
}

Result<std::unique_ptr<FileLineSink>> FileLineSink::Create(std::string path) {
  // "a": every write goes to the end of the file (O_APPEND), whatever else
  // writes to it; nothing is ever truncated. "e" (O_CLOEXEC, glibc) keeps the
  // descriptor out of child processes.
  std::FILE* file = std::fopen(path.c_str(), "ae");
  if (file == nullptr) {
    const int err = errno;
    return Status::Unavailable("cannot open '" + path + "' for appending: " + std::strerror(err));
  }
  return std::unique_ptr<FileLineSink>(new FileLineSink(std::move(path), file));
}

FileLineSink::~FileLineSink() { std::fclose(file_); }

Status FileLineSink::Write(std::string_view line) {
  internal::MutexLock lock(&mu_);
  // The line and its newline in one buffered write, flushed at once: with
  // O_APPEND and a line shorter than the stdio buffer this is one write(2),
  // so lines of concurrent processes never interleave mid-line.
  const bool ok = std::fwrite(line.data(), 1, line.size(), file_) == line.size() &&
                  std::fputc('\n', file_) != EOF && std::fflush(file_) == 0;
  if (!ok) {
    const int err = errno;
    std::clearerr(file_);
    return Status::Unavailable("cannot append to '" + path_ + "': " + std::strerror(err));
  }
  return Status();
}

void ObserveRegistry(RegistryOptions& options,
                     std::vector<std::shared_ptr<BreakerObserver>> observers) {
  auto shared =
      std::make_shared<const std::vector<std::shared_ptr<BreakerObserver>>>(std::move(observers));
  options.on_create = [previous = std::move(options.on_create), shared](CircuitBreaker& b) {
    if (previous) previous(b);
    for (const auto& o : *shared) o->Attach(b);
  };
  options.on_event = [previous = std::move(options.on_event), shared](const RegistryEvent& e) {
    if (previous) previous(e);
    for (const auto& o : *shared) o->OnRegistryEvent(e);
  };
}

}  // namespace fusebox
