// fusebox/redis/reply.h: Reply, an owning copy of a RESP2 reply.
//
// hiredis hands out redisReply trees that must be freed with
// freeReplyObject(); Connection copies each one into a Reply at once, so that
// nothing of hiredis leaks into the API and replies are ordinary values.
//
//   fusebox::Result<fusebox::redis::Reply> r = conn.Command({"PTTL", key});
//   if (r && r->is_integer()) remaining_ms = r->integer;
//
// Thread-compatible: const methods may run concurrently, others need external
// synchronization.
#ifndef FUSEBOX_REDIS_REPLY_H_
#define FUSEBOX_REDIS_REPLY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fusebox::redis {

struct Reply {
  // The RESP2 types (hiredis 0.14 knows no RESP3 types).
  enum class Type : std::uint8_t {
    kNil,      // $-1 or *-1
    kInteger,  // :n
    kString,   // $len, binary-safe
    kStatus,   // +OK
    kError,    // -ERR ...: a command error, not a connection error
    kArray,    // *n
  };

  Type type = Type::kNil;
  // The value of kInteger; 0 otherwise.
  std::int64_t integer = 0;
  // The bytes of kString, kStatus and kError; empty otherwise.
  std::string str;
  // The elements of kArray; empty otherwise.
  std::vector<Reply> elements;

  static Reply Nil() { return Reply{}; }
  static Reply Integer(std::int64_t v) {
    Reply r;
    r.type = Type::kInteger;
    r.integer = v;
    return r;
  }
  static Reply String(std::string s) { return WithText(Type::kString, std::move(s)); }
  static Reply StatusReply(std::string s) { return WithText(Type::kStatus, std::move(s)); }
  static Reply Error(std::string s) { return WithText(Type::kError, std::move(s)); }
  static Reply Array(std::vector<Reply> e) {
    Reply r;
    r.type = Type::kArray;
    r.elements = std::move(e);
    return r;
  }

  bool is_nil() const { return type == Type::kNil; }
  bool is_integer() const { return type == Type::kInteger; }
  bool is_string() const { return type == Type::kString; }
  bool is_status() const { return type == Type::kStatus; }
  bool is_error() const { return type == Type::kError; }
  bool is_array() const { return type == Type::kArray; }

  // True for a kError whose first word is `code`, e.g. "NOSCRIPT" or
  // "WRONGPASS".
  bool IsErrorCode(std::string_view code) const;

  // A short rendering for messages and test failures: 42, "abc", +OK,
  // -ERR ..., nil, [a, b]. Strings longer than 64 bytes are cut. Never used on
  // a reply that may hold a secret (AUTH's reply is an OK or an error).
  std::string ToString() const;

  friend bool operator==(const Reply&, const Reply&) = default;

 private:
  static Reply WithText(Type type, std::string s) {
    Reply r;
    r.type = type;
    r.str = std::move(s);
    return r;
  }
};

std::string_view ReplyTypeName(Reply::Type type);

}  // namespace fusebox::redis

#endif  // FUSEBOX_REDIS_REPLY_H_
