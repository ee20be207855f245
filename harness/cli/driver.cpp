#include "driver.hpp"

#include "command_line.hpp"
#include "model/locate.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <vector>

#include <unistd.h>

namespace pitfall::cli {

int exec_driver(const CLI::App& command, const pitfall::status_or<std::string>& driver) {
    if (!driver.is_ok())
        return input_error(driver.error());
    const std::string self = runner::self_executable();
    if (!self.empty())
        ::setenv("PITFALL_BINARY", self.c_str(), 1);
    std::vector<std::string> args{"python3", driver.value()};
    for (const auto& arg : command.remaining())
        args.push_back(arg);
    std::vector<char*> child;
    child.reserve(args.size() + 1);
    for (auto& arg : args)
        child.push_back(arg.data());
    child.push_back(nullptr);
    ::execvp("python3", child.data());
    std::cerr << "pitfall: error: cannot start python3 " << driver.value() << ": "
              << std::strerror(errno) << '\n';
    return exit_bad_input;
}

} // namespace pitfall::cli
