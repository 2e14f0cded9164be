#include "src/tree.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace fusebox::yaml::internal {

// --- Diagnostics ------------------------------------------------------------------

std::string Diagnostics::Where(Mark mark) const {
  if (mark.line <= 0) return source_;
  return source_ + ":" + std::to_string(mark.line) + ":" + std::to_string(mark.column);
}

namespace {

// Keys and values are quoted back in messages; a control character in them
// (a newline, a terminal escape) must not split a message or reach a
// terminal, so each is shown as \xNN.
void AppendEscaped(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    } else {
      out += c;
    }
  }
}

std::string Line(std::string_view where, std::string_view path, std::string_view rule) {
  std::string line;
  AppendEscaped(line, where);
  line += ": ";
  if (!path.empty()) {
    AppendEscaped(line, path);
    line += ": ";
  }
  AppendEscaped(line, rule);
  return line;
}

// Where `text` stops being UTF-8 (YAML's own encoding; yaml-cpp slows down by
// orders of magnitude on some invalid sequences, seen by the fuzzer), with
// the bad byte; nullopt when all of it is. Overlong forms, surrogates and
// code points past U+10FFFF count as invalid.
struct BadByte {
  Mark mark;
  unsigned char byte = 0;
};
std::optional<BadByte> FirstInvalidUtf8(std::string_view text) {
  Mark at{1, 1};
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t len = 0;
    unsigned char lo = 0x80;
    unsigned char hi = 0xBF;
    if (c < 0x80) {
      len = 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return BadByte{at, c};
    }
    if (i + len > text.size()) return BadByte{at, c};
    for (std::size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if (cc < (k == 1 ? lo : 0x80) || cc > (k == 1 ? hi : 0xBF)) return BadByte{at, cc};
    }
    if (c == '\n') {
      ++at.line;
      at.column = 1;
    } else {
      ++at.column;
    }
    i += len;
  }
  return std::nullopt;
}

// False, with an error naming where, when `text` is not UTF-8.
bool CheckUtf8(std::string_view text, Diagnostics& diags) {
  const std::optional<BadByte> bad = FirstInvalidUtf8(text);
  if (!bad) return true;
  static constexpr char kHex[] = "0123456789ABCDEF";
  diags.Error(
      bad->mark, "",
      std::string("not valid UTF-8 (byte 0x") + kHex[bad->byte >> 4] + kHex[bad->byte & 0xF] + ")");
  return false;
}

}  // namespace

void Diagnostics::Error(Mark mark, std::string_view path, std::string_view rule) {
  errors_.push_back({0, mark.line, mark.column, Line(Where(mark), path, rule)});
}

void Diagnostics::EnvError(std::string_view variable, std::string_view path,
                           std::string_view rule) {
  errors_.push_back({1, 0, 0, Line("env " + std::string(variable), path, rule)});
}

void Diagnostics::Warning(Mark mark, std::string_view path, std::string_view rule) {
  warnings_.push_back({0, mark.line, mark.column, Line(Where(mark), path, rule)});
}

std::vector<std::string> Diagnostics::Sorted(std::vector<Entry> entries) {
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.group != b.group) return a.group < b.group;
    if (a.group == 1) return a.text < b.text;
    return std::tie(a.line, a.column) < std::tie(b.line, b.column);
  });
  // The same fault can be found more than once (a bad value in configs.default
  // fails every instance built on it); say it once.
  std::vector<std::string> out;
  std::set<std::string_view> seen;
  for (const Entry& e : entries) {
    if (seen.insert(e.text).second) out.push_back(e.text);
  }
  return out;
}

std::vector<std::string> Diagnostics::errors() const { return Sorted(errors_); }
std::vector<std::string> Diagnostics::warnings() const { return Sorted(warnings_); }
std::vector<std::string> Diagnostics::notes() const { return Sorted(notes_); }

void Diagnostics::Note(Mark mark, std::string_view path, std::string_view rule) {
  notes_.push_back({0, mark.line, mark.column, Line(Where(mark), path, rule)});
}

// --- Tree -------------------------------------------------------------------------

const Node* Node::Find(std::string_view child_key) const {
  for (const Node& c : children) {
    if (c.key == child_key) return &c;
  }
  return nullptr;
}

std::string JoinPath(std::string_view parent, std::string_view segment) {
  std::string path;
  // Exactly: appending to a copy would double its capacity, and a tree holds
  // a path per value.
  path.reserve(parent.size() + segment.size() + 3);
  path += parent;
  if (!path.empty()) path += '.';
  if (segment.find('.') != std::string_view::npos) {
    path += '[';
    path += segment;
    path += ']';
  } else {
    path += segment;
  }
  return path;
}

