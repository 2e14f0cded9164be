// libFuzzer target: the fake upstream's route tables (PUT /_fake/routes JSON
// and `fusebox fake-upstream --script` YAML) on any text. Properties checked:
// no crash, no sanitizer report, and every JSON table that parses round-trips
// through FakeRoutesToJson to the same routes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "apps/gateway/fake_upstream.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  using fusebox::gateway::FakeRoute;
  fusebox::Result<std::vector<FakeRoute>> json = fusebox::gateway::ParseFakeRoutesJson(text);
  if (json.has_value()) {
    auto again = fusebox::gateway::ParseFakeRoutesJson(fusebox::gateway::FakeRoutesToJson(*json));
    if (!again.has_value() || again->size() != json->size()) std::abort();
    for (std::size_t i = 0; i < json->size(); ++i) {
      if ((*again)[i].path != (*json)[i].path ||
          (*again)[i].responses.size() != (*json)[i].responses.size()) {
        std::abort();
      }
    }
  }
  (void)fusebox::gateway::ParseFakeRoutesYaml(text);
  return 0;
}
