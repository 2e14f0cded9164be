// The route tables of FakeUpstream: JSON (PUT /_fake/routes) and YAML
// (`fusebox fake-upstream --script`). YAML is converted to JSON first, with
// the position of every value remembered, so that one reader checks both and
// a YAML error still names its line and column.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "apps/gateway/fake_upstream.h"
#include "apps/gateway/fake_upstream_internal.h"
#include "fusebox/yaml/config.h"

namespace fusebox::gateway {
namespace {

using Json = nlohmann::json;

// A reader error: where (a path such as "routes[0].status") and what.
struct ReadError {
  std::string path;
  std::string message;
};

// JSON text; bytes that are not UTF-8 (YAML lets them through) become U+FFFD
// rather than an exception.
std::string Dump(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string Quoted(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

std::optional<ReadError> ReadInt(const Json& value, const std::string& path, std::int64_t min,
                                 std::int64_t max, std::int64_t& out) {
  if (!value.is_number_integer() ||
      (value.is_number_unsigned() &&
       value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) ||
      value.get<std::int64_t>() < min || value.get<std::int64_t>() > max) {
    return ReadError{path, "expected an integer " + std::to_string(min) + ".." +
                               std::to_string(max) + ", got " + Quoted(value)};
  }
  out = value.get<std::int64_t>();
  return std::nullopt;
}

std::optional<ReadError> ReadResponse(const Json& in, const std::string& path,
                                      std::vector<FakeResponse>& out) {
  if (!in.is_object()) return ReadError{path, "expected an object, got " + Quoted(in)};
  FakeResponse response;
  std::int64_t repeat = 1;
  for (const auto& [key, value] : in.items()) {
    const std::string at = path + "." + key;
    std::int64_t number = 0;
    if (key == "status") {
      if (auto e = ReadInt(value, at, 100, 599, number)) return e;
      response.status = static_cast<int>(number);
    } else if (key == "headers") {
      if (!value.is_object()) return ReadError{at, "expected an object of name: value"};
      for (const auto& [name, header] : value.items()) {
        if (!IsHttpToken(name)) return ReadError{at, "\"" + name + "\" is not a header name"};
        std::string text;
        if (header.is_string()) {
          text = header.get<std::string>();
        } else if (header.is_number() || header.is_boolean()) {
          text = Dump(header);
        } else {
          return ReadError{at + "." + name, "expected a string or a number, got " + Quoted(header)};
        }
        if (text.find_first_of("\r\n") != std::string::npos) {
          return ReadError{at + "." + name, "a header value cannot contain a line break"};
        }
        response.headers.emplace_back(name, std::move(text));
      }
    } else if (key == "body") {
      // A string is sent as is; any other JSON value is sent as its JSON
      // text, so that scripts can write Meta's bodies as plain mappings.
      response.body = value.is_string() ? value.get<std::string>() : Dump(value);
    } else if (key == "latency_ms") {
      if (auto e = ReadInt(value, at, 0, 600'000, number)) return e;
      response.latency = std::chrono::milliseconds(number);
    } else if (key == "drop") {
      if (!value.is_boolean()) return ReadError{at, "expected true or false, got " + Quoted(value)};
      response.drop = value.get<bool>();
    } else if (key == "repeat") {
      if (auto e = ReadInt(value, at, 1, 10'000, repeat)) return e;
    } else {
      return ReadError{at,
                       "unknown key; expected status, headers, body, latency_ms, drop or repeat"};
    }
  }
  for (std::int64_t i = 0; i < repeat; ++i) out.push_back(response);
  return std::nullopt;
}

std::optional<ReadError> ReadRoute(const Json& in, const std::string& path, FakeRoute& route) {
  if (!in.is_object()) return ReadError{path, "expected an object, got " + Quoted(in)};
  bool has_responses = false;
  for (const auto& [key, value] : in.items()) {
    const std::string at = path + "." + key;
    if (key == "method" || key == "path") {
      if (!value.is_string()) return ReadError{at, "expected a string, got " + Quoted(value)};
      (key == "method" ? route.method : route.path) = value.get<std::string>();
    } else if (key == "responses") {
      if (!value.is_array()) return ReadError{at, "expected a list of responses"};
      has_responses = true;
      for (std::size_t i = 0; i < value.size(); ++i) {
        if (auto e = ReadResponse(value[i], at + "[" + std::to_string(i) + "]", route.responses)) {
          return e;
        }
      }
    } else {
      return ReadError{at, "unknown key; expected method, path or responses"};
    }
  }
  if (route.method.empty()) route.method = "GET";
  if (route.path.empty()) return ReadError{path + ".path", "missing"};
  if (!has_responses) return ReadError{path + ".responses", "missing"};
  if (Status s = ValidateFakeRoute(route); !s.ok()) {
    return ReadError{path, std::string(s.message())};
  }
  return std::nullopt;
}

std::optional<ReadError> ReadTable(const Json& in, std::vector<FakeRoute>& routes) {
  if (!in.is_object()) return ReadError{"", "expected an object {\"routes\": [...]}"};
  for (const auto& [key, value] : in.items()) {
    if (key != "routes") return ReadError{key, "unknown key; expected routes"};
  }
  if (!in.contains("routes")) return ReadError{"routes", "missing"};
  const Json& list = in["routes"];
  if (!list.is_array()) return ReadError{"routes", "expected a list of routes"};
  for (std::size_t i = 0; i < list.size(); ++i) {
    FakeRoute route;
    if (auto e = ReadRoute(list[i], "routes[" + std::to_string(i) + "]", route)) return e;
    for (const FakeRoute& other : routes) {
      if (other.method == route.method && other.path == route.path) {
        return ReadError{"routes[" + std::to_string(i) + "]",
                         "a second route for " + route.method + " " + route.path};
      }
    }
    routes.push_back(std::move(route));
  }
  return std::nullopt;
}

// --- YAML -> JSON ---------------------------------------------------------------------

using Marks = std::map<std::string, YAML::Mark>;

std::string MarkText(const YAML::Mark& mark) {
  return std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

// Copies a yaml-cpp tree into JSON under the configuration loader's limits
// (fusebox/yaml/config.h): yaml-cpp shares an alias's node, the copy does not,
// so a few lines of aliases could otherwise describe gigabytes.
class YamlToJson {
 public:
  // The JSON, or why it was refused, with the position where it happened.
  Result<Json> Convert(const YAML::Node& root, Marks& marks) {
    Json out = Copy(root, "", marks, 0);
    if (!refusal_.empty()) return Status::InvalidArgument(refusal_);
    return out;
  }

 private:
  Json Copy(const YAML::Node& node, const std::string& path, Marks& marks, int depth) {
    if (!refusal_.empty()) return nullptr;
    if (++values_ > yaml::kMaxYamlValues) {
      return Refuse(node, "more than " + std::to_string(yaml::kMaxYamlValues) +
                              " values (aliases expanding?)");
    }
    if (depth > yaml::kMaxYamlDepth) {
      return Refuse(node, "nested more than " + std::to_string(yaml::kMaxYamlDepth) +
                              " levels deep (an alias that contains itself?)");
    }
    // The path is held twice (the marks' key, and the children's prefix), a
    // scalar once: a long one aliased many times is few values but much text.
    bytes_ += 2 * path.size() + (node.IsScalar() ? node.Scalar().size() : 0);
    if (bytes_ > yaml::kMaxYamlExpandedBytes) {
      return Refuse(node, "more than " + std::to_string(yaml::kMaxYamlExpandedBytes >> 20) +
                              " MiB of text (long values that aliases repeat?)");
    }
    marks.emplace(path, node.Mark());
    switch (node.Type()) {
      case YAML::NodeType::Map: {
        Json object = Json::object();
        for (const auto& item : node) {
          const std::string key = item.first.Scalar();
          object[key] = Copy(item.second, path.empty() ? key : path + "." + key, marks, depth + 1);
        }
        return object;
      }
      case YAML::NodeType::Sequence: {
        Json array = Json::array();
        for (std::size_t i = 0; i < node.size(); ++i) {
          array.push_back(Copy(node[i], path + "[" + std::to_string(i) + "]", marks, depth + 1));
        }
        return array;
      }
      case YAML::NodeType::Scalar: {
        const std::string& text = node.Scalar();
        // A quoted scalar ("429") stays a string; a plain one is typed as YAML
        // 1.2's core schema would.
        if (node.Tag() == "!") return text;
        if (text == "true" || text == "false") return text == "true";
        if (text == "null" || text == "~") return nullptr;
        if (!text.empty() && text.size() < 19 &&
            text.find_first_not_of("-0123456789") == std::string::npos &&
            text.find('-', 1) == std::string::npos && text != "-") {
          return std::stoll(text);
        }
        return text;
      }
      default:
        return nullptr;
    }
  }

  Json Refuse(const YAML::Node& node, const std::string& why) {
    refusal_ = MarkText(node.Mark()) + ": " + why;
    return nullptr;
  }

  int values_ = 0;
  std::size_t bytes_ = 0;
  std::string refusal_;
};

Result<std::vector<FakeRoute>> ParseYaml(std::string_view text) {
  if (text.size() > yaml::kMaxYamlBytes) {
    return Status::InvalidArgument("1:1: larger than " + std::to_string(yaml::kMaxYamlBytes >> 20) +
                                   " MiB");
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(MarkText(e.mark) + ": " + e.msg);
  }
  Marks marks;
  Result<Json> converted = YamlToJson().Convert(root, marks);
  if (!converted) return converted.error();
  const Json& json = *converted;
  std::vector<FakeRoute> routes;
  if (auto e = ReadTable(json, routes)) {
    // The closest position known: the value itself, else its parent's.
    std::string where = e->path;
    auto found = marks.find(where);
    while (found == marks.end() && !where.empty()) {
      const std::size_t cut = where.find_last_of(".[");
      where = cut == std::string::npos ? "" : where.substr(0, cut);
      found = marks.find(where);
    }
    const std::string position = found == marks.end() ? "1:1" : MarkText(found->second);
    return Status::InvalidArgument(position + ": " + (e->path.empty() ? "" : e->path + ": ") +
                                   e->message);
  }
  return routes;
}

}  // namespace

bool IsHttpToken(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

Status ValidateFakeRoute(const FakeRoute& route) {
  const std::string name = route.method + " " + route.path;
  if (!IsHttpToken(route.method)) {
    return Status::InvalidArgument("method \"" + route.method + "\" is not an HTTP method");
  }
  if (!route.path.starts_with("/") || route.path.find_first_of("?# \t\r\n") != std::string::npos) {
    return Status::InvalidArgument("path \"" + route.path +
                                   "\" must start with / and have no query, space or #");
  }
  if (route.path.starts_with("/_fake")) {
    return Status::InvalidArgument("path \"" + route.path + "\": /_fake/ is the control API");
  }
  if (route.responses.empty()) {
    return Status::InvalidArgument(name + ": at least one response is needed");
  }
  for (const FakeResponse& r : route.responses) {
    if (r.status < 100 || r.status > 599) {
      return Status::InvalidArgument(name + ": status " + std::to_string(r.status) +
                                     " is not 100..599");
    }
    if (r.latency < Duration::zero()) return Status::InvalidArgument(name + ": negative latency");
    for (const auto& [header, value] : r.headers) {
      if (!IsHttpToken(header) || value.find_first_of("\r\n") != std::string::npos) {
        return Status::InvalidArgument(name + ": bad header \"" + header + "\"");
      }
    }
  }
  return Status();
}

Result<std::vector<FakeRoute>> ParseFakeRoutesJson(std::string_view text) {
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    // Parse again for the position; the exception stays inside this function.
    // Not only parse_error: a number too large for a double is out_of_range.
    try {
      json = Json::parse(text);
    } catch (const Json::exception& e) {
      return Status::InvalidArgument(std::string("not JSON: ") + e.what());
    }
    return Status::InvalidArgument("not JSON");
  }
  std::vector<FakeRoute> routes;
  if (auto e = ReadTable(json, routes)) {
    return Status::InvalidArgument((e->path.empty() ? "" : e->path + ": ") + e->message);
  }
  return routes;
}

Result<std::vector<FakeRoute>> ParseFakeRoutesYaml(std::string_view yaml) {
  return ParseYaml(yaml);
}

Result<std::vector<FakeRoute>> LoadFakeScript(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return Status::InvalidArgument(path + ": cannot read the file");
  // One byte past the limit is enough to refuse the file: no more is read.
  std::string text(yaml::kMaxYamlBytes + 1, '\0');
  file.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(file.gcount()));
  Result<std::vector<FakeRoute>> routes = ParseYaml(text);
  if (!routes) return Status::InvalidArgument(path + ":" + std::string(routes.error().message()));
  return routes;
}

std::string FakeRoutesToJson(const std::vector<FakeRoute>& routes) {
  Json list = Json::array();
  for (const FakeRoute& route : routes) {
    Json responses = Json::array();
    for (const FakeResponse& r : route.responses) {
      Json headers = Json::object();
      for (const auto& [name, value] : r.headers) headers[name] = value;
      Json response = {{"status", r.status}, {"headers", headers}, {"body", r.body}};
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(r.latency).count();
      if (ms > 0) response["latency_ms"] = ms;
      if (r.drop) response["drop"] = true;
      responses.push_back(std::move(response));
    }
    list.push_back({{"method", route.method}, {"path", route.path}, {"responses", responses}});
  }
  return Json{{"routes", list}}.dump(-1, ' ', false, Json::error_handler_t::replace);
}

bool FakePathMatches(std::string_view pattern, std::string_view path) {
  while (true) {
    if (pattern == "/**") return true;
    if (pattern.empty() || path.empty()) return pattern.empty() && path.empty();
    if (pattern[0] != '/' || path[0] != '/') return false;
    pattern.remove_prefix(1);
    path.remove_prefix(1);
    const std::size_t p_end = std::min(pattern.find('/'), pattern.size());
    const std::size_t s_end = std::min(path.find('/'), path.size());
    const std::string_view want = pattern.substr(0, p_end);
    const std::string_view got = path.substr(0, s_end);
    if (want == "*" ? got.empty() : want != got) return false;
    pattern.remove_prefix(p_end);
    path.remove_prefix(s_end);
  }
}

}  // namespace fusebox::gateway