namespace {

// Deeper than any configuration; bounds our recursion, and an alias cycle.
constexpr int kMaxDepth = kMaxYamlDepth;
// Aliases let a small text describe a huge tree ("billion laughs"); we copy
// what they point to, so the copy is bounded: in values, and in the bytes of
// the keys, paths, values and messages it holds (a few long strings aliased
// many times are few values but a gigabyte of text).
constexpr int kMaxNodes = kMaxYamlValues;
constexpr std::size_t kMaxBytes = kMaxYamlExpandedBytes;

// "a.b" + 2 -> "a.b[2]"; "a.b" + nullopt -> "a.b[]". Reserved exactly, as in
// JoinPath.
std::string ItemPath(std::string_view parent, std::optional<int> index) {
  const std::string digits = index ? std::to_string(*index) : std::string();
  std::string path;
  path.reserve(parent.size() + digits.size() + 2);
  path += parent;
  path += '[';
  path += digits;
  path += ']';
  return path;
}

Mark ToMark(const YAML::Mark& m) {
  if (m.is_null() || m.line < 0) return {};
  return {m.line + 1, m.column + 1};
}

struct Segment {
  std::string text;
  int offset;  // in the key, for the column of a plain key's segment
};

class Builder {
 public:
  explicit Builder(Diagnostics& diags) : diags_(diags) {}

  // Whether a limit stopped the conversion (the tree is then incomplete).
  bool stopped() const noexcept { return stopped_; }

  void Convert(const YAML::Node& yn, Node& out, int depth) {
    if (stopped_) return;
    // Both limits end the whole conversion with one error: an alias that
    // contains itself would otherwise report the same fault on every branch.
    if (++nodes_ > kMaxNodes) {
      Stop(out, "more than " + std::to_string(kMaxNodes) + " values (aliases expanding?)");
      return;
    }
    if (depth > kMaxDepth) {
      Stop(out, "nested more than " + std::to_string(kMaxDepth) +
                    " levels deep (an alias that contains itself?)");
      return;
    }
    if (!Spend(out.path.size() + out.key.size(), out)) return;
    // An empty value has no position of its own worth showing (yaml-cpp puts
    // it where the next token starts); its key's stands for it.
    if (const Mark m = ToMark(yn.Mark()); m.line > 0 && !yn.IsNull()) out.mark = m;
    switch (yn.Type()) {
      case YAML::NodeType::Scalar:
        out.kind = Node::Kind::kScalar;
        if (!Spend(yn.Scalar().size(), out)) return;
        out.scalar = yn.Scalar();
        return;
      case YAML::NodeType::Sequence: {
        out.kind = Node::Kind::kSequence;
        int i = 0;
        for (const YAML::Node& item : yn) {
          Node child;
          child.path = ItemPath(out.path, i++);
          child.mark = out.mark;
          Convert(item, child, depth + 1);
          out.children.push_back(std::move(child));
        }
        return;
      }
      case YAML::NodeType::Map:
        out.kind = Node::Kind::kMap;
        ConvertMap(yn, out, depth);
        return;
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        out.kind = Node::Kind::kNull;
        return;
    }
  }

