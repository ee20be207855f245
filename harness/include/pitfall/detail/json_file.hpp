// pitfall/detail/json_file.hpp: the one way pitfall reads a file that a user or a scenario can
// write. Whatever the bytes (a FIFO, a directory, a symlink loop, 100k levels of nesting, 1e999,
// invalid UTF-8), the answer is a JSON value or a status naming the file, the place and why;
// never an exception, a hang or a crash.
//
//   PITFALL_ASSIGN_OR_RETURN(const nlohmann::json doc, pitfall::detail::read_json_file(path));
#pragma once

#include "pitfall/status.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace pitfall::detail {

/// The largest file a reader takes whole (a result or a baseline is kilobytes; a run's
/// results.jsonl megabytes).
inline constexpr std::size_t json_file_max_bytes = std::size_t{256} << 20;
/// The deepest nesting a document may have: the deepest pitfall writes is under 10; the parser
/// recurses per level, so an unbounded one is a stack overflow.
inline constexpr int json_max_depth = 128;

/// The whole of a regular file. Opened without blocking (a FIFO answers at once), without
/// following the fd into a terminal; anything but a regular file, a file past `max_bytes`, or
/// a read error is a status (pitfall_error::bad_input) naming `path`.
status_or<std::string> read_regular_file(const std::string& path,
                                         std::size_t max_bytes = json_file_max_bytes);

/// `text` as JSON; `name` (a path, or "path: line 3") heads every error. Nesting deeper than
/// json_max_depth is refused before the parser sees it; every parser exception becomes a
/// status with the line and column.
status_or<nlohmann::json> parse_json(std::string_view text, const std::string& name);
/// The same for order-keeping documents (baselines that `bless` rewrites).
status_or<nlohmann::ordered_json> parse_ordered_json(std::string_view text,
                                                     const std::string& name);

/// read_regular_file + parse_json.
status_or<nlohmann::json> read_json_file(const std::string& path);

/// The offset of the first byte that nests deeper than `max_depth` (outside strings), or npos.
std::size_t find_too_deep(std::string_view text, int max_depth = json_max_depth);

/// "line L, column C" of a byte offset (1-based).
std::string line_column(std::string_view text, std::size_t byte_offset);

/// A dump that cannot throw: invalid UTF-8 in strings becomes U+FFFD (nlohmann's dump() throws
/// type_error 316 on it). For every message or document that may hold text taken from input.
std::string dump_safe(const nlohmann::json& value, int indent = -1);

/// `text` with invalid UTF-8 replaced by U+FFFD: for putting file names or other foreign bytes
/// into a JSON string.
std::string valid_utf8(std::string_view text);

/// A bad_input status: "<name>: <what>".
status bad_json_input(const std::string& name, const std::string& what);

} // namespace pitfall::detail
