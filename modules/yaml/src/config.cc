// Loading a configuration file (fusebox/yaml/config.h): one SectionLoader per
// policy section (its configs and instances, inheritance, the environment),
// the Loader of the whole document, and FormatConfig.
//
// Over 1,000 lines on purpose: SectionLoader and Loader share this file's
// private Value and Layer types and its diagnostics helpers; apart, those
// would become a header that only these two use.
#include "fusebox/yaml/config.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/properties.h"
#include "src/tree.h"

extern char** environ;  // POSIX; read only by FuseboxEnvironment().

namespace fusebox::yaml {
namespace {

using internal::Canonical;
using internal::Closest;
using internal::Diagnostics;
using internal::KeyNote;
using internal::Mark;
using internal::Node;
using internal::Policy;

constexpr std::string_view kEnvPrefix = "FUSEBOX_";
// Spring's own mapping of resilience4j.* properties to environment variables.
constexpr std::string_view kSpringEnvPrefix = "RESILIENCE4J_";

std::string DidYouMean(std::string_view key, const std::vector<std::string_view>& candidates) {
  const std::string_view near = Closest(key, candidates);
  if (near.empty()) return "";
  return " (did you mean \"" + std::string(near) + "\"?)";
}

// "failureRateThreshold: expected ..." -> "expected ...": the path in front of
// every message already names the property.
std::string WithoutName(std::string_view message, std::string_view name) {
  if (message.size() > name.size() + 2 && message.substr(0, name.size()) == name &&
      message.substr(name.size(), 2) == ": ") {
    return std::string(message.substr(name.size() + 2));
  }
  return std::string(message);
}

// A rule as the core states it ends with ", got <value in its units>"; the
// reader knows the value as written ("0", "5s"), so say that instead.
std::string WithValue(std::string_view rule, std::string_view written) {
  const std::size_t got = rule.rfind(", got ");
  if (got == std::string_view::npos) return std::string(rule);
  return std::string(rule.substr(0, got)) + ", got " + std::string(written);
}

// "a, b,c" -> a, b, c: Spring's list of names in one scalar (a profile list,
// a class list); empty items are dropped.
std::vector<std::string> SplitNames(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front())))
      item.remove_prefix(1);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back())))
      item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

const char* KindText(Node::Kind kind) {
  switch (kind) {
    case Node::Kind::kNull:
      return "nothing";
    case Node::Kind::kScalar:
      return "a scalar";
    case Node::Kind::kSequence:
      return "a list";
    case Node::Kind::kMap:
      return "a map";
  }
  return "?";
}

// One property value and where it was given.
struct Value {
  std::string text;
  Mark mark;
  std::string path;
  // The environment variable it came from, or empty for the file.
  std::string env;
};

// A template or an instance before resolution: its own keys only.
struct Layer {
  std::string name;
  bool is_config = false;
  Mark mark;
  std::string path;
  std::optional<Value> base;
  // Property index (in the policy's table) to value.
  std::map<std::size_t, Value> values;
  // Name properties (recordExceptions, ...) to their names.
  NameLists names;
};

// What the environment pass needs of a section, whatever its settings type.
class SectionReader {
 public:
  virtual ~SectionReader() = default;
  virtual std::string_view env_section() const = 0;
  virtual void ReadSection(const Node& section) = 0;
  virtual void ApplyEnv(const std::string& variable, bool configs,
                        const std::vector<std::string>& tokens, const std::string& value) = 0;
  virtual void Resolve(Configuration& out) = 0;
};

template <typename S>
class SectionLoader final : public SectionReader {
 public:
  SectionLoader(const Policy<S>& policy, Diagnostics& diags, std::string path,
                Section<S> Configuration::*member)
      : policy_(policy), diags_(diags), path_(std::move(path)), member_(member) {}

  std::string_view env_section() const override { return policy_.env_section; }

  void ReadSection(const Node& section) override {
    if (section.kind == Node::Kind::kNull) return;
    if (section.kind != Node::Kind::kMap) {
      diags_.Error(
          section.mark, section.path,
          std::string("expected a map with configs and instances, got ") + KindText(section.kind));
      return;
    }
    std::optional<Mark> seen_configs, seen_instances;
    for (const Node& child : section.children) {
      const std::string canon = Canonical(child.key);
      if (canon == "configs" || canon == "instances") {
        const bool configs = canon == "configs";
        std::optional<Mark>& seen = configs ? seen_configs : seen_instances;
        if (seen) {
          diags_.Error(child.key_mark, child.path,
                       "given twice (first at line " + std::to_string(seen->line) + ", column " +
                           std::to_string(seen->column) + ")");
          continue;
        }
        seen = child.key_mark;
        ReadLayers(child, configs);
      } else if (canon == Canonical(policy_.aspect_order)) {
        diags_.Note(child.key_mark, child.path,
                    "ignored: Spring's aspect order; fusebox composes policies in one order "
                    "(docs/policies.md)");
      } else if (canon == "metrics") {
        // metrics.enabled, metrics.legacy.enabled, metrics.use-legacy-binder:
        // Micrometer binders of the Spring starter.
        diags_.Note(child.key_mark, child.path,
                    "ignored: Micrometer binder settings; fusebox's metrics are always kept and "
                    "exported as an exporter asks (docs/observability.md)");
      } else if (canon == "backends") {
        diags_.Error(child.key_mark, child.path,
                     "unknown key: \"backends\" was Resilience4j 1's name; use \"instances\"");
      } else {
        diags_.Error(child.key_mark, child.path,
                     "unknown key; expected configs or instances" +
                         DidYouMean(child.key, {"configs", "instances"}));
      }
    }
  }

