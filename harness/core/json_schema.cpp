#include "pitfall/detail/json_schema.hpp"

#include "pitfall/detail/json_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <regex.h>
#include <set>
#include <utility>

namespace pitfall::detail {
using nlohmann::json;

/// Generated from reports/schema/*.json (harness/CMakeLists.txt): {stem, text}.
extern const std::pair<const char*, const char*> embedded_schemas[];
extern const std::size_t embedded_schema_count;

struct json_schema::compiled_pattern {
    regex_t re{};
    explicit compiled_pattern() = default;
    compiled_pattern(const compiled_pattern&) = delete;
    compiled_pattern& operator=(const compiled_pattern&) = delete;
    ~compiled_pattern() { ::regfree(&re); }
};

std::string pointer_append(const std::string& pointer, std::string_view key) {
    std::string out = pointer + "/";
    for (const char c : key) {
        if (c == '~')
            out += "~0";
        else if (c == '/')
            out += "~1";
        else
            out += c;
    }
    return out;
}

namespace {
using pattern_map = std::map<std::string, std::shared_ptr<json_schema::compiled_pattern>>;

const std::set<std::string> type_names{"null",   "boolean", "object", "array",
                                       "number", "integer", "string"};
const std::set<std::string> annotations{"$schema", "$id",     "$defs",    "$comment",
                                        "title",   "default", "examples", "description"};
const std::set<std::string> schema_keywords{
    "$ref",          "type",          "properties", "additionalProperties",
    "required",      "items",         "minItems",   "maxItems",
    "minProperties", "maxProperties", "minLength",  "maxLength",
    "const",         "enum",          "minimum",    "maximum",
    "pattern",       "propertyNames", "allOf",      "anyOf",
    "oneOf",         "not",           "if",         "then",
    "else"};
/// The keywords whose value is an array of schemas, one schema, or a count.
const std::set<std::string> schema_list_keywords{"allOf", "anyOf", "oneOf"};
const std::set<std::string> subschema_keywords{
    "additionalProperties", "items", "propertyNames", "not", "if", "then", "else"};
const std::set<std::string> count_keywords{"minItems",      "maxItems",  "minProperties",
                                           "maxProperties", "minLength", "maxLength"};

/// ECMA-262's \d is [0-9]; POSIX has no \d.
std::string posix_pattern(const std::string& ecma) {
    std::string out;
    for (std::size_t i = 0; i < ecma.size(); ++i) {
        if (ecma[i] == '\\' && i + 1 < ecma.size() && ecma[i + 1] == 'd') {
            out += "[0-9]";
            ++i;
        } else if (ecma[i] == '\\' && i + 1 < ecma.size()) {
            out += ecma.substr(i, 2);
            ++i;
        } else {
            out += ecma[i];
        }
    }
    return out;
}

/// Walks a schema at load: every keyword known, every value of the right shape.
class schema_checker {
public:
    schema_checker(const json& root, pattern_map& patterns) : m_root(root), m_patterns(patterns) {}

    std::optional<std::string> check(const json& s, const std::string& at) {
        if (s.is_boolean())
            return std::nullopt;
        if (!s.is_object())
            return at + ": a schema is an object or a boolean";
        for (const auto& [key, value] : s.items()) {
            if (annotations.count(key) != 0 && key != "$defs")
                continue;
            if (key != "$defs" && schema_keywords.count(key) == 0)
                return pointer_append(at, key) + ": keyword not supported by pitfall's validator";
            if (auto why = check_keyword(key, value, pointer_append(at, key)))
                return why;
        }
        return std::nullopt;
    }

private:
    std::optional<std::string> schemas_in(const json& v, const std::string& at, bool array) {
        if (array ? !v.is_array() || v.empty() : !v.is_object())
            return at + (array ? ": expected a non-empty array of schemas"
                               : ": expected an object of schemas");
        if (array) {
            for (std::size_t i = 0; i < v.size(); ++i)
                if (auto why = check(v[i], at + "/" + std::to_string(i)))
                    return why;
        } else {
            for (const auto& [k, sub] : v.items())
                if (auto why = check(sub, pointer_append(at, k)))
                    return why;
        }
        return std::nullopt;
    }

