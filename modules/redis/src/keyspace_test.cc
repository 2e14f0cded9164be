#include "fusebox/redis/keyspace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace fusebox::redis {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

TEST(Keyspace, DefaultLayout) {
  const Keyspace ks;
  EXPECT_EQ(ks.prefix(), "fusebox:v1:");
  EXPECT_EQ(ks.channel(), "fusebox:v1:events");
  const CircuitKeys k = ks.Keys("meta:ig:1784");
  EXPECT_EQ(k.open, "fusebox:v1:{meta:ig:1784}:open");
  EXPECT_EQ(k.trip, "fusebox:v1:{meta:ig:1784}:trip");
  EXPECT_EQ(k.lease, "fusebox:v1:{meta:ig:1784}:lease");
}

TEST(Keyspace, ConfigurablePrefix) {
  Result<Keyspace> ks = Keyspace::Create("app7:fb:");
  ASSERT_TRUE(ks.has_value()) << ks.error();
  EXPECT_EQ(ks->Keys("c").open, "app7:fb:{c}:open");
  EXPECT_EQ(ks->channel(), "app7:fb:events");
  EXPECT_TRUE(Keyspace::Create("").has_value());
  for (const char* bad : {"a{b:", "a}b:"}) {
    Result<Keyspace> r = Keyspace::Create(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.error().message()), HasSubstr("hash tag"));
  }
  EXPECT_FALSE(Keyspace::Create(std::string(257, 'p')).has_value());
}

TEST(ValidateCircuitId, AcceptsColonsSpacesAndInnerBraces) {
  for (const char* ok : {"c", "meta:ig:1784", "a b c", "a{b", "a}b", "{x}", "x open 1 2"}) {
    EXPECT_TRUE(ValidateCircuitId(ok).ok()) << ok;
  }
  EXPECT_EQ(ValidateCircuitId("").code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ValidateCircuitId("}x").message()), HasSubstr("empty Redis Cluster"));
  EXPECT_TRUE(ValidateCircuitId(std::string(kMaxCircuitIdBytes, 'x')).ok());
  EXPECT_FALSE(ValidateCircuitId(std::string(kMaxCircuitIdBytes + 1, 'x')).ok());
  // docs/distributed.md promises 1024 bytes.
  EXPECT_TRUE(ValidateCircuitId(std::string(1024, 'x')).ok());
  EXPECT_FALSE(ValidateCircuitId(std::string(1025, 'x')).ok());
}

// Slots from the Redis Cluster specification and CLUSTER KEYSLOT's
// documentation; the integration test compares more with a real server.
TEST(KeySlot, KnownSlots) {
  EXPECT_EQ(KeySlot("123456789"), 0x31C3 & 16383);
  EXPECT_EQ(KeySlot("somekey"), 11058);
  EXPECT_EQ(KeySlot("foo{hash_tag}"), 2515);
  EXPECT_EQ(KeySlot("foo"), 12182);
  EXPECT_EQ(KeySlot(""), 0);
}

TEST(KeySlot, HashTagRules) {
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("{user1000}.followers"));
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("user1000"));
  // Empty tag: the whole key is hashed (CRC16-XMODEM of all ten bytes,
  // mod 16384, computed independently), not the empty tag.
  EXPECT_EQ(KeySlot("foo{}{bar}"), 8363);
  EXPECT_EQ(KeySlot("{}"), 15257);
  EXPECT_NE(KeySlot("foo{}{bar}"), KeySlot(""));
  EXPECT_NE(KeySlot("foo{}{bar}"), KeySlot("bar"));
  // Only the first '{' counts, up to the first '}' after it.
  EXPECT_EQ(KeySlot("foo{{bar}}zap"), KeySlot("{bar"));
  EXPECT_EQ(KeySlot("foo{bar}{zap}"), KeySlot("bar"));
  // No closing brace: the whole key.
  EXPECT_EQ(KeySlot("foo{bar"), KeySlot(std::string_view("foo{bar")));
}

// T13: every key a script touches is in one slot, for awkward ids too.
TEST(KeySlot, T13_AllKeysOfACircuitShareASlot) {
  const Keyspace ks;
  Result<Keyspace> other = Keyspace::Create("tenant 9:");
  ASSERT_TRUE(other.has_value());
  for (const char* circuit : {"c", "meta:ig:1784:insights", "a b", "a}b", "a{b", "{x}", "x}",
                              "\xff\x00z", "ig:1784}:open"}) {
    for (const Keyspace* k : {&ks, static_cast<const Keyspace*>(&*other)}) {
      ASSERT_TRUE(ValidateCircuitId(circuit).ok());
      const CircuitKeys keys = k->Keys(circuit);
      EXPECT_EQ(KeySlot(keys.open), KeySlot(keys.trip)) << circuit;
      EXPECT_EQ(KeySlot(keys.open), KeySlot(keys.lease)) << circuit;
      EXPECT_EQ(KeySlot(keys.open), KeySlot(keys.overrides)) << circuit;
    }
  }
  // And different circuits spread over slots.
  EXPECT_NE(KeySlot(ks.Keys("a").open), KeySlot(ks.Keys("b").open));
}

TEST(ParseEvent, OpenAndClosed) {
  Result<CircuitEvent> e = ParseEvent("meta:ig:1784 open 7 60000");
  ASSERT_TRUE(e.has_value()) << e.error();
  EXPECT_EQ(e->circuit, "meta:ig:1784");
  EXPECT_EQ(e->kind, CircuitEvent::Kind::kOpen);
  EXPECT_EQ(e->gen, 7);
  EXPECT_EQ(e->remaining, milliseconds(60000));

  e = ParseEvent("meta:ig:1784 closed");
  ASSERT_TRUE(e.has_value()) << e.error();
  EXPECT_EQ(e->circuit, "meta:ig:1784");
  EXPECT_EQ(e->kind, CircuitEvent::Kind::kClosed);
  EXPECT_EQ(e->gen, 0);
}

