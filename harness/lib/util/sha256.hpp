// sha256.hpp: SHA-256 (FIPS 180-4) of a byte string, as 64 lowercase hex digits. What chains a
// run's records (run_folder.cpp): each names the digest of the line before it.
#pragma once

#include <string>
#include <string_view>

namespace pitfall::runner {

std::string sha256_hex(std::string_view bytes);

} // namespace pitfall::runner