    std::optional<std::string> check_keyword(const std::string& key, const json& v,
                                             const std::string& at) {
        if (key == "$defs" || key == "properties")
            return schemas_in(v, at, false);
        if (schema_list_keywords.count(key) != 0)
            return schemas_in(v, at, true);
        if (subschema_keywords.count(key) != 0)
            return check(v, at);
        return check_value_keyword(key, v, at);
    }

    /// A keyword whose value is not a schema: names, counts, numbers, a pattern, a reference.
    std::optional<std::string> check_value_keyword(const std::string& key, const json& v,
                                                   const std::string& at) {
        if (key == "type")
            return check_type_names(v, at);
        if (key == "required")
            return check_required(v, at);
        if (count_keywords.count(key) != 0)
            return v.is_number_unsigned() ? std::nullopt
                                          : std::optional<std::string>(at + ": expected a count");
        if (key == "minimum" || key == "maximum")
            return v.is_number() ? std::nullopt
                                 : std::optional<std::string>(at + ": expected a number");
        if (key == "enum")
            return v.is_array() ? std::nullopt
                                : std::optional<std::string>(at + ": expected an array");
        if (key == "pattern")
            return compile_pattern(v, at);
        if (key == "$ref")
            return check_ref(v, at);
        return std::nullopt; // const: any value
    }

    static std::optional<std::string> check_type_names(const json& v, const std::string& at) {
        const json names = v.is_array() ? v : json::array({v});
        for (const auto& n : names)
            if (!n.is_string() || type_names.count(n.get<std::string>()) == 0)
                return at + ": expected a type name or an array of them";
        return std::nullopt;
    }

    static std::optional<std::string> check_required(const json& v, const std::string& at) {
        if (!v.is_array() ||
            !std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_string(); }))
            return at + ": expected an array of property names";
        return std::nullopt;
    }

    std::optional<std::string> compile_pattern(const json& v, const std::string& at) {
        if (!v.is_string())
            return at + ": expected a regular expression";
        const std::string ecma = v.get<std::string>();
        if (m_patterns.count(ecma) != 0)
            return std::nullopt;
        auto p = std::make_shared<json_schema::compiled_pattern>();
        const int rc = ::regcomp(&p->re, posix_pattern(ecma).c_str(), REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
            char buffer[256];
            ::regerror(rc, &p->re, buffer, sizeof buffer);
            p.reset(); // regfree of a failed regcomp is not defined: leak the nothing it holds
            return at + ": '" + ecma + "' is not a POSIX extended regular expression: " + buffer;
        }
        m_patterns[ecma] = std::move(p);
        return std::nullopt;
    }

    std::optional<std::string> check_ref(const json& v, const std::string& at) {
        if (!v.is_string())
            return at + ": expected a string";
        const std::string ref = v.get<std::string>();
        if (ref == "#")
            return std::nullopt;
        if (ref.rfind("#/$defs/", 0) != 0)
            return at + ": '" + ref + "': only references to #/$defs/... of the same schema";
        const json& defs = m_root.contains("$defs") ? m_root["$defs"] : json();
        const std::string name = ref.substr(8);
        if (!defs.is_object() || !defs.contains(name))
            return at + ": '" + ref + "' names no definition";
        return std::nullopt;
    }

    const json& m_root;
    pattern_map& m_patterns;
};

std::string kind_of(const json& v) {
    if (v.is_number_integer())
        return "integer";
    return v.type_name();
}

bool has_type(const json& v, const std::string& type) {
    if (type == "integer")
        return v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) &&
                                         std::floor(v.get<double>()) == v.get<double>());
    if (type == "number")
        return v.is_number();
    if (type == "null")
        return v.is_null();
    if (type == "boolean")
        return v.is_boolean();
    if (type == "string")
        return v.is_string();
    if (type == "array")
        return v.is_array();
    return v.is_object();
}