TEST(ParseEvent, CircuitIdsWithSpacesAndKeywordsParseFromTheEnd) {
  Result<CircuitEvent> e = ParseEvent("a b closed open 3 10");
  ASSERT_TRUE(e.has_value()) << e.error();
  EXPECT_EQ(e->circuit, "a b closed");
  EXPECT_EQ(e->kind, CircuitEvent::Kind::kOpen);
  e = ParseEvent("x open 1 2 closed");
  ASSERT_TRUE(e.has_value()) << e.error();
  EXPECT_EQ(e->circuit, "x open 1 2");
  EXPECT_EQ(e->kind, CircuitEvent::Kind::kClosed);
}

TEST(ParseEvent, RoundTripsWithFormat) {
  for (const char* circuit : {"c", "a b", "x open 1 2", "q closed", "{t}"}) {
    Result<CircuitEvent> open = ParseEvent(FormatOpenEvent(circuit, 42, milliseconds(1500)));
    ASSERT_TRUE(open.has_value()) << open.error();
    EXPECT_EQ(*open, (CircuitEvent{circuit, CircuitEvent::Kind::kOpen, 42, milliseconds(1500)}));
    Result<CircuitEvent> closed = ParseEvent(FormatClosedEvent(circuit));
    ASSERT_TRUE(closed.has_value()) << closed.error();
    EXPECT_EQ(*closed, (CircuitEvent{circuit, CircuitEvent::Kind::kClosed, 0, Duration::zero()}));
  }
}

TEST(ParseEvent, MalformedPayloadsSayWhatIsWrong) {
  struct Case {
    std::string payload;
    const char* says;
  } cases[] = {
      {"", "expected"},
      {"closed", "expected"},
      {" closed", "circuit id is empty"},
      {"c open 1", "generation"},
      {"c open 1 x", "remaining time"},
      {"c open x 1", "generation"},
      {"c open -1 5", "generation"},
      {"c open 1 -5", "remaining time"},
      {"c open 1 ", "remaining time"},
      {"c shut 1 2", "expected the word"},
      {" open 1 2", "circuit id is empty"},
      {"open 1 2", "expected the word"},
      {"c open 1 99999999999999999999", "remaining time"},
      {"c open 1 1000000000001", "above 10^12 ms"},
      {"}c closed", "must not start with '}'"},
      {"c opened", "remaining time"},
  };
  for (const Case& c : cases) {
    Result<CircuitEvent> e = ParseEvent(c.payload);
    ASSERT_FALSE(e.has_value()) << "\"" << c.payload << "\" parsed";
    EXPECT_EQ(e.error().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(e.error().message()), HasSubstr(c.says)) << c.payload;
  }
}

TEST(ParseEvent, LongPayloadsAreCutInMessages) {
  Result<CircuitEvent> e = ParseEvent(std::string(500, 'x'));
  ASSERT_FALSE(e.has_value());
  EXPECT_LT(e.error().message().size(), 200u);
}

}  // namespace
}  // namespace fusebox::redis

namespace fusebox::redis {
namespace {

TEST(ParseEvent, OverridesRoundTripWithFreeTextActorAndReason) {
  SharedOverride o;
  o.kind = SharedOverride::Kind::kForcedOpen;
  o.expires_after = std::chrono::minutes(10);
  o.actor = "kim (on call)";
  o.reason = "incident 42: Graph API \"blocked\"\nsee runbook";
  const std::string payload = FormatOverrideEvent("meta:read:1784 x:quota", o);
  EXPECT_EQ(payload.find('\n'), std::string::npos);
  auto e = ParseEvent(payload);
  ASSERT_TRUE(e.has_value()) << e.error();
  EXPECT_EQ(e->kind, CircuitEvent::Kind::kOverride);
  EXPECT_EQ(e->circuit, "meta:read:1784 x:quota");
  EXPECT_EQ(e->override_, o);

  SharedOverride lifted;  // kLifted, no text
  e = ParseEvent(FormatOverrideEvent("c", lifted));
  ASSERT_TRUE(e.has_value()) << e.error();
  EXPECT_EQ(e->override_, lifted);
}

TEST(ParseEvent, AnOpenEventOfACircuitNamedLikeAnOverrideStillParses) {
  auto e = ParseEvent("a override FORCED_OPEN open 3 1500");
  ASSERT_TRUE(e.has_value()) << e.error();
  EXPECT_EQ(e->kind, CircuitEvent::Kind::kOpen);
  EXPECT_EQ(e->circuit, "a override FORCED_OPEN");
  EXPECT_FALSE(ParseEvent("c override BOGUS 10 - -").has_value());
  EXPECT_FALSE(ParseEvent("c override FORCED_OPEN 10 zz -").has_value());
}

TEST(HexEncode, RoundTripsAnyBytes) {
  const std::string bytes("\0\x01 a\xff", 5);
  EXPECT_EQ(HexEncode(bytes), "00012061ff");
  EXPECT_EQ(HexDecode(HexEncode(bytes)), bytes);
  EXPECT_EQ(HexEncode(""), "-");
  EXPECT_EQ(HexDecode("-"), std::string());
  EXPECT_FALSE(HexDecode("abc").has_value());
  EXPECT_FALSE(HexDecode("0G").has_value());
}

}  // namespace
}  // namespace fusebox::redis
