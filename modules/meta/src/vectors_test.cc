// Every vector of testdata/meta_vectors_dev.jsonl (the shared Meta signal
// vectors, docs/meta.md) through Classify() with the default
// rules: expect_class and expect_retry_after_s (null unless rate-limit).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "fusebox/meta/classify.h"
#include "src/json.h"

namespace fusebox::meta {
namespace {

TEST(MetaVectors, EveryDevVectorClassifiesAsExpected) {
  std::ifstream in(std::string(FUSEBOX_META_TESTDATA) + "/meta_vectors_dev.jsonl");
  ASSERT_TRUE(in) << "cannot open the vectors";
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::optional<internal::JsonValue> v = internal::ParseJson(line);
    ASSERT_TRUE(v.has_value()) << line;
    const std::string name = v->Find("name")->string;
    Response r;
    r.status = static_cast<int>(v->Find("status")->integer);
    for (const auto& [n, value] : v->Find("headers")->members)
      r.headers.emplace_back(n, value.string);
    r.body = v->Find("body")->string;
    const Classification c = Classify(r);
    EXPECT_EQ(KindName(c.kind), v->Find("expect_class")->string) << name << ": " << c.reason;
    const internal::JsonValue* ra = v->Find("expect_retry_after_s");
    ASSERT_NE(ra, nullptr) << name;
    if (ra->is_number()) {
      ASSERT_TRUE(c.retry_after.has_value()) << name;
      EXPECT_EQ(c.retry_after->count(), ra->integer) << name << ": " << c.reason;
    } else {
      EXPECT_FALSE(c.retry_after.has_value()) << name;
    }
    ++checked;
  }
  EXPECT_GE(checked, 36);
}

}  // namespace
}  // namespace fusebox::meta