 private:
  void ConvertMap(const YAML::Node& yn, Node& out, int depth) {
    std::vector<const YAML::Node*> merges;
    std::vector<std::pair<YAML::Node, YAML::Node>> entries;
    for (auto it = yn.begin(); it != yn.end(); ++it) entries.emplace_back(it->first, it->second);
    for (const auto& [yk, yv] : entries) {
      const Mark key_mark = ToMark(yk.Mark());
      if (!yk.IsScalar()) {
        if (!Spend(out.path.size(), out)) return;
        diags_.Error(key_mark, out.path, "a key must be a string, not a list or a map");
        continue;
      }
      const bool plain = yk.Tag() == "?";
      if (plain && yk.Scalar() == "<<") {
        merges.push_back(&yv);
        continue;
      }
      std::vector<Segment> segments;
      if (!Split(yk.Scalar(), segments)) {
        if (!Spend(out.path.size() + yk.Scalar().size(), out)) return;
        diags_.Error(key_mark, out.path.empty() ? yk.Scalar() : out.path + "." + yk.Scalar(),
                     "bad key: empty segment or unclosed '[' (write a dotted name in "
                     "brackets, \"[a.b]\")");
        continue;
      }
      // Walk (or create) the maps of every segment but the last.
      Node* parent = &out;
      for (std::size_t i = 0; i < segments.size(); ++i) {
        Node child;
        child.key = segments[i].text;
        child.path = JoinPath(parent->path, child.key);
        child.key_mark = key_mark;
        if (plain) child.key_mark.column += segments[i].offset;
        child.mark = child.key_mark;
        if (i + 1 < segments.size()) {
          child.kind = Node::Kind::kMap;
          if (!Spend(child.path.size() + child.key.size(), out)) return;
        } else {
          Convert(yv, child, depth + 1);
        }
        parent = Insert(*parent, std::move(child));
        if (parent == nullptr) break;
      }
    }
    // YAML merge keys: the merged maps' entries, unless given explicitly.
    for (const YAML::Node* m : merges) {
      Node merged;
      merged.path = out.path;
      merged.mark = ToMark(m->Mark());
      Convert(*m, merged, depth + 1);
      // Where the merge key's value is, kept for the errors below (merged is
      // moved from).
      const auto merged_mark = merged.mark;
      std::vector<Node> sources;
      if (merged.kind == Node::Kind::kMap) {
        sources.push_back(std::move(merged));
      } else if (merged.kind == Node::Kind::kSequence) {
        for (Node& item : merged.children) sources.push_back(std::move(item));
      }
      for (Node& source : sources) {
        if (source.kind != Node::Kind::kMap) {
          if (!Spend(out.path.size(), out)) return;
          diags_.Error(merged_mark, out.path, "<< (merge key) must name a map or a list of maps");
          continue;
        }
        for (Node& entry : source.children) {
          if (out.Find(entry.key) == nullptr) {
            if (!Reroot(entry, out.path)) return;
            out.children.push_back(std::move(entry));
          }
        }
      }
    }
  }

  // A merged entry was converted under its anchor's path; give it ours (a
  // longer path is text too: false once that passes the limit).
  bool Reroot(Node& n, const std::string& parent_path) {
    if (!Spend(parent_path.size() + n.key.size() + 3, n)) return false;
    n.path = JoinPath(parent_path, n.key);
    for (Node& c : n.children) {
      if (n.kind == Node::Kind::kMap) {
        if (!Reroot(c, n.path)) return false;
      } else {
        if (!Spend(n.path.size() + 2, n)) return false;
        c.path = ItemPath(n.path, std::nullopt);
      }
    }
    return true;
  }

  // Adds `child` to `parent` (a map), merging maps; returns the node now at
  // that key, or nullptr after reporting a duplicate.
  Node* Insert(Node& parent, Node child) {
    if (parent.kind == Node::Kind::kNull) parent.kind = Node::Kind::kMap;
    for (Node& existing : parent.children) {
      if (existing.key != child.key) continue;
      const bool existing_map =
          existing.kind == Node::Kind::kMap || existing.kind == Node::Kind::kNull;
      const bool child_map = child.kind == Node::Kind::kMap || child.kind == Node::Kind::kNull;
      if (existing_map && child_map) {
        if (existing.kind == Node::Kind::kNull) existing.kind = child.kind;
        for (Node& grandchild : child.children) {
          if (Insert(existing, std::move(grandchild)) == nullptr) {
            // Reported; keep merging the others.
          }
        }
        return &existing;
      }
      if (!Spend(child.path.size(), child)) return nullptr;
      diags_.Error(child.key_mark, child.path,
                   "given twice (first at line " + std::to_string(existing.key_mark.line) +
                       ", column " + std::to_string(existing.key_mark.column) + ")");
      return nullptr;
    }
    parent.children.push_back(std::move(child));
    return &parent.children.back();
  }

  // "a.b.[c.d]" -> a, b, c.d. False on an empty segment or a bad bracket.
  static bool Split(const std::string& key, std::vector<Segment>& out) {
    std::size_t i = 0;
    if (key.empty()) return false;
    while (true) {
      Segment s;
      s.offset = static_cast<int>(i);
      if (i < key.size() && key[i] == '[') {
        const std::size_t close = key.find(']', i + 1);
        if (close == std::string::npos) return false;
        s.text = key.substr(i + 1, close - i - 1);
        i = close + 1;
        if (i < key.size() && key[i] != '.') return false;
      } else {
        const std::size_t dot = key.find('.', i);
        const std::size_t end = dot == std::string::npos ? key.size() : dot;
        s.text = key.substr(i, end - i);
        i = end;
      }
      if (s.text.empty()) return false;
      out.push_back(std::move(s));
      if (i >= key.size()) return true;
      ++i;                                // the dot
      if (i >= key.size()) return false;  // "a." ends in an empty segment
    }
  }

