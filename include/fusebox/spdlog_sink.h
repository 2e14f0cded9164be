// fusebox/spdlog_sink.h: a LineSink that writes through an spdlog logger.
//
// Header-only on purpose: fusebox::core never includes this file and never
// links spdlog; a program that wants its event log in spdlog includes it and
// links spdlog itself (Debian: libspdlog-dev, target spdlog::spdlog).
//
//   auto logger = spdlog::basic_logger_mt("fusebox", "/var/log/app/breakers.jsonl");
//   logger->set_pattern("%v");  // the line alone: one JSON object per line
//   std::shared_ptr<fusebox::EventLog> log = *fusebox::EventLog::Create({
//       .sink = std::make_shared<fusebox::SpdlogLineSink>(logger),
//   });
//
// With spdlog's default pattern every line gets spdlog's time and level in
// front, which is fine for humans and breaks JSON-lines parsers; "%v" keeps
// the line as fusebox wrote it. The line is passed as the message, never as a
// format string, so braces in breaker names are safe.
//
// Thread-safe when the logger is (spdlog's *_mt loggers are).
#ifndef FUSEBOX_SPDLOG_SINK_H_
#define FUSEBOX_SPDLOG_SINK_H_

#include <spdlog/spdlog.h>

#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "fusebox/observer.h"

namespace fusebox {

// Writes each line as one spdlog message at `level`.
//
// Thread-safe when the logger is.
class SpdlogLineSink final : public LineSink {
 public:
  explicit SpdlogLineSink(std::shared_ptr<spdlog::logger> logger,
                          spdlog::level::level_enum level = spdlog::level::info)
      : logger_(std::move(logger)), level_(level) {}

  Status Write(std::string_view line) override {
    // spdlog reports its own errors through its error handler; a throwing
    // custom handler must not escape into the breaker's listener.
    try {
      logger_->log(level_, spdlog::string_view_t(line.data(), line.size()));
    } catch (const std::exception& e) {
      return Status::Unavailable(std::string("spdlog: ") + e.what());
    }
    return Status();
  }

  const std::shared_ptr<spdlog::logger>& logger() const noexcept { return logger_; }

 private:
  const std::shared_ptr<spdlog::logger> logger_;
  const spdlog::level::level_enum level_;
};

}  // namespace fusebox

#endif  // FUSEBOX_SPDLOG_SINK_H_