  // Why `variable` set nothing: no known property ends its name, or no
  // declared entry of `where` has the name before the property.
  void EnvNamesNothing(const std::string& variable, const std::string& where, bool configs,
                       const std::string& last_token, bool any_property) {
    const std::string kind = configs ? "configs" : "instances";
    if (!any_property) {
      diags_.EnvError(variable, where,
                      "no property of " + std::string(policy_.section) + " ends the name" +
                          DidYouMean(last_token, PropertyNames()));
    } else {
      std::string declared;
      for (const Layer& layer : layers_) {
        if (layer.is_config == configs) declared += (declared.empty() ? "" : ", ") + layer.name;
      }
      diags_.EnvError(variable, where,
                      "no " + kind +
                          " entry has this name (upper case, '-' and '.' as '_'); "
                          "declared: " +
                          (declared.empty() ? "none" : declared));
    }
  }

  void ApplyEnv(const std::string& variable, bool configs, const std::vector<std::string>& tokens,
                const std::string& value) override {
    const std::string kind = configs ? "configs" : "instances";
    const std::string where = path_ + "." + kind;
    // tokens = NAME... PROPERTY...; try every split, keep those whose name is
    // a declared layer and whose property is known.
    // The layer a match names: an index into layers_, or kNewDefault for a
    // configs.default the environment creates (no pointers: layers_ grows).
    constexpr std::size_t kNewDefault = static_cast<std::size_t>(-1);
    struct Match {
      std::size_t layer;
      std::optional<std::size_t> index;  // nullopt: baseConfig
      std::string name;                  // the property's name
    };
    std::vector<Match> matches;
    bool any_property = false;
    for (std::size_t split = 1; split < tokens.size(); ++split) {
      std::string env_name, property;
      for (std::size_t i = 0; i < split; ++i) env_name += (i ? "_" : "") + tokens[i];
      for (std::size_t i = split; i < tokens.size(); ++i) property += tokens[i];
      const std::string canon = Canonical(property);
      std::optional<std::size_t> index;
      std::string name;
      if (canon == "baseconfig") {
        name = "baseConfig";
      } else if (std::optional<std::size_t> i = FindProperty(canon)) {
        index = i;
        name = std::string(policy_.properties[*i].name);
      } else {
        continue;
      }
      any_property = true;
      for (std::size_t l = 0; l < layers_.size(); ++l) {
        if (layers_[l].is_config == configs && EnvName(layers_[l].name) == env_name) {
          matches.push_back({l, index, name});
        }
      }
      // configs.default may be created from the environment alone: its name
      // is known, and it is the base of every instance.
      if (configs && env_name == "DEFAULT" && FindLayer("default", true) == nullptr) {
        matches.push_back({kNewDefault, index, name});
      }
    }
    if (matches.empty()) {
      EnvNamesNothing(variable, where, configs, tokens.back(), any_property);
      return;
    }
    if (matches.size() > 1) {
      diags_.EnvError(variable, where, "ambiguous: names more than one entry and property");
      return;
    }
    const Match& m = matches.front();
    std::size_t target = m.layer;
    if (target == kNewDefault) {
      Layer layer;
      layer.name = "default";
      layer.is_config = true;
      layer.path = internal::JoinPath(where, "default");
      target = layers_.size();
      layers_.push_back(std::move(layer));
    }
    Layer& layer = layers_[target];
    Value v{value, {}, internal::JoinPath(layer.path, m.name), variable};
    if (!m.index) {
      layer.base = std::move(v);
      return;
    }
    if (!CheckValue(*m.index, v)) return;
    layer.values[*m.index] = std::move(v);
  }

  void Resolve(Configuration& out) override {
    Section<S>& section = out.*member_;
    for (bool configs : {true, false}) {
      for (const Layer& layer : layers_) {
        if (layer.is_config != configs) continue;
        std::optional<S> s = ResolveLayer(layer);
        if (!s) continue;
        (configs ? section.configs : section.instances).push_back({layer.name, std::move(*s)});
      }
    }
  }

 private:
  std::vector<std::string_view> PropertyNames() const {
    std::vector<std::string_view> names;
    for (const auto& p : policy_.properties) names.push_back(p.name);
    return names;
  }

  std::optional<std::size_t> FindProperty(std::string_view canon) const {
    for (std::size_t i = 0; i < policy_.properties.size(); ++i) {
      if (Canonical(policy_.properties[i].name) == canon) return i;
    }
    return std::nullopt;
  }

  Layer* FindLayer(std::string_view name, bool configs) {
    for (Layer& layer : layers_) {
      if (layer.is_config == configs && layer.name == name) return &layer;
    }
    return nullptr;
  }

  // A name as an environment variable can spell it: upper case, anything
  // but letters and digits as '_'.
  static std::string EnvName(std::string_view name) {
    std::string out;
    for (char c : name) {
      out += std::isalnum(static_cast<unsigned char>(c))
                 ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
                 : '_';
    }
    return out;
  }

