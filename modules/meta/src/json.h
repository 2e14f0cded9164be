// modules/meta/src/json.h: a small, strict, bounded JSON reader (private).
//
// Reads RFC 8259 JSON into a tree, for the few fields fusebox::meta needs
// (the error body's code/subcode/message/type, X-Business-Use-Case-Usage).
// Strict: no comments, no trailing commas, no leading zeros, no control
// characters in strings, only the escapes RFC 8259 lists, surrogate pairs
// must pair up. Bounded: inputs over JsonLimits::max_bytes and nesting deeper
// than JsonLimits::max_depth are refused, so hostile input costs at most
// linear time and bounded stack. Object members keep their order and their
// duplicates (Meta's own sample X-Business-Use-Case-Usage repeats a key).
//
// Thread-safe: every function is pure.
#ifndef FUSEBOX_META_SRC_JSON_H_
#define FUSEBOX_META_SRC_JSON_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fusebox::meta::internal {

struct JsonMember;

struct JsonValue {
  enum class Type : std::uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  // Every number, as a double (may be +-inf when the literal overflows).
  double number = 0;
  // True when the literal is an integer (no fraction, no exponent) that fits
  // std::int64_t; `integer` holds it then.
  bool is_integer = false;
  std::int64_t integer = 0;
  std::string string;
  std::vector<JsonValue> array;
  // Object members in input order, duplicates kept.
  std::vector<JsonMember> members;

  bool is_object() const { return type == Type::kObject; }
  bool is_array() const { return type == Type::kArray; }
  bool is_string() const { return type == Type::kString; }
  bool is_number() const { return type == Type::kNumber; }
  // The last member named `key` (as JavaScript's JSON.parse keeps), or null.
  const JsonValue* Find(std::string_view key) const;
};

struct JsonMember {
  std::string name;
  JsonValue value;
};

struct JsonLimits {
  // Longer input is refused. Default: 1 MiB.
  std::size_t max_bytes = std::size_t{1} << 20;
  // Deeper nesting of arrays and objects is refused. Default: 64.
  int max_depth = 64;
};

// The value `text` holds (surrounding whitespace allowed), or nullopt when it
// is not exactly one valid JSON value within the limits.
std::optional<JsonValue> ParseJson(std::string_view text, const JsonLimits& limits = {});

}  // namespace fusebox::meta::internal

#endif  // FUSEBOX_META_SRC_JSON_H_
