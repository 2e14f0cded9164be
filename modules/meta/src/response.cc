#include "fusebox/meta/response.h"

#include "src/json.h"

namespace fusebox::meta {
namespace {

char Lower(char c) noexcept { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

}  // namespace

bool EqualsIgnoreCase(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (Lower(a[i]) != Lower(b[i])) return false;
  }
  return true;
}

std::optional<std::string_view> Response::Header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (EqualsIgnoreCase(n, name)) return std::string_view(v);
  }
  return std::nullopt;
}

ErrorBody ParseErrorBody(std::string_view body) {
  ErrorBody out;
  std::optional<internal::JsonValue> doc = internal::ParseJson(body);
  if (!doc) return out;
  const internal::JsonValue* error = doc->Find("error");
  if (error == nullptr || !error->is_object()) return out;
  // Integers only: a code as a string or with a fraction is not a code.
  if (const internal::JsonValue* v = error->Find("code"); v && v->is_number() && v->is_integer) {
    out.code = v->integer;
  }
  if (const internal::JsonValue* v = error->Find("error_subcode");
      v && v->is_number() && v->is_integer) {
    out.subcode = v->integer;
  }
  if (const internal::JsonValue* v = error->Find("message"); v && v->is_string()) {
    out.message = v->string;
  }
  if (const internal::JsonValue* v = error->Find("type"); v && v->is_string()) {
    out.type = v->string;
  }
  return out;
}

}  // namespace fusebox::meta