  void Report(const Value& v, std::string_view rule) {
    if (v.env.empty()) {
      diags_.Error(v.mark, v.path, rule);
    } else {
      diags_.EnvError(v.env, v.path, rule);
    }
  }

  // Whether `v` reads as property `index`; reports it otherwise.
  bool CheckValue(std::size_t index, const Value& v) {
    const auto& p = policy_.properties[index];
    S scratch{};
    if (Status s = p.set(scratch, p.name, v.text); !s.ok()) {
      Report(v, WithoutName(s.message(), p.name));
      return false;
    }
    return true;
  }

  void ReadLayers(const Node& map, bool configs) {
    if (map.kind == Node::Kind::kNull) return;
    if (map.kind != Node::Kind::kMap) {
      diags_.Error(map.mark, map.path,
                   std::string("expected a map of names, got ") + KindText(map.kind));
      return;
    }
    for (const Node& entry : map.children) {
      Layer layer;
      layer.name = entry.key;
      layer.is_config = configs;
      layer.mark = entry.key_mark;
      layer.path = entry.path;
      if (entry.kind != Node::Kind::kMap && entry.kind != Node::Kind::kNull) {
        diags_.Error(entry.mark, entry.path,
                     std::string("expected a map of properties, got ") + KindText(entry.kind));
        continue;
      }
      std::map<std::string, const Node*> spelled;  // canonical -> first key
      for (const Node& key : entry.children) {
        const std::string canon = Canonical(key.key);
        if (auto [it, fresh] = spelled.emplace(canon, &key); !fresh) {
          diags_.Error(key.key_mark, key.path,
                       "the same property as " + it->second->key + " (line " +
                           std::to_string(it->second->key_mark.line) + ")");
          continue;
        }
        ReadProperty(key, canon, layer);
      }
      layers_.push_back(std::move(layer));
    }
  }

  bool ScalarValue(const Node& key, std::string_view expects) {
    if (key.kind == Node::Kind::kScalar) return true;
    diags_.Error(key.mark, key.path,
                 key.kind == Node::Kind::kNull
                     ? "has no value"
                     : "expected " + std::string(expects) + ", got " + KindText(key.kind));
    return false;
  }

  void ReadProperty(const Node& key, const std::string& canon, Layer& layer) {
    if (canon == "baseconfig") {
      if (ScalarValue(key, "the name of a template in configs")) {
        layer.base = Value{key.scalar, key.mark, key.path, ""};
      }
      return;
    }
    for (std::string_view name_property : policy_.name_properties) {
      if (Canonical(name_property) == canon) {
        ReadNames(key, name_property, layer);
        return;
      }
    }
    if (std::optional<std::size_t> index = FindProperty(canon)) {
      if (!ScalarValue(key, policy_.properties[*index].expects)) return;
      Value v{key.scalar, key.mark, key.path, ""};
      if (CheckValue(*index, v)) layer.values[*index] = std::move(v);
      return;
    }
    for (const KeyNote& note : policy_.not_applicable) {
      if (Canonical(note.name) == canon) {
        diags_.Error(key.key_mark, key.path, "not applicable in fusebox: " + std::string(note.why));
        return;
      }
    }
    for (const KeyNote& note : internal::IgnoredKeys()) {
      if (Canonical(note.name) == canon) {
        diags_.Warning(key.key_mark, key.path, "ignored: " + std::string(note.why));
        return;
      }
    }
    std::vector<std::string_view> candidates = PropertyNames();
    candidates.push_back("baseConfig");
    for (const KeyNote& note : policy_.not_applicable) candidates.push_back(note.name);
    diags_.Error(
        key.key_mark, key.path,
        "unknown property of " + std::string(policy_.section) + DidYouMean(key.key, candidates));
  }

  // A list of names, as Spring binds a List<Class>: a YAML list of scalars,
  // or one scalar whose commas separate names; an empty value is no names.
  void ReadNames(const Node& key, std::string_view property, Layer& layer) {
    std::vector<std::string> names;
    auto add = [&](std::string_view text) {
      for (std::string& n : SplitNames(text)) names.push_back(std::move(n));
    };
    if (key.kind == Node::Kind::kScalar) {
      add(key.scalar);
    } else if (key.kind == Node::Kind::kSequence) {
      for (const Node& item : key.children) {
        if (item.kind != Node::Kind::kScalar) {
          diags_.Error(item.mark, item.path,
                       std::string("expected a name, got ") + KindText(item.kind));
          return;
        }
        add(item.scalar);
      }
    } else if (key.kind == Node::Kind::kMap) {
      diags_.Error(key.mark, key.path, "expected a name or a list of names, got a map");
      return;
    }
    layer.names[std::string(property)] = std::move(names);
  }

  // The base of `layer`: its baseConfig, else configs.default (Resilience4j:
  // an instance or template naming no base is built on the default, if there
  // is one), else none. nullptr with *failed when baseConfig names nothing.
  const Layer* BaseOf(const Layer& layer, bool* failed) {
    if (layer.base) {
      const Layer* base = FindLayer(layer.base->text, true);
      if (base == nullptr) {
        std::vector<std::string_view> names;
        for (const Layer& l : layers_) {
          if (l.is_config) names.push_back(l.name);
        }
        Report(*layer.base, "no template \"" + layer.base->text + "\" in " + path_ + ".configs" +
                                DidYouMean(layer.base->text, names));
        *failed = true;
      }
      return base;
    }
    if (layer.is_config && layer.name == "default") return nullptr;
    return FindLayer("default", true);
  }