/// A value for a message: short, and valid UTF-8 whatever it holds.
std::string shown(const json& v) {
    std::string text = dump_safe(v);
    if (text.size() > 80)
        text = text.substr(0, 77) + "...";
    return valid_utf8(text);
}

std::string join(const json& names, const char* sep) {
    std::string out;
    for (const auto& n : names)
        out += (out.empty() ? "" : sep) + (n.is_string() ? n.get<std::string>() : dump_safe(n));
    return out;
}

/// One validation pass: the schema document, its patterns, and the deepest error seen in an
/// anyOf/oneOf (the branch that got furthest says most).
class validator {
public:
    validator(const json& root, const pattern_map& patterns) : m_root(root), m_patterns(patterns) {}

    std::optional<std::string> validate(const json& s, const json& v, const std::string& at,
                                        int depth) const {
        if (depth > 256)
            return at + ": schema recursion deeper than 256 levels";
        if (s.is_boolean())
            return s.get<bool>() ? std::nullopt
                                 : std::optional<std::string>(at + ": not allowed here");
        for (auto check : {&validator::type_of, &validator::ref, &validator::value_rules,
                           &validator::object_rules, &validator::array_rules,
                           &validator::combinators, &validator::conditional})
            if (auto why = (this->*check)(s, v, at, depth))
                return why;
        return std::nullopt;
    }

private:
    using result = std::optional<std::string>;

    static std::string place(const std::string& at) { return at.empty() ? "/" : at; }

    /// " (the schema's description)" where it has one: a pattern alone rarely says what it wants.
    static std::string described(const json& s) {
        const auto d = s.find("description");
        return d != s.end() && d->is_string() ? " (" + d->get<std::string>() + ")" : "";
    }

    result type_of(const json& s, const json& v, const std::string& at, int) const {
        const auto it = s.find("type");
        if (it == s.end())
            return std::nullopt;
        const json names = it->is_array() ? *it : json::array({*it});
        for (const auto& n : names)
            if (has_type(v, n.get<std::string>()))
                return std::nullopt;
        return place(at) + ": expected " + join(names, " or ") + ", got " + kind_of(v);
    }

    result ref(const json& s, const json& v, const std::string& at, int depth) const {
        const auto it = s.find("$ref");
        if (it == s.end())
            return std::nullopt;
        const std::string r = it->get<std::string>();
        const json& target = r == "#" ? m_root : m_root["$defs"][r.substr(8)];
        return validate(target, v, at, depth + 1);
    }

