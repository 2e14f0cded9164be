// modules/yaml/src/tree.h (private): a YAML document as Spring Boot reads one.
//
// yaml-cpp gives a node graph; the loader needs a little more than that, so
// this file turns it into a plain tree of Nodes that:
//   - splits dotted keys into paths, as Spring Boot does: seed 004's
//     `resilience4j.circuitbreaker.instances.payment:` is the same as the four
//     nested maps. A key in brackets, "[a.b]", is one segment, as in Spring;
//   - merges maps reached by several keys (`resilience4j.retry:` beside
//     `resilience4j: circuitbreaker:`), and reports a key given twice instead
//     of letting the later one win silently (yaml-cpp keeps both);
//   - applies YAML merge keys (`<<: *defaults`), which yaml-cpp leaves as
//     ordinary keys; explicit keys win over merged ones;
//   - keeps, for every key and value, its line and column, 1-based, and its
//     full path as written, for error messages.
// yaml-cpp's exceptions stop here.
//
// Thread-safe: the functions are pure.
#ifndef FUSEBOX_MODULES_YAML_SRC_TREE_H_
#define FUSEBOX_MODULES_YAML_SRC_TREE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fusebox/yaml/config.h"

namespace fusebox::yaml::internal {

// A position in the source, 1-based; line 0 means unknown.
struct Mark {
  int line = 0;
  int column = 0;
};

// Errors and warnings, each a complete line: "app.yml:12:5: path: rule" for
// the file, "env FUSEBOX_X: path: rule" for an environment variable.
class Diagnostics {
 public:
  explicit Diagnostics(std::string source) : source_(std::move(source)) {}

  void Error(Mark mark, std::string_view path, std::string_view rule);
  void EnvError(std::string_view variable, std::string_view path, std::string_view rule);
  void Warning(Mark mark, std::string_view path, std::string_view rule);
  // A key accepted that means nothing here, or a document a profile skips:
  // said, so that nobody wonders, but not a fault.
  void Note(Mark mark, std::string_view path, std::string_view rule);

  bool has_errors() const noexcept { return !errors_.empty(); }
  // Sorted by position (file errors by line and column, then environment
  // errors by variable), each once.
  std::vector<std::string> errors() const;
  std::vector<std::string> warnings() const;
  std::vector<std::string> notes() const;
  const std::string& source() const noexcept { return source_; }

 private:
  struct Entry {
    int group;  // 0: file, 1: environment
    int line;
    int column;
    std::string text;
  };
  static std::vector<std::string> Sorted(std::vector<Entry> entries);
  std::string Where(Mark mark) const;

  std::string source_;
  std::vector<Entry> errors_;
  std::vector<Entry> warnings_;
  std::vector<Entry> notes_;
};

struct Node {
  enum class Kind : std::uint8_t { kNull, kScalar, kSequence, kMap };
  Kind kind = Kind::kNull;
  // This node's key in its parent map: one segment ("payment").
  std::string key;
  // The full path as written, segments joined by '.'; a segment with a dot
  // in it is bracketed: "resilience4j.circuitbreaker.instances.[v1.2]".
  std::string path;
  Mark key_mark;
  // The value's position (the key's when the value is empty).
  Mark mark;
  std::string scalar;
  // kMap: the entries in file order; kSequence: the items.
  std::vector<Node> children;

  // The map entry with exactly this key, or nullptr.
  const Node* Find(std::string_view child_key) const;
};

// "a" + "b" -> "a.b", bracketing `segment` if it holds a dot.
std::string JoinPath(std::string_view parent, std::string_view segment);

// Inputs larger than this are refused (a configuration file is a few KiB).
inline constexpr std::size_t kMaxInputBytes = kMaxYamlBytes;

// One document of a multi-document file: its tree, and the line its first
// content starts on.
struct Document {
  Node root;
  int line = 1;
};

// Parses every document of `text` (separated by "---"), each as ParseTree
// does; the kMaxNodes limit applies to all of them together. Returns nullopt
// when the text is not YAML at all or a limit stopped it (the error is in
// `diags`); otherwise the documents in file order, an empty one as kNull.
std::optional<std::vector<Document>> ParseDocuments(std::string_view text, Diagnostics& diags);

// Parses the first document of `text` into a tree whose root is a map (kNull for an empty
// document). Returns nullopt when the text is not YAML at all (the error is in
// `diags`); otherwise the tree, with errors about keys (duplicates, empty
// segments, non-scalar keys) in `diags`.
std::optional<Node> ParseTree(std::string_view text, Diagnostics& diags);

}  // namespace fusebox::yaml::internal

#endif  // FUSEBOX_MODULES_YAML_SRC_TREE_H_