  std::optional<S> ResolveLayer(const Layer& layer) {
    // The chain from `layer` down to the root of its baseConfig links.
    std::vector<const Layer*> chain{&layer};
    bool failed = false;
    for (const Layer* base = BaseOf(layer, &failed); base != nullptr;
         base = BaseOf(*chain.back(), &failed)) {
      auto seen = std::find(chain.begin(), chain.end(), base);
      if (seen != chain.end()) {
        ReportCycle(std::vector<const Layer*>(seen, chain.end()));
        return std::nullopt;
      }
      chain.push_back(base);
    }
    if (failed) return std::nullopt;
    std::map<std::size_t, const Value*> merged;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      for (const auto& [index, value] : (*it)->values) merged[index] = &value;
    }
    S s{};
    for (const auto& [index, value] : merged) {
      const auto& p = policy_.properties[index];
      (void)p.set(s, p.name, value->text);  // Checked when read.
    }
    if (policy_.names != nullptr) {
      // A list given lower in the chain replaces the base's, as Resilience4j's
      // builders do.
      NameLists& names = *policy_.names(s);
      for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
        for (const auto& [property, list] : (*it)->names) names[property] = list;
      }
    }
    // finish() reports the first rule broken; put that property back to its
    // default and ask again, so that every broken rule is reported. A rule
    // between two properties may fail again with the default: once reported,
    // a property ends the search.
    std::set<std::size_t> reported;
    for (std::size_t round = 0; round <= policy_.properties.size(); ++round) {
      const Status st = policy_.finish(s);
      if (st.ok()) return failed ? std::nullopt : std::optional<S>(std::move(s));
      failed = true;
      const std::string_view message = st.message();
      std::optional<std::size_t> index;
      for (std::size_t i = 0; i < policy_.properties.size(); ++i) {
        const std::string_view field = policy_.properties[i].field;
        if (!field.empty() && message.size() > field.size() &&
            message.substr(0, field.size()) == field && message[field.size()] == ' ') {
          index = i;
          break;
        }
      }
      if (!index || !reported.insert(*index).second) {
        if (!index) diags_.Error(layer.mark, layer.path, message);
        break;
      }
      const auto& p = policy_.properties[*index];
      const std::string rule(message.substr(p.field.size() + 1));
      if (auto it = merged.find(*index); it != merged.end()) {
        Report(*it->second, WithValue(rule, it->second->text));
      } else {
        diags_.Error(layer.mark, internal::JoinPath(layer.path, p.name),
                     WithValue(rule, p.get(s, p.name)));
      }
      const S defaults{};
      (void)p.set(s, p.name, p.get(defaults, p.name));
      merged.erase(*index);
    }
    return std::nullopt;
  }

  // Reports a baseConfig cycle once, whichever of its members found it: at
  // the first member in file order, listing the cycle from there.
  void ReportCycle(std::vector<const Layer*> cycle) {
    auto first = std::min_element(cycle.begin(), cycle.end(), [](const Layer* a, const Layer* b) {
      return std::pair(a->mark.line, a->mark.column) < std::pair(b->mark.line, b->mark.column);
    });
    std::rotate(cycle.begin(), first, cycle.end());
    std::string text = "baseConfig cycle: ";
    for (const Layer* l : cycle) text += l->name + " -> ";
    text += cycle.front()->name;
    const Layer& at = *cycle.front();
    if (at.base) {
      Report(*at.base, text);
    } else {
      diags_.Error(at.mark, at.path, text + " (a template without baseConfig is built on default)");
    }
  }

  const Policy<S>& policy_;
  Diagnostics& diags_;
  std::string path_;
  Section<S> Configuration::*member_;
  std::vector<Layer> layers_;
};

struct SectionName {
  std::string_view canonical;
  std::unique_ptr<SectionReader> (*make)(Diagnostics&, std::string path);
};

template <typename S>
std::unique_ptr<SectionReader> Make(const Policy<S>& policy, Diagnostics& diags, std::string path,
                                    Section<S> Configuration::*member) {
  return std::make_unique<SectionLoader<S>>(policy, diags, std::move(path), member);
}

constexpr std::string_view kSectionNames[] = {"circuitbreaker",     "retry",       "bulkhead",
                                              "threadpoolbulkhead", "ratelimiter", "timelimiter"};

class Loader {
 public:
  explicit Loader(Diagnostics& diags) : diags_(diags) {}