  // Counts `bytes` of text about to be held; false (and the conversion
  // stopped) past kMaxBytes.
  bool Spend(std::size_t bytes, const Node& at) {
    if (stopped_) return false;
    bytes_ += bytes;
    if (bytes_ <= kMaxBytes) return true;
    Stop(at, "more than " + std::to_string(kMaxBytes >> 20) +
                 " MiB of text (long values that aliases repeat?)");
    return false;
  }

  void Stop(const Node& at, const std::string& why) {
    stopped_ = true;
    // The path of a runaway alias is runaway too: show where it starts.
    const std::string_view path(at.path);
    diags_.Error(at.mark, path.substr(0, path.find('.')), why);
  }

  Diagnostics& diags_;
  int nodes_ = 0;
  std::size_t bytes_ = 0;
  bool stopped_ = false;
};

}  // namespace

std::optional<Node> ParseTree(std::string_view text, Diagnostics& diags) {
  if (text.size() > kMaxInputBytes) {
    diags.Error({}, "", "larger than " + std::to_string(kMaxInputBytes >> 20) + " MiB");
    return std::nullopt;
  }
  if (!CheckUtf8(text, diags)) return std::nullopt;
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    diags.Error(ToMark(e.mark), "", "not valid YAML: " + e.msg);
    return std::nullopt;
  }
  Node root;
  root.mark = {1, 1};
  try {
    Builder builder(diags);
    builder.Convert(doc, root, 0);
    if (builder.stopped()) return std::nullopt;
  } catch (const YAML::Exception& e) {
    // Not expected once the document has loaded, but yaml-cpp may throw from
    // any accessor; it must not escape the module.
    diags.Error(ToMark(e.mark), "", "not valid YAML: " + e.msg);
    return std::nullopt;
  }
  return root;
}

namespace {

// Only the start of each document matters here.
class DocumentStarts final : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> starts;

  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// yaml-cpp 0.7's LoadAll never returns on a token no node can start with (a
// ',' at the top level): the parser reports an empty document there without
// consuming it, again and again, and LoadAll keeps them, at gigabytes a
// minute (yaml-cpp issue 1040; fixed upstream after 0.8). A document that
// starts where the one before it started is that loop. Where it is, or
// nullopt; a syntax error throws as LoadAll would.
std::optional<YAML::Mark> FindStall(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts events;
  while (parser.HandleNextDocument(events)) {
    const std::size_t n = events.starts.size();
    if (n >= 2 && events.starts[n - 1].pos == events.starts[n - 2].pos) {
      return events.starts[n - 1];
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::vector<Document>> ParseDocuments(std::string_view text, Diagnostics& diags) {
  if (text.size() > kMaxInputBytes) {
    diags.Error({}, "", "larger than " + std::to_string(kMaxInputBytes >> 20) + " MiB");
    return std::nullopt;
  }
  if (!CheckUtf8(text, diags)) return std::nullopt;
  std::vector<YAML::Node> yaml_docs;
  try {
    const std::string copy(text);
    if (const std::optional<YAML::Mark> stall = FindStall(copy)) {
      diags.Error(ToMark(*stall), "",
                  "not valid YAML: a token that belongs to no node (a ',' outside [ ] or { }?)");
      return std::nullopt;
    }
    yaml_docs = YAML::LoadAll(copy);
  } catch (const YAML::Exception& e) {
    diags.Error(ToMark(e.mark), "", "not valid YAML: " + e.msg);
    return std::nullopt;
  }
  std::vector<Document> docs;
  try {
    Builder builder(diags);  // one for all: the node limit is the file's
    for (const YAML::Node& yd : yaml_docs) {
      Document doc;
      const Mark m = ToMark(yd.Mark());
      doc.line = m.line > 0 ? m.line : 1;
      doc.root.mark = m.line > 0 ? m : Mark{1, 1};
      builder.Convert(yd, doc.root, 0);
      if (builder.stopped()) return std::nullopt;
      docs.push_back(std::move(doc));
    }
  } catch (const YAML::Exception& e) {
    diags.Error(ToMark(e.mark), "", "not valid YAML: " + e.msg);
    return std::nullopt;
  }
  return docs;
}

}  // namespace fusebox::yaml::internal
