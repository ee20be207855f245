// Running pitfall-probe from `pitfall doctor` and `pitfall resource-spec`: where it is, and the
// folder its log goes to.
#pragma once

#include "model/locate.hpp"

#include "pitfall/status.hpp"

#include <optional>
#include <string>

namespace pitfall::cli {

/// The probe to run, and the installation it was found through (none where no index was).
struct probe_location {
    std::string probe;
    std::optional<runner::installation> installation;
};

/// The index's paths.probe where an index is found (a build tree or an install), else
/// pitfall-probe beside this program. An --index (`index_flag`) that names no index is an
/// error; no index found otherwise is not (the probe needs none).
pitfall::status_or<probe_location> locate_probe(const std::string& index_flag);

/// A folder under $TMPDIR for the probe's probe.log, removed with the log when it goes out of
/// scope; `path` is empty where none could be made.
struct temporary_folder {
    std::string path;
    temporary_folder();
    ~temporary_folder();
    temporary_folder(const temporary_folder&) = delete;
    temporary_folder& operator=(const temporary_folder&) = delete;
};

} // namespace pitfall::cli