  Result<Configuration> Load(std::string_view text, const LoadOptions& options) {
    std::optional<std::vector<internal::Document>> docs = internal::ParseDocuments(text, diags_);
    if (!docs) return Fail();
    std::vector<std::string> active = ActiveProfiles(*docs, options);
    std::optional<Node> tree = MergeDocuments(*docs, active);
    if (!tree) return Fail();
    if (tree->kind == Node::Kind::kNull) {
      diags_.Error({}, "",
                   "empty: expected a resilience4j: section (or circuitbreaker:, retry:, ... at "
                   "the top level)");
      return Fail();
    }
    if (tree->kind != Node::Kind::kMap) {
      diags_.Error(tree->mark, "",
                   std::string("expected a map (resilience4j: ...), got ") + KindText(tree->kind));
      return Fail();
    }
    const Node* root = &*tree;
    std::string prefix;
    for (const Node& child : tree->children) {
      if (child.key == "resilience4j") {
        root = &child;
        prefix = "resilience4j.";
      }
    }
    MakeReaders(prefix);
    if (root != &*tree) {
      // Spring's application.yml: resilience4j is ours, the rest (spring:,
      // server:, ...) is not, but a policy section beside it is a mistake.
      for (const Node& child : tree->children) {
        if (&child != root && IsSection(Canonical(child.key))) {
          diags_.Error(child.key_mark, child.path,
                       "a policy section beside resilience4j; move it under resilience4j");
        }
      }
      if (root->kind == Node::Kind::kNull) {
        diags_.Error(root->mark, root->path, "empty: expected circuitbreaker, retry, ...");
      } else if (root->kind != Node::Kind::kMap) {
        diags_.Error(root->mark, root->path,
                     std::string("expected a map of sections, got ") + KindText(root->kind));
      } else {
        ReadSections(*root);
      }
    } else {
      ReadSections(*root);
    }
    ApplyEnv(options.environment);
    Configuration config;
    for (auto& [name, reader] : readers_) reader->Resolve(config);
    if (diags_.has_errors()) return Fail();
    config.warnings = diags_.warnings();
    config.notes = diags_.notes();
    config.profiles = std::move(active);
    return config;
  }

 private:
  // The profiles in force: the option's, else SPRING_PROFILES_ACTIVE's, else
  // the last spring.profiles.active of a document that no profile
  // conditions, else Spring's "default".
  std::vector<std::string> ActiveProfiles(const std::vector<internal::Document>& docs,
                                          const LoadOptions& options) {
    if (!options.profiles.empty()) return options.profiles;
    if (auto it = options.environment.find("SPRING_PROFILES_ACTIVE");
        it != options.environment.end()) {
      std::vector<std::string> names = SplitNames(it->second);
      if (!names.empty()) return names;
    }
    std::vector<std::string> from_file;
    for (const internal::Document& doc : docs) {
      if (ActivationOf(doc.root) != nullptr) continue;
      if (const Node* n = FindRelaxed(doc.root, {"spring", "profiles", "active"})) {
        if (n->kind == Node::Kind::kScalar) {
          from_file = SplitNames(n->scalar);
        } else if (n->kind == Node::Kind::kSequence) {
          from_file.clear();
          for (const Node& item : n->children) {
            if (item.kind == Node::Kind::kScalar) from_file.push_back(item.scalar);
          }
        }
      }
    }
    if (!from_file.empty()) return from_file;
    return {"default"};
  }

  // The node at `path` under `root`, each segment matched in Spring's
  // relaxed form.
  static const Node* FindRelaxed(const Node& root, std::initializer_list<std::string_view> path) {
    const Node* n = &root;
    for (std::string_view segment : path) {
      if (n->kind != Node::Kind::kMap) return nullptr;
      const Node* next = nullptr;
      for (const Node& c : n->children) {
        if (Canonical(c.key) == Canonical(segment)) next = &c;
      }
      if (next == nullptr) return nullptr;
      n = next;
    }
    return n;
  }

  // What conditions a document: spring.config.activate.on-profile (Spring
  // Boot 2.4+), or spring.profiles (before 2.4, still common), or nullptr.
  static const Node* ActivationOf(const Node& root) {
    if (const Node* n = FindRelaxed(root, {"spring", "config", "activate", "on-profile"})) return n;
    if (const Node* n = FindRelaxed(root, {"spring", "profiles"});
        n != nullptr && n->kind != Node::Kind::kMap) {
      return n;
    }
    return nullptr;
  }

  // Spring's profile expressions: names, '!' (not), '&' (and), '|' (or) and
  // parentheses; '&' and '|' may not be mixed without parentheses. A list, or
  // commas, means any of them. Sets *bad on a malformed expression.
  class ProfileExpression {
   public:
    ProfileExpression(std::string_view text, const std::vector<std::string>& active)
        : text_(text), active_(active) {}

    bool Matches(bool* bad) {
      bool any = false;
      while (true) {
        const bool v = Or();
        any = any || v;
        Skip();
        if (at_ >= text_.size()) break;
        if (text_[at_] != ',') {
          bad_ = true;
          break;
        }
        ++at_;
      }
      *bad = bad_;
      return any;
    }

