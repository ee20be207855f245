// pitfall-validate --schema NAME [--at POINTER] [--each] FILE...: each FILE read as pitfall
// reads it (detail::read_json_file) and checked against the built-in schema NAME
// (reports/schema/NAME.schema.json) by the harness's own validator. Exit 0: all valid; 2: the
// first error, printed as "<file>: <pointer>: <reason>". With --each, every file is checked and
// gets a line on stdout, "valid" or "invalid <reason>". test_validator.py compares it with
// Python's jsonschema on broken copies of valid documents.
#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/json_schema.hpp"

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
    std::string schema;
    std::string at;
    std::vector<std::string> files;
    bool each = false;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--each")
            each = true;
        else if ((arg == "--schema" || arg == "--at") && i + 1 < argc)
            (arg == "--schema" ? schema : at) = argv[++i];
        else
            files.push_back(arg);
    }
    bool known = false;
    for (const auto& name : pitfall::detail::schema_names())
        known = known || name == schema;
    if (!known || files.empty()) {
        std::fprintf(stderr,
                     "usage: pitfall-validate --schema NAME [--at POINTER] [--each] FILE...\n"
                     "  NAME: one of the built-in schemas:");
        for (const auto& name : pitfall::detail::schema_names())
            std::fprintf(stderr, " %s", name.c_str());
        std::fprintf(stderr, "\n");
        return 2;
    }
    int rc = 0;
    for (const auto& file : files) {
        auto doc = pitfall::detail::read_json_file(file);
        const pitfall::status st =
            doc.is_ok() ? pitfall::detail::validate_document(schema, doc.value(), file, at)
                        : doc.error();
        if (each) {
            std::printf("%s%s\n", st.is_ok() ? "valid" : "invalid ", st.message().c_str());
            rc = st.is_ok() ? rc : 2;
        } else if (!st.is_ok()) {
            std::fprintf(stderr, "%s\n", st.message().c_str());
            return 2;
        }
    }
    return rc;
}
