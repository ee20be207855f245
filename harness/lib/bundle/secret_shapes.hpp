// Secrets found by their shape, not by a variable's name: what a bug-report bundle must never
// carry even where no variable of the bundling process holds it (a case's output, a log, a URL
// in a proxy setting). Private to harness/lib/bundle (redact.cpp).
//
//   URL user-info        scheme://user:password@host   -> scheme://[redacted]@host
//   HTTP headers          Authorization: ..., Cookie: ..., Set-Cookie: ...  (to the line's end)
//   private keys          -----BEGIN ... PRIVATE KEY----- ... -----END ... PRIVATE KEY-----
//   well-known tokens     GitHub ghp_/gho_/ghu_/ghs_/ghr_/github_pat_, Hugging Face hf_,
//                         AWS AKIA/ASIA key ids, Slack xoxa-/xoxb-/xoxp-/xoxr-/xoxs-,
//                         GitLab glpat-
//
// One forward pass, so linear in the text's length (a 512 MiB log is scrubbed in seconds).
#pragma once

#include <string>
#include <string_view>

namespace pitfall::runner {

/// `text` with every secret of the shapes above replaced by `replacement`.
std::string redact_shapes(std::string_view text, std::string_view replacement);

} // namespace pitfall::runner