   private:
    void Skip() {
      while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
    }
    bool Or() {
      bool v = Unary();
      char op = 0;
      while (true) {
        Skip();
        if (at_ >= text_.size() || (text_[at_] != '&' && text_[at_] != '|')) return v;
        const char c = text_[at_++];
        if (op != 0 && op != c) bad_ = true;  // "a & b | c": Spring wants parentheses
        op = c;
        const bool rhs = Unary();
        v = c == '&' ? (v && rhs) : (v || rhs);
      }
    }
    bool Unary() {
      Skip();
      if (at_ >= text_.size()) {
        bad_ = true;
        return false;
      }
      if (text_[at_] == '!') {
        ++at_;
        return !Unary();
      }
      if (text_[at_] == '(') {
        ++at_;
        const bool v = Or();
        Skip();
        if (at_ >= text_.size() || text_[at_] != ')') {
          bad_ = true;
        } else {
          ++at_;
        }
        return v;
      }
      const std::size_t start = at_;
      while (at_ < text_.size() &&
             std::string_view("!&|(), ").find(text_[at_]) == std::string_view::npos &&
             !std::isspace(static_cast<unsigned char>(text_[at_]))) {
        ++at_;
      }
      if (at_ == start) {
        bad_ = true;
        return false;
      }
      const std::string_view name = text_.substr(start, at_ - start);
      return std::find(active_.begin(), active_.end(), name) != active_.end();
    }

    std::string_view text_;
    const std::vector<std::string>& active_;
    std::size_t at_ = 0;
    bool bad_ = false;
  };

  // Whether the document conditioned by `activation` is in force.
  bool Active(const Node& activation, const std::vector<std::string>& active) {
    std::vector<const Node*> items;
    if (activation.kind == Node::Kind::kSequence) {
      for (const Node& item : activation.children) items.push_back(&item);
    } else {
      items.push_back(&activation);
    }
    bool any = false;
    for (const Node* item : items) {
      if (item->kind != Node::Kind::kScalar) {
        diags_.Error(item->mark, activation.path, "expected a profile expression such as prod");
        return false;
      }
      bool bad = false;
      const bool v = ProfileExpression(item->scalar, active).Matches(&bad);
      if (bad) {
        diags_.Error(item->mark, activation.path,
                     "bad profile expression \"" + item->scalar +
                         "\" (names with !, &, | and parentheses; a comma or a list: any of)");
        return false;
      }
      any = any || v;
    }
    return any;
  }

  // Spring's merge of a file's documents: in file order, each later document
  // in force overriding what the earlier ones set, map by map, key by key
  // (keys compared in relaxed form, so failure-rate-threshold in one document
  // overrides failureRateThreshold in another); anything but a map replaces.
  static void Overlay(Node& into, Node later) {
    if (into.kind != Node::Kind::kMap || later.kind != Node::Kind::kMap) {
      into = std::move(later);
      return;
    }
    for (Node& child : later.children) {
      const std::string canon = Canonical(child.key);
      auto it = std::find_if(into.children.begin(), into.children.end(),
                             [&](const Node& c) { return Canonical(c.key) == canon; });
      if (it == into.children.end()) {
        into.children.push_back(std::move(child));
      } else {
        Overlay(*it, std::move(child));
      }
    }
  }

  std::optional<Node> MergeDocuments(std::vector<internal::Document>& docs,
                                     const std::vector<std::string>& active) {
    std::optional<Node> merged;
    std::string profiles;
    for (const std::string& p : active) profiles += (profiles.empty() ? "" : ", ") + p;
    for (std::size_t i = 0; i < docs.size(); ++i) {
      internal::Document& doc = docs[i];
      if (doc.root.kind == Node::Kind::kNull && docs.size() > 1) continue;
      if (doc.root.kind == Node::Kind::kMap) {
        if (const Node* cloud =
                FindRelaxed(doc.root, {"spring", "config", "activate", "on-cloud-platform"})) {
          diags_.Note(cloud->mark, cloud->path,
                      "document " + std::to_string(i + 1) +
                          " skipped: fusebox runs on no cloud platform Spring would detect");
          continue;
        }
        if (const Node* activation = ActivationOf(doc.root)) {
          const bool in_force = Active(*activation, active);
          diags_.Note(activation->mark, activation->path,
                      "document " + std::to_string(i + 1) + (in_force ? " applied" : " skipped") +
                          " (active profiles: " + profiles + ")");
          if (!in_force) continue;
        }
      }
      if (!merged) {
        merged = std::move(doc.root);
      } else {
        Overlay(*merged, std::move(doc.root));
      }
    }
    if (!merged) {
      // Every document was conditioned away, or there was none.
      Node empty;
      empty.mark = {1, 1};
      merged = std::move(empty);
    }
    return merged;
  }

  static bool IsSection(std::string_view canon) {
    return std::find(std::begin(kSectionNames), std::end(kSectionNames), canon) !=
           std::end(kSectionNames);
  }

  void MakeReaders(const std::string& prefix) {
    readers_.emplace_back("circuitbreaker",
                          Make(internal::CircuitBreakerPolicy(), diags_, prefix + "circuitbreaker",
                               &Configuration::circuit_breakers));
    readers_.emplace_back(
        "retry", Make(internal::RetryPolicy(), diags_, prefix + "retry", &Configuration::retries));
    readers_.emplace_back("bulkhead", Make(internal::BulkheadPolicy(), diags_, prefix + "bulkhead",
                                           &Configuration::bulkheads));
    readers_.emplace_back("threadpoolbulkhead", Make(internal::ThreadPoolBulkheadPolicy(), diags_,
                                                     prefix + "thread-pool-bulkhead",
                                                     &Configuration::thread_pool_bulkheads));
    readers_.emplace_back("ratelimiter",
                          Make(internal::RateLimiterPolicy(), diags_, prefix + "ratelimiter",
                               &Configuration::rate_limiters));
    readers_.emplace_back("timelimiter",
                          Make(internal::TimeLimiterPolicy(), diags_, prefix + "timelimiter",
                               &Configuration::time_limiters));
  }

