#include "fusebox/http/retry_after.h"

#include <algorithm>
#include <array>

namespace fusebox::http {
namespace {

using std::chrono::seconds;
using std::chrono::sys_seconds;

// Reads fixed pieces of an HTTP-date from left to right.
class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}
  bool done() const { return s_.empty(); }
  bool Lit(std::string_view w) {
    if (s_.substr(0, w.size()) != w) return false;
    s_.remove_prefix(w.size());
    return true;
  }
  // Exactly n digits.
  bool Num(int n, int& out) {
    if (s_.size() < static_cast<std::size_t>(n)) return false;
    out = 0;
    for (int i = 0; i < n; ++i) {
      const char c = s_[static_cast<std::size_t>(i)];
      if (c < '0' || c > '9') return false;
      out = out * 10 + (c - '0');
    }
    s_.remove_prefix(static_cast<std::size_t>(n));
    return true;
  }
  // One of `names`; returns its index or -1.
  template <std::size_t N>
  int OneOf(const std::array<std::string_view, N>& names) {
    for (std::size_t i = 0; i < N; ++i) {
      if (Lit(names[i])) return static_cast<int>(i);
    }
    return -1;
  }

 private:
  std::string_view s_;
};

constexpr std::array<std::string_view, 7> kDays = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
constexpr std::array<std::string_view, 7> kLongDays = {
    "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"};
constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

bool TimeOfDay(Cursor& c, int& h, int& m, int& s) {
  return c.Num(2, h) && c.Lit(":") && c.Num(2, m) && c.Lit(":") && c.Num(2, s);
}

std::optional<sys_seconds> Make(int year, int month, int day, int h, int m, int s) {
  if (h > 23 || m > 59 || s > 60) return std::nullopt;
  const std::chrono::year_month_day ymd{std::chrono::year(year),
                                        std::chrono::month(static_cast<unsigned>(month)),
                                        std::chrono::day(static_cast<unsigned>(day))};
  if (!ymd.ok()) return std::nullopt;
  return sys_seconds(std::chrono::sys_days(ymd)) + std::chrono::hours(h) + std::chrono::minutes(m) +
         seconds(s);
}

}  // namespace

std::string_view TrimOws(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<sys_seconds> ParseHttpDate(std::string_view text) {
  if (text.size() > kMaxRetryAfterBytes) return std::nullopt;
  int day = 0, year = 0, h = 0, m = 0, s = 0, month = -1;
  {
    // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT".
    Cursor c(text);
    if (c.OneOf(kDays) >= 0 && c.Lit(", ") && c.Num(2, day) && c.Lit(" ") &&
        (month = c.OneOf(kMonths)) >= 0 && c.Lit(" ") && c.Num(4, year) && c.Lit(" ") &&
        TimeOfDay(c, h, m, s) && c.Lit(" GMT") && c.done()) {
      return Make(year, month + 1, day, h, m, s);
    }
  }
  {
    // RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT".
    Cursor c(text);
    if (c.OneOf(kLongDays) >= 0 && c.Lit(", ") && c.Num(2, day) && c.Lit("-") &&
        (month = c.OneOf(kMonths)) >= 0 && c.Lit("-") && c.Num(2, year) && c.Lit(" ") &&
        TimeOfDay(c, h, m, s) && c.Lit(" GMT") && c.done()) {
      return Make(year < 70 ? 2000 + year : 1900 + year, month + 1, day, h, m, s);
    }
  }
  {
    // asctime: "Sun Nov  6 08:49:37 1994".
    Cursor c(text);
    if (c.OneOf(kDays) >= 0 && c.Lit(" ") && (month = c.OneOf(kMonths)) >= 0 && c.Lit(" ") &&
        ((c.Lit(" ") && c.Num(1, day)) || c.Num(2, day)) && c.Lit(" ") && TimeOfDay(c, h, m, s) &&
        c.Lit(" ") && c.Num(4, year) && c.done()) {
      return Make(year, month + 1, day, h, m, s);
    }
  }
  return std::nullopt;
}

std::optional<seconds> ParseRetryAfter(std::string_view value, std::optional<sys_seconds> reference,
                                       seconds max_wait) {
  if (value.size() > kMaxRetryAfterBytes || max_wait <= seconds::zero()) return std::nullopt;
  value = TrimOws(value);
  if (value.empty()) return std::nullopt;
  if (value.find_first_not_of("0123456789") == std::string_view::npos) {
    // delta-seconds, saturating: any number of digits, no overflow.
    seconds::rep v = 0;
    for (const char c : value) {
      v = v * 10 + (c - '0');
      if (v >= max_wait.count()) return max_wait;
    }
    if (v <= 0) return std::nullopt;
    return seconds(v);
  }
  const std::optional<sys_seconds> date = ParseHttpDate(value);
  if (!date || !reference) return std::nullopt;
  // Both are whole seconds, so ceil(date - reference) is the difference.
  const seconds delta = *date - *reference;
  if (delta <= seconds::zero()) return std::nullopt;
  return std::min(delta, max_wait);
}

}  // namespace fusebox::http