    result value_rules(const json& s, const json& v, const std::string& at, int) const {
        if (const auto c = s.find("const"); c != s.end() && !(*c == v))
            return place(at) + ": expected " + shown(*c) + ", got " + shown(v);
        if (const auto e = s.find("enum");
            e != s.end() && std::find(e->begin(), e->end(), v) == e->end())
            return place(at) + ": " + shown(v) + " is not one of " + join(*e, ", ");
        if (v.is_number()) {
            const double x = v.get<double>();
            if (const auto m = s.find("minimum"); m != s.end() && x < m->get<double>())
                return place(at) + ": " + shown(v) + " is below the minimum " + dump_safe(*m);
            if (const auto m = s.find("maximum"); m != s.end() && x > m->get<double>())
                return place(at) + ": " + shown(v) + " is above the maximum " + dump_safe(*m);
        }
        if (v.is_string()) {
            // Lengths in code points, as JSON Schema counts them (the text is valid UTF-8).
            const std::string& text = v.get_ref<const std::string&>();
            const auto points = static_cast<std::size_t>(
                std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; }));
            if (const auto m = s.find("minLength"); m != s.end() && points < m->get<std::size_t>())
                return place(at) + ": expected at least " + dump_safe(*m) + " characters" +
                       described(s);
            if (const auto m = s.find("maxLength"); m != s.end() && points > m->get<std::size_t>())
                return place(at) + ": expected at most " + dump_safe(*m) + " characters" +
                       described(s);
        }
        if (const auto p = s.find("pattern"); p != s.end() && v.is_string()) {
            const std::string& text = v.get_ref<const std::string&>();
            regmatch_t range[1];
            range[0].rm_so = 0;
            range[0].rm_eo = static_cast<regoff_t>(text.size());
            // REG_STARTEND: the whole string, a NUL inside it too.
            const auto& re = m_patterns.at(p->get<std::string>())->re;
            if (::regexec(&re, text.c_str(), 1, range, REG_STARTEND) != 0)
                return place(at) + ": " + shown(v) + " does not match " + p->get<std::string>() +
                       described(s);
        }
        return std::nullopt;
    }

    result object_rules(const json& s, const json& v, const std::string& at, int depth) const {
        if (!v.is_object())
            return std::nullopt;
        if (auto why = object_size_rules(s, v, at))
            return why;
        return property_rules(s, v, at, depth);
    }

    /// required, minProperties and maxProperties: which properties and how many.
    static result object_size_rules(const json& s, const json& v, const std::string& at) {
        if (const auto r = s.find("required"); r != s.end())
            for (const auto& name : *r)
                if (!v.contains(name.get<std::string>()))
                    return place(at) + ": missing required property '" + name.get<std::string>() +
                           "'";
        if (const auto m = s.find("minProperties");
            m != s.end() && v.size() < m->get<std::size_t>())
            return place(at) + ": expected at least " + dump_safe(*m) + " properties";
        if (const auto m = s.find("maxProperties");
            m != s.end() && v.size() > m->get<std::size_t>())
            return place(at) + ": expected at most " + dump_safe(*m) + " properties";
        return std::nullopt;
    }

    /// propertyNames, properties and additionalProperties: each property's name and value.
    result property_rules(const json& s, const json& v, const std::string& at, int depth) const {
        const auto props = s.find("properties");
        const auto extra = s.find("additionalProperties");
        const auto names = s.find("propertyNames");
        for (const auto& [key, value] : v.items()) {
            const std::string here = pointer_append(at, key);
            if (names != s.end())
                if (auto why = validate(*names, json(key), here, depth + 1))
                    return why->rfind(here + ": ", 0) == 0
                               ? here + ": property name " + why->substr(here.size() + 2)
                               : *why;
            if (props != s.end() && props->contains(key)) {
                if (auto why = validate((*props)[key], value, here, depth + 1))
                    return why;
            } else if (extra != s.end()) {
                if (extra->is_boolean() && !extra->get<bool>())
                    return here + ": unknown property" +
                           (props != s.end() ? " (known: " + known_names(*props) + ")" : "");
                if (auto why = validate(*extra, value, here, depth + 1))
                    return why;
            }
        }
        return std::nullopt;
    }

    static std::string known_names(const json& props) {
        std::string out;
        for (const auto& [k, ignored] : props.items())
            out += (out.empty() ? "" : ", ") + k;
        return out;
    }

    result array_rules(const json& s, const json& v, const std::string& at, int depth) const {
        if (!v.is_array())
            return std::nullopt;
        if (const auto m = s.find("minItems"); m != s.end() && v.size() < m->get<std::size_t>())
            return place(at) + ": expected at least " + dump_safe(*m) + " items";
        if (const auto m = s.find("maxItems"); m != s.end() && v.size() > m->get<std::size_t>())
            return place(at) + ": expected at most " + dump_safe(*m) + " items";
        if (const auto items = s.find("items"); items != s.end())
            for (std::size_t i = 0; i < v.size(); ++i)
                if (auto why = validate(*items, v[i], at + "/" + std::to_string(i), depth + 1))
                    return why;
        return std::nullopt;
    }

    result combinators(const json& s, const json& v, const std::string& at, int depth) const {
        if (const auto all = s.find("allOf"); all != s.end())
            for (const auto& sub : *all)
                if (auto why = validate(sub, v, at, depth + 1))
                    return why;
        for (const char* key : {"anyOf", "oneOf"}) {
            const auto list = s.find(key);
            if (list == s.end())
                continue;
            std::size_t matched = 0;
            result best;
            for (const auto& sub : *list) {
                auto why = validate(sub, v, at, depth + 1);
                if (!why)
                    ++matched;
                else if (!best || why->find(':') > best->find(':'))
                    best = std::move(why); // the branch that got deepest
            }
            if (matched == 0) {
                const auto d = s.find("description");
                return place(at) + ": matches none of the allowed forms" +
                       (d != s.end() && d->is_string() ? " (" + d->get<std::string>() + ")" : "") +
                       (best ? "; nearest: " + *best : "");
            }
            if (key == std::string("oneOf") && matched > 1)
                return place(at) + ": matches more than one of the allowed forms";
        }
        if (const auto n = s.find("not"); n != s.end() && !validate(*n, v, at, depth + 1))
            return place(at) + ": matches a form that is not allowed here";
        return std::nullopt;
    }

    result conditional(const json& s, const json& v, const std::string& at, int depth) const {
        const auto cond = s.find("if");
        if (cond == s.end())
            return std::nullopt;
        const bool holds = !validate(*cond, v, at, depth + 1);
        const auto branch = s.find(holds ? "then" : "else");
        return branch == s.end() ? std::nullopt : validate(*branch, v, at, depth + 1);
    }

    const json& m_root;
    const pattern_map& m_patterns;
};
} // namespace

