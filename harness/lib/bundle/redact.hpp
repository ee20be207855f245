// What a bug-report bundle must not carry: the values of environment variables whose names say
// they are secrets (TOKEN, KEY, SECRET, PASSWORD, CREDENTIAL, in any case). They are replaced
// wherever the bundle holds the environment: a "NAME=value" in any text, a JSON member named
// so, and, in every file, the secret values of the bundling process's own environment.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace pitfall::runner {

/// What stands in for a redacted value.
inline constexpr const char* redacted_text = "[redacted]";

/// Whether a variable's name says it holds a secret: it contains TOKEN, KEY, SECRET, PASSWORD
/// or CREDENTIAL, in any case (MY_API_TOKEN, aws_secret_access_key, SshKeyPath).
bool is_secret_name(std::string_view name);

/// What to scrub from every file: the values of the secret-named variables of `environ`-style
/// "NAME=value" entries, each also HTML/XML-escaped, JSON-escaped and URL-encoded (as a report,
/// a record or a URL carries it), longest first. Values shorter than 6 bytes are left out
/// (scrubbing "1" or "true" from every file would destroy them); they are still redacted where
/// their name stands beside them.
std::vector<std::string> secret_values(const std::vector<std::string>& environment);

/// The process's own environment as "NAME=value" entries.
std::vector<std::string> current_environment();

/// `text` (any bytes) with each secret value replaced, the value of each "NAME=value" whose
/// NAME is secret (up to a blank, quote, '&' or ';'), and every secret of a known shape
/// (bundle/secret_shapes.hpp: URL user-info, Authorization and Cookie headers, private keys,
/// GitHub, Hugging Face, AWS, Slack and GitLab tokens). Linear in the text's length.
std::string scrub_text(std::string text, const std::vector<std::string>& values);

/// `doc` with every string scrubbed as scrub_text does, and the value of each member that
/// names a secret variable redacted (any type but an object or array): a secret name inside
/// an "environment", "env", "env_set" or "environ" object, or one written as variables are
/// (upper case, digits, '_': MY_API_TOKEN). A record's own "token" or "case_key" is kept.
nlohmann::json redact_json(const nlohmann::json& doc, const std::vector<std::string>& values);

/// A results.jsonl redacted line by line. Its records are chained (each names the SHA-256 of
/// the line before it as "prev"); once a line changes, the lines after it are named again, so
/// that `pitfall report` reads the copy. A line that is not JSON (a last line a kill cut) is
/// scrubbed as text.
std::string redact_results_lines(const std::string& text, const std::vector<std::string>& values);

} // namespace pitfall::runner
