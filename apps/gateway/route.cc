#include "apps/gateway/route.h"

#include <cctype>

// The UTF-8 check of the JSON lines and Prometheus labels, so that what a
// parameter may hold and what those writers keep as is are the same bytes.
#include "src/json_line.h"

namespace fusebox::gateway {
namespace {

bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::vector<std::string_view> Split(std::string_view path) {
  std::vector<std::string_view> out;
  std::size_t start = 1;  // after the leading '/'
  while (start <= path.size()) {
    std::size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    out.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

}  // namespace

bool PathPattern::Parse(std::string_view pattern, std::vector<std::string>& names,
                        std::string& why) {
  names.clear();
  if (pattern.empty() || pattern[0] != '/') {
    why = "must start with '/'";
    return false;
  }
  for (std::string_view seg : Split(pattern)) {
    if (seg.find('{') == std::string_view::npos && seg.find('}') == std::string_view::npos) {
      continue;
    }
    if (seg.size() < 3 || seg.front() != '{' || seg.back() != '}') {
      why = "a parameter must be a whole segment, as /{name}/, got \"" + std::string(seg) + "\"";
      return false;
    }
    std::string_view name = seg.substr(1, seg.size() - 2);
    for (char c : name) {
      if (!IsNameChar(c)) {
        why = "bad parameter name \"" + std::string(name) + "\" (letters, digits, _)";
        return false;
      }
    }
    for (const std::string& n : names) {
      if (n == name) {
        why = "parameter {" + std::string(name) + "} appears twice";
        return false;
      }
    }
    names.emplace_back(name);
  }
  return true;
}

Result<PathPattern> PathPattern::Create(std::string_view pattern) {
  std::vector<std::string> names;
  std::string why;
  if (!Parse(pattern, names, why)) return Status::InvalidArgument(why);
  PathPattern p;
  for (std::string_view seg : Split(pattern)) {
    Segment s;
    if (!seg.empty() && seg.front() == '{') {
      s.param = true;
      s.text = std::string(seg.substr(1, seg.size() - 2));
    } else {
      s.text = std::string(seg);
    }
    p.segments_.push_back(std::move(s));
  }
  return p;
}

std::string CheckParameter(std::string_view value) {
  if (value.empty()) return "is empty";
  if (value.size() > kMaxParameterBytes) {
    return "is longer than " + std::to_string(kMaxParameterBytes) + " bytes";
  }
  if (value == "." || value == "..") return "is a dot segment (\".\" or \"..\")";
  for (std::size_t i = 0; i < value.size();) {
    const std::size_t n = internal::Utf8SequenceLength(value, i);
    const auto c = static_cast<unsigned char>(value[i]);
    const char* why = nullptr;
    if (n == 0) {
      why = "is not valid UTF-8";
    } else if (c < 0x20 || c == 0x7f ||
               (c == 0xc2 && static_cast<unsigned char>(value[i + 1]) < 0xa0)) {
      why = "holds a control character";  // C0, DEL, or C1 (U+0080-U+009F: C2 80-9F)
    } else if (c == '/' || c == '\\') {
      why = "holds a '/' or '\\'";
    }
    if (why != nullptr) return why + std::string(" at byte ") + std::to_string(i);
    i += n;
  }
  return "";
}

std::optional<Result<Params>> PathPattern::Match(std::string_view path) const {
  if (path.empty() || path[0] != '/') return std::nullopt;
  std::vector<std::string_view> segs = Split(path);
  if (segs.size() != segments_.size()) return std::nullopt;
  for (std::size_t i = 0; i < segs.size(); ++i) {
    if (!segments_[i].param && segs[i] != segments_[i].text) return std::nullopt;
  }
  Params params;
  for (std::size_t i = 0; i < segs.size(); ++i) {
    const Segment& s = segments_[i];
    if (!s.param) continue;
    std::optional<std::string> v = PercentDecode(segs[i]);
    std::string why = v ? CheckParameter(*v) : "has a malformed percent-escape";
    if (!why.empty()) {
      return Result<Params>(Status::InvalidArgument("path parameter {" + s.text + "} " + why));
    }
    params.emplace_back(s.text, std::move(*v));
  }
  return Result<Params>(std::move(params));
}

bool TemplateParameters(std::string_view tmpl, std::vector<std::string>& names, std::string& why) {
  names.clear();
  std::size_t i = 0;
  while ((i = tmpl.find('{', i)) != std::string_view::npos) {
    const std::size_t close = tmpl.find('}', i);
    if (close == std::string_view::npos) {
      why = "unclosed '{'";
      return false;
    }
    std::string_view name = tmpl.substr(i + 1, close - i - 1);
    if (name.empty()) {
      why = "empty parameter name {}";
      return false;
    }
    for (char c : name) {
      if (!IsNameChar(c)) {
        why = "bad parameter name \"" + std::string(name) + "\" (letters, digits, _)";
        return false;
      }
    }
    names.emplace_back(name);
    i = close + 1;
  }
  if (tmpl.find('}', 0) != std::string_view::npos && names.empty()) {
    why = "'}' without '{'";
    return false;
  }
  return true;
}

std::string Expand(std::string_view tmpl, const Params& params, bool encode) {
  std::string out;
  std::size_t i = 0;
  while (i < tmpl.size()) {
    const std::size_t open = tmpl.find('{', i);
    if (open == std::string_view::npos) {
      out.append(tmpl.substr(i));
      break;
    }
    out.append(tmpl.substr(i, open - i));
    const std::size_t close = tmpl.find('}', open);
    if (close == std::string_view::npos) {
      out.append(tmpl.substr(open));
      break;
    }
    std::string_view name = tmpl.substr(open + 1, close - open - 1);
    for (const auto& [k, v] : params) {
      if (k == name) {
        out += encode ? PercentEncode(v) : v;
        break;
      }
    }
    i = close + 1;
  }
  return out;
}

std::optional<std::string> PercentDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int hi = HexValue(text[i + 1]);
    const int lo = HexValue(text[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

std::string PercentEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 || c == '-' || c == '.' || c == '_' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> ParseQuery(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> out;
  auto decode = [](std::string_view s) {
    std::string plus(s);
    for (char& c : plus) {
      if (c == '+') c = ' ';
    }
    std::optional<std::string> d = PercentDecode(plus);
    return d ? *d : plus;
  };
  std::size_t start = 0;
  while (start <= query.size()) {
    std::size_t amp = query.find('&', start);
    if (amp == std::string_view::npos) amp = query.size();
    std::string_view pair = query.substr(start, amp - start);
    if (!pair.empty()) {
      const std::size_t eq = pair.find('=');
      if (eq == std::string_view::npos) {
        out.emplace_back(decode(pair), "");
      } else {
        out.emplace_back(decode(pair.substr(0, eq)), decode(pair.substr(eq + 1)));
      }
    }
    start = amp + 1;
  }
  return out;
}

}  // namespace fusebox::gateway
