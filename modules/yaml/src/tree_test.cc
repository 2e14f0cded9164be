#include "src/tree.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace fusebox::yaml::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// `text` loads as one tree, with no error. Assertion results, so that a
// failure names the caller's line.
::testing::AssertionResult Loads(const std::string& text) {
  Diagnostics diags("t.yml");
  const bool loaded = ParseTree(text, diags).has_value();
  if (loaded && !diags.has_errors()) return ::testing::AssertionSuccess();
  auto failure = ::testing::AssertionFailure() << (loaded ? "loaded, with errors:" : "refused:");
  for (const std::string& e : diags.errors()) failure << "\n  " << e;
  return failure;
}

// `text` is refused with exactly one error, which contains `message`.
::testing::AssertionResult RefusedWith(const std::string& text, std::string_view message) {
  Diagnostics diags("t.yml");
  if (ParseTree(text, diags).has_value()) return ::testing::AssertionFailure() << "loaded";
  const std::vector<std::string> errors = diags.errors();
  if (errors.size() != 1) return ::testing::AssertionFailure() << errors.size() << " errors";
  if (errors[0].find(message) == std::string::npos) {
    return ::testing::AssertionFailure() << "the error is: " << errors[0];
  }
  return ::testing::AssertionSuccess();
}

TEST(YamlTree, DottedKeysArePathsWithTheColumnOfEachSegment) {
  Diagnostics diags("t.yml");
  std::optional<Node> root = ParseTree("a.b.c: 1\n", diags);
  ASSERT_TRUE(root.has_value());
  const Node* a = root->Find("a");
  ASSERT_NE(a, nullptr);
  const Node* c = a->Find("b")->Find("c");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->scalar, "1");
  EXPECT_EQ(c->path, "a.b.c");
  EXPECT_EQ(c->key_mark.line, 1);
  EXPECT_EQ(c->key_mark.column, 5);  // "c" is the fifth character
  EXPECT_EQ(c->mark.column, 8);
  EXPECT_THAT(diags.errors(), IsEmpty());
}

TEST(YamlTree, BracketsKeepADottedSegmentWhole) {
  Diagnostics diags("t.yml");
  std::optional<Node> root = ParseTree("instances.[v1.2].x: 1\n", diags);
  ASSERT_TRUE(root.has_value());
  const Node* v = root->Find("instances")->Find("v1.2");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->Find("x")->path, "instances.[v1.2].x");
}

TEST(YamlTree, MapsReachedTwiceMergeButScalarsDoNot) {
  Diagnostics diags("t.yml");
  std::optional<Node> root = ParseTree("a.b: 1\na:\n  c: 2\n  b: 3\n", diags);
  ASSERT_TRUE(root.has_value());
  EXPECT_EQ(root->Find("a")->Find("c")->scalar, "2");
  EXPECT_THAT(diags.errors(),
              ElementsAre("t.yml:4:3: a.b: given twice (first at line 1, column 3)"));
}

TEST(YamlTree, BadKeysAreReported) {
  Diagnostics diags("t.yml");
  std::optional<Node> root = ParseTree("a..b: 1\n[x, y]: 2\n", diags);
  ASSERT_TRUE(root.has_value());
  EXPECT_THAT(diags.errors(),
              ElementsAre("t.yml:1:1: a..b: bad key: empty segment or unclosed '[' (write a "
                          "dotted name in brackets, \"[a.b]\")",
                          "t.yml:2:1: a key must be a string, not a list or a map"));
}

TEST(YamlTree, SyntaxErrorsStopWithTheirPosition) {
  Diagnostics diags("t.yml");
  EXPECT_FALSE(ParseTree("a: [1, 2\n", diags).has_value());
  EXPECT_THAT(diags.errors(),
              ElementsAre("t.yml:2:1: not valid YAML: end of sequence flow not found"));
}

// Invalid UTF-8 is refused before yaml-cpp sees it (the fuzzer found inputs
// with 0xFF runs that took it seconds), naming the line, column and byte;
// valid multi-byte text passes.
TEST(YamlTree, InvalidUtf8IsRefusedWithItsPosition) {
  Diagnostics bad("t.yml");
  EXPECT_FALSE(ParseTree("a: 1\nb\xc3\xbc\xff: 2\n", bad).has_value());
  EXPECT_THAT(bad.errors(), ElementsAre("t.yml:2:3: not valid UTF-8 (byte 0xFF)"));
  for (const char* text :
       {"a: \xed\xa0\x80\n", "a: \xc0\xaf\n", "a: \xf4\x90\x80\x80\n", "a: \xe2\x82\n"}) {
    Diagnostics d("t.yml");
    EXPECT_FALSE(ParseTree(text, d).has_value()) << text;
    EXPECT_THAT(d.errors(), ElementsAre(::testing::HasSubstr("not valid UTF-8"))) << text;
  }
  Diagnostics good("t.yml");
  EXPECT_TRUE(ParseTree("\xea\xb2\xb0\xec\xa0\x9c: \"\xf0\x9f\x98\x80\"\n", good).has_value());
  EXPECT_THAT(good.errors(), ::testing::IsEmpty());
}

// Quoted keys may hold any character; a message must stay one line, and no
// terminal escape may pass through it.
TEST(YamlTree, ControlCharactersInMessagesAreEscaped) {
  Diagnostics diags("t.yml");
  (void)ParseTree("\"a\\nb\\e[31m\": 1\n\"a\\nb\\e[31m\": 2\n", diags);
  EXPECT_THAT(diags.errors(),
              ElementsAre("t.yml:2:1: a\\x0ab\\x1b[31m: given twice (first at line 1, column 1)"));
}