status_or<json_schema> json_schema::compile(const json& doc, const std::string& name) {
    auto patterns = std::make_shared<pattern_map>();
    schema_checker checker(doc, *patterns);
    if (auto why = checker.check(doc, ""))
        return bad_json_input(name, (why->empty() || (*why)[0] == ':' ? "/" + *why : *why));
    json_schema s;
    s.m_name = name;
    s.m_doc = std::make_shared<const json>(doc);
    s.m_patterns = std::move(patterns);
    return s;
}

std::optional<std::string> json_schema::first_error(const json& instance,
                                                    const std::string& at) const {
    const json* schema = m_doc.get();
    if (!at.empty()) {
        try {
            schema = &m_doc->at(json::json_pointer(at));
        } catch (const json::exception&) {
            return "schema " + m_name + " has no " + at;
        }
    }
    return validator(*m_doc, *m_patterns).validate(*schema, instance, "", 0);
}

std::vector<std::string> schema_names() {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < embedded_schema_count; ++i)
        out.emplace_back(embedded_schemas[i].first);
    return out;
}

const json_schema& schema_named(std::string_view name) {
    static const std::map<std::string, json_schema, std::less<>> compiled = [] {
        std::map<std::string, json_schema, std::less<>> out;
        for (std::size_t i = 0; i < embedded_schema_count; ++i) {
            const std::string file =
                std::string("reports/schema/") + embedded_schemas[i].first + ".schema.json";
            auto doc = parse_json(embedded_schemas[i].second, file);
            auto s = doc.is_ok() ? json_schema::compile(doc.value(), file) : doc.error();
            if (!s.is_ok()) {
                std::fprintf(stderr, "pitfall: built-in schema broken: %s\n",
                             s.error().message().c_str());
                std::abort();
            }
            out.emplace(embedded_schemas[i].first, std::move(s).value());
        }
        return out;
    }();
    const auto it = compiled.find(name);
    if (it == compiled.end()) {
        std::fprintf(stderr, "pitfall: no built-in schema '%.*s'\n", static_cast<int>(name.size()),
                     name.data());
        std::abort();
    }
    return it->second;
}

status validate_document(std::string_view schema, const json& doc, const std::string& file,
                         const std::string& at) {
    if (auto why = schema_named(schema).first_error(doc, at))
        return bad_json_input(file, *why);
    return status::ok();
}

} // namespace pitfall::detail
