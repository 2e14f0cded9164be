#include "json_line.h"

#include <charconv>
#include <cmath>

namespace fusebox::internal {

std::int64_t SteadyMs(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

std::int64_t Ms(Duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

std::chrono::system_clock::time_point ToWall(
    const std::function<std::chrono::system_clock::time_point()>& wall, Clock& clock, TimePoint t) {
  const Duration offset = t - clock.Now();
  return wall() + std::chrono::duration_cast<std::chrono::system_clock::duration>(offset);
}

std::size_t Utf8SequenceLength(std::string_view s, std::size_t i) noexcept {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  // The first continuation byte's range is narrowed for E0, ED, F0 and F4 to
  // exclude overlong forms, surrogates and code points beyond U+10FFFF
  // (Unicode 15, table 3-7).
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

void AppendJsonString(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  std::size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const std::size_t n = Utf8SequenceLength(s, i);
      if (n == 0) {
        out.append("\xEF\xBF\xBD");  // U+FFFD REPLACEMENT CHARACTER
        ++i;
      } else {
        out.append(s.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        out.append("\\\"");
        break;
      case '\\':
        out.append("\\\\");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\r':
        out.append("\\r");
        break;
      case '\t':
        out.append("\\t");
        break;
      case '\b':
        out.append("\\b");
        break;
      case '\f':
        out.append("\\f");
        break;
      default:
        if (c < 0x20 || c == 0x7F) {
          // DEL is legal JSON, but escaping it keeps terminals that show the
          // log sane.
          out.append("\\u00");
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 0xF]);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out.push_back('"');
}

void AppendInt(std::string& out, std::int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void AppendUint(std::string& out, std::uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void AppendJsonNumber(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out.append("null");
    return;
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

namespace {
void AppendPadded(std::string& out, long long v, int width) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  for (int pad = width - static_cast<int>(r.ptr - buf); pad > 0; --pad) out.push_back('0');
  out.append(buf, r.ptr);
}
}  // namespace

void AppendRfc3339(std::string& out, std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  const auto ms = floor<milliseconds>(t);
  const auto day = floor<days>(ms);
  const year_month_day ymd{day};
  const hh_mm_ss<milliseconds> hms{ms - day};
  AppendPadded(out, static_cast<int>(ymd.year()), 4);
  out.push_back('-');
  AppendPadded(out, static_cast<unsigned>(ymd.month()), 2);
  out.push_back('-');
  AppendPadded(out, static_cast<unsigned>(ymd.day()), 2);
  out.push_back('T');
  AppendPadded(out, hms.hours().count(), 2);
  out.push_back(':');
  AppendPadded(out, hms.minutes().count(), 2);
  out.push_back(':');
  AppendPadded(out, hms.seconds().count(), 2);
  out.push_back('.');
  AppendPadded(out, hms.subseconds().count(), 3);
  out.push_back('Z');
}

}  // namespace fusebox::internal