// Aliases share nodes in yaml-cpp; our copy of them is bounded.
TEST(YamlTree, AliasBombIsBounded) {
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 8; ++i) {
    text += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) text += std::string(j ? ", " : "") + "*a" + std::to_string(i - 1);
    text += "]\n";
  }
  Diagnostics diags("t.yml");
  (void)ParseTree(text, diags);
  EXPECT_TRUE(diags.has_errors());
}

// yaml-cpp builds a cycle for an anchor merged into itself; one error, at
// its start, not one per branch.
TEST(YamlTree, AliasCycleIsOneError) {
  EXPECT_TRUE(RefusedWith("s: &s\n  a:\n    <<: *s\n  b:\n    <<: *s\n",
                          ": s: nested more than 64 levels deep"));
}

// docs/configuration.md: documents nested over 64 levels or of over 100,000
// values are refused; 64 levels and 100,000 values load.
TEST(YamlTree, TheDepthAndValueLimitsAreExact) {
  auto nested = [](int levels) {
    return std::string(static_cast<std::size_t>(levels), '[') + "x" +
           std::string(static_cast<std::size_t>(levels), ']');
  };
  EXPECT_TRUE(Loads(nested(64)));
  EXPECT_TRUE(RefusedWith(nested(65), "nested more than 64 levels deep"));
  // A sequence of n scalars is n + 1 values.
  auto flat = [](int items) {
    std::string text = "[x";
    for (int i = 1; i < items; ++i) text += ",x";
    return text + "]";
  };
  EXPECT_TRUE(Loads(flat(99'999)));
  EXPECT_TRUE(RefusedWith(flat(100'000), "more than 100000 values"));
}

// yaml-cpp 0.7's LoadAll loops for ever on a ',' that starts a document,
// allocating as it goes (16 GB in a minute); it is refused at its position.
// Empty and null documents, which also start with no node, still load.
TEST(YamlTree, AStrayCommaIsAnErrorNotAnEndlessLoop) {
  for (const char* text : {",", ",\n", "\n\n, x", "a: 1\n---\n,\n"}) {
    Diagnostics diags("t.yml");
    EXPECT_FALSE(ParseDocuments(text, diags).has_value()) << text;
    ASSERT_EQ(diags.errors().size(), 1u) << text;
    EXPECT_THAT(diags.errors()[0], ::testing::HasSubstr(": not valid YAML: a token that belongs "
                                                        "to no node (a ',' outside [ ] or { }?)"));
  }
  Diagnostics diags("t.yml");
  EXPECT_FALSE(ParseDocuments("a: 1\n---\n,\n", diags).has_value());
  EXPECT_THAT(diags.errors()[0], ::testing::StartsWith("t.yml:3:1: "));

  struct Case {
    const char* text;
    std::size_t documents;
  };
  for (const Case c : {Case{"~", 1}, Case{"---\n---\na: 1\n", 2}, Case{"---\n...\n---\n", 2},
                       Case{"~\n---\n~\n", 2}, Case{"[a, b]\n---\n{c: d}\n", 2}}) {
    Diagnostics ok("t.yml");
    const auto docs = ParseDocuments(c.text, ok);
    ASSERT_TRUE(docs.has_value()) << c.text;
    EXPECT_EQ(docs->size(), c.documents) << c.text;
    EXPECT_THAT(ok.errors(), IsEmpty());
  }
}

// docs/configuration.md: a document whose text passes 32 MiB once its aliases
// are expanded is refused (a 7 KiB file of long strings aliased in a few
// levels held 1 GB before); one under it loads. Paths and keys count: a long
// key above many values is as much text as a long value.
TEST(YamlTree, TheExpandedTextLimitIsThirtyTwoMiB) {
  const std::string half = "\"" + std::string(std::size_t{1} << 19, 'v') + "\"";
  auto aliased = [&](int copies) {
    std::string text = "x: &x " + half + "\nl: [*x";
    for (int i = 1; i < copies; ++i) text += ",*x";
    return text + "]\n";
  };
  EXPECT_TRUE(Loads(aliased(62)));  // (1 + 62) / 2 MiB, and a few bytes of paths
  EXPECT_TRUE(RefusedWith(aliased(64),
                          "t.yml:1:4: l[62]: more than 32 MiB of text (long values "
                          "that aliases repeat?)"));
  {
    // 1,000-byte keys three deep over 5,555 short values: each value's path
    // is 3 KB, 17 MB in all, under the limit; 13,332 of them pass it (and stay
    // far under the 100,000-value limit).
    const std::string key(1000, 'k');
    auto keyed = [&](int tens) {
      std::string text = "a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a";
      for (int i = 1; i < 10; ++i) text += ",*a";
      text += "]\nc: &c [*b";
      for (int i = 1; i < 10; ++i) text += ",*b";
      text += "]\n" + key + ":\n  " + key + ":\n    " + key + ": [*c";
      for (int i = 1; i < tens; ++i) text += ",*c";
      return text + "]\n";
    };
    EXPECT_TRUE(Loads(keyed(5)));
    EXPECT_TRUE(RefusedWith(keyed(12), "more than 32 MiB of text"));
  }
}

// docs/configuration.md: files over 1 MiB are refused; 1 MiB loads.
TEST(YamlTree, TheSizeLimitIsOneMiB) {
  const std::string head = "a: 1\n#";
  std::string text = head + std::string((std::size_t{1} << 20) - head.size() - 1, 'c') + "\n";
  ASSERT_EQ(text.size(), std::size_t{1} << 20);
  EXPECT_TRUE(Loads(text));
  text.insert(head.size(), "c");
  EXPECT_TRUE(RefusedWith(text, "larger than 1 MiB"));
}

}  // namespace
}  // namespace fusebox::yaml::internal