  void ReadSections(const Node& root) {
    std::map<std::string, const Node*> seen;
    for (const Node& child : root.children) {
      const std::string canon = Canonical(child.key);
      if (canon == "scheduled" || canon == "thread") {
        // resilience4j.scheduled.executor.* (the starter's scheduler for
        // retries and time limiters) and resilience4j.thread.type (virtual
        // threads): fusebox schedules on its Clock and creates no threads
        // there.
        diags_.Note(child.key_mark, child.path,
                    "ignored: the Spring starter's executor settings; fusebox waits on its Clock "
                    "and runs calls on the caller's thread");
        continue;
      }
      auto reader = std::find_if(readers_.begin(), readers_.end(),
                                 [&](const auto& r) { return r.first == canon; });
      if (reader == readers_.end()) {
        std::vector<std::string_view> names(std::begin(kSectionNames), std::end(kSectionNames));
        if (root.key.empty()) names.push_back("resilience4j");
        diags_.Error(child.key_mark, child.path,
                     "unknown section; expected circuitbreaker, retry, bulkhead, "
                     "thread-pool-bulkhead, ratelimiter or timelimiter" +
                         DidYouMean(child.key, names));
        continue;
      }
      if (auto [it, fresh] = seen.emplace(canon, &child); !fresh) {
        diags_.Error(child.key_mark, child.path,
                     "the same section as " + it->second->key + " (line " +
                         std::to_string(it->second->key_mark.line) + ")");
        continue;
      }
      reader->second->ReadSection(child);
    }
  }

  // FUSEBOX_<SECTION>_<CONFIGS|INSTANCES>_<NAME>_<PROPERTY>, where SECTION may
  // be written with underscores (CIRCUIT_BREAKER) and PROPERTY too
  // (FAILURE_RATE_THRESHOLD): Spring's own mapping drops them.
  void ApplyEnv(const Environment& environment) {
    for (const auto& [variable, value] : environment) {
      std::string_view prefix;
      if (variable.starts_with(kEnvPrefix)) {
        prefix = kEnvPrefix;
      } else if (variable.starts_with(kSpringEnvPrefix)) {
        prefix = kSpringEnvPrefix;
      } else {
        continue;
      }
      std::vector<std::string> tokens;
      std::string_view rest = std::string_view(variable).substr(prefix.size());
      while (true) {
        const std::size_t bar = rest.find('_');
        tokens.emplace_back(rest.substr(0, bar));
        if (bar == std::string_view::npos) break;
        rest.remove_prefix(bar + 1);
      }
      // The section: the shortest run of tokens that spells one.
      std::size_t used = 0;
      std::string section;
      for (std::size_t k = 1; k <= std::min<std::size_t>(3, tokens.size()); ++k) {
        std::string joined;
        for (std::size_t i = 0; i < k; ++i) joined += tokens[i];
        const std::string canon = Canonical(joined);
        if (IsSection(canon)) {
          used = k;
          section = canon;
          break;
        }
      }
      if (used == 0) {
        // Not ours (FUSEBOX_REDIS_URL, say), unless it looks like a typo.
        std::vector<std::string_view> names(std::begin(kSectionNames), std::end(kSectionNames));
        if (tokens[0].size() >= 5 && !Closest(tokens[0], names).empty()) {
          diags_.EnvError(variable, "",
                          "unknown section \"" + tokens[0] + "\"" + DidYouMean(tokens[0], names));
        }
        continue;
      }
      const std::string kind = used < tokens.size() ? Canonical(tokens[used]) : "";
      if (prefix == kSpringEnvPrefix && kind != "configs" && kind != "instances") {
        // Spring's section-level keys (RESILIENCE4J_CIRCUITBREAKER_METRICS_ENABLED):
        // as in the file, accepted, and meaning nothing here.
        diags_.Note({}, "env " + variable, "ignored: not a property of an instance or template");
        continue;
      }
      if ((kind != "configs" && kind != "instances") || tokens.size() < used + 3) {
        diags_.EnvError(variable, "",
                        "expected " + std::string(prefix) + tokens[0] +
                            "_<CONFIGS|INSTANCES>_<NAME>_<PROPERTY>, e.g. "
                            "FUSEBOX_CIRCUITBREAKER_INSTANCES_PAYMENT_FAILURERATETHRESHOLD");
        continue;
      }
      for (auto& [name, reader] : readers_) {
        if (name == section) {
          reader->ApplyEnv(variable, kind == "configs",
                           std::vector<std::string>(tokens.begin() + used + 1, tokens.end()),
                           value);
        }
      }
    }
  }

  Status Fail() const {
    const std::vector<std::string> errors = diags_.errors();
    std::string message;
    for (std::size_t i = 0; i < errors.size() && i < kMaxErrors; ++i) {
      if (!message.empty()) message += '\n';
      message += errors[i];
    }
    if (errors.size() > kMaxErrors) {
      // A file that is not a configuration at all (the wrong file) would
      // otherwise give one line per key.
      message += "\n" + diags_.source() + ": " + std::to_string(errors.size() - kMaxErrors) +
                 " more errors not shown";
    }
    return Status::InvalidArgument(std::move(message));
  }

