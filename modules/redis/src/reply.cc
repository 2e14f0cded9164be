#include "fusebox/redis/reply.h"

namespace fusebox::redis {

bool Reply::IsErrorCode(std::string_view code) const {
  if (type != Type::kError || !std::string_view(str).starts_with(code)) return false;
  return str.size() == code.size() || str[code.size()] == ' ';
}

std::string Reply::ToString() const {
  constexpr std::size_t kMaxShown = 64;
  const auto cut = [&](const std::string& s) {
    return s.size() <= kMaxShown ? s : s.substr(0, kMaxShown) + "...";
  };
  switch (type) {
    case Type::kNil:
      return "nil";
    case Type::kInteger:
      return std::to_string(integer);
    case Type::kString:
      return "\"" + cut(str) + "\"";
    case Type::kStatus:
      return "+" + cut(str);
    case Type::kError:
      return "-" + cut(str);
    case Type::kArray: {
      std::string out = "[";
      for (std::size_t i = 0; i < elements.size(); ++i) {
        if (i > 0) out += ", ";
        if (i == 8) {
          out += "... (" + std::to_string(elements.size()) + " elements)";
          break;
        }
        out += elements[i].ToString();
      }
      return out + "]";
    }
  }
  return "?";
}

std::string_view ReplyTypeName(Reply::Type type) {
  switch (type) {
    case Reply::Type::kNil:
      return "nil";
    case Reply::Type::kInteger:
      return "integer";
    case Reply::Type::kString:
      return "string";
    case Reply::Type::kStatus:
      return "status";
    case Reply::Type::kError:
      return "error";
    case Reply::Type::kArray:
      return "array";
  }
  return "?";
}

}  // namespace fusebox::redis
