#pragma once
// The outline of an OpenAI chat body without parsing it (docs/gateway.md
// "Next turn"): the byte ranges of the top-level members "model", "messages"
// and "tools" and of each element of "messages", found by one pass that
// follows JSON's structure (strings with their escapes, nesting) and reads
// no value. The picker parses (nlohmann_json) only the ranges it has not
// seen before: a conversation's earlier messages come back byte for byte.
// A body the pass cannot follow (not an object, unbalanced, truncated) has
// no outline; it is then parsed whole, which reports the error.

#include <string_view>
#include <vector>

namespace ic::gateway {

struct JsonOutline {
  std::string_view model;                  // the member's value, as written ("" when absent)
  std::string_view tools;                  // likewise
  bool has_messages = false;               // "messages" is an array
  std::vector<std::string_view> messages;  // its elements, as written
};

// Fills `out` (cleared first); false when `body` is not a JSON object this
// pass can follow, or nests deeper than `max_depth`.
bool outline_json(std::string_view body, JsonOutline& out, int max_depth);

}  // namespace ic::gateway