  static constexpr std::size_t kMaxErrors = 100;

  Diagnostics& diags_;
  std::vector<std::pair<std::string_view, std::unique_ptr<SectionReader>>> readers_;
};

// --- FormatConfig -------------------------------------------------------------------

// `text` in double quotes, with YAML's escapes.
std::string Quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[(c >> 4) & 0xf];
      out += kHex[c & 0xf];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Whether `text` reads back as itself, a plain string, with only letters,
// digits and `extra`.
bool Plain(std::string_view text, std::string_view extra) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && extra.find(c) == std::string_view::npos)
      return false;
  }
  // A plain null, Null, NULL or ~ would be a null, not a name.
  return text != "null" && text != "Null" && text != "NULL";
}

// A name as a YAML key that ParseTree reads back as one segment.
std::string KeyText(const std::string& name) {
  if (Plain(name, "_-")) return name;
  // Brackets keep a dotted name one segment; a name that starts with '[' came
  // from brackets too (ParseTree would take its own bracket off).
  return Quoted(name.find('.') != std::string::npos || name.front() == '[' ? "[" + name + "]"
                                                                           : name);
}

// A name in a flow list ([java.io.IOException, ...]) that reads back as itself.
std::string ListItemText(const std::string& name) {
  return Plain(name, "_-.$") ? name : Quoted(name);
}

template <typename S>
void FormatSection(std::string& out, const Policy<S>& policy, const Section<S>& section) {
  if (section.empty()) return;
  out += "  " + std::string(policy.section) + ":\n";
  for (bool configs : {true, false}) {
    const auto& list = configs ? section.configs : section.instances;
    if (list.empty()) continue;
    out += configs ? "    configs:\n" : "    instances:\n";
    for (const Named<S>& n : list) {
      const std::string key = KeyText(n.name);
      // YAML caps an implicit key at 1024 characters; a longer one (a name of
      // control characters, each escaped to four) is written as an explicit
      // key, which has no cap.
      out += key.size() < 1000 ? "      " + key + ":\n" : "      ? " + key + "\n      :\n";
      for (const auto& p : policy.properties) {
        out += "        " + std::string(p.name) + ": " + p.get(n.settings, p.name) + "\n";
      }
      if (policy.names != nullptr) {
        for (const auto& [property, list] : *policy.names(const_cast<S&>(n.settings))) {
          out += "        " + property + ": [";
          for (std::size_t i = 0; i < list.size(); ++i) {
            out += (i ? ", " : "") + ListItemText(list[i]);
          }
          out += "]\n";
        }
      }
    }
  }
}

}  // namespace

Environment FuseboxEnvironment() {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (!entry.starts_with(kEnvPrefix) && !entry.starts_with(kSpringEnvPrefix) &&
        !entry.starts_with("SPRING_PROFILES_ACTIVE=")) {
      continue;
    }
    const std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return env;
}

Result<Configuration> LoadConfig(std::string_view text, std::string_view source,
                                 const LoadOptions& options) {
  Diagnostics diags{std::string(source)};
  return Loader(diags).Load(text, options);
}

Result<Configuration> LoadConfigFile(const std::string& path, const LoadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument(path + ": cannot read the file");
  std::string text;
  char buffer[4096];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<std::size_t>(in.gcount()));
    if (text.size() > internal::kMaxInputBytes) {
      return Status::InvalidArgument(path + ": larger than " +
                                     std::to_string(internal::kMaxInputBytes >> 20) + " MiB");
    }
  }
  if (in.bad()) return Status::InvalidArgument(path + ": cannot read the file");
  return LoadConfig(text, path, options);
}

std::string FormatConfig(const Configuration& config) {
  std::string body;
  FormatSection(body, internal::CircuitBreakerPolicy(), config.circuit_breakers);
  FormatSection(body, internal::RetryPolicy(), config.retries);
  FormatSection(body, internal::BulkheadPolicy(), config.bulkheads);
  FormatSection(body, internal::ThreadPoolBulkheadPolicy(), config.thread_pool_bulkheads);
  FormatSection(body, internal::RateLimiterPolicy(), config.rate_limiters);
  FormatSection(body, internal::TimeLimiterPolicy(), config.time_limiters);
  if (body.empty()) return "resilience4j: {}\n";
  return "resilience4j:\n" + body;
}

Status ApplyToRegistry(const Configuration& config, Registry& registry) {
  std::vector<const Named<CircuitBreakerSettings>*> all;
  for (const auto& n : config.circuit_breakers.configs) all.push_back(&n);
  for (const auto& n : config.circuit_breakers.instances) all.push_back(&n);
  // Check everything before adding anything: all or nothing.
  for (const auto* n : all) {
    if (Status s = n->settings.config.Validate(); !s.ok()) {
      return Status::InvalidArgument(n->name + ": " + std::string(s.message()));
    }
  }
  for (const auto* n : all) {
    if (Status s = registry.AddConfig(n->name, n->settings.config); !s.ok()) {
      return Status::InvalidArgument(n->name + ": " + std::string(s.message()));
    }
  }
  return Status();
}

}  // namespace fusebox::yaml
