"""A JSON Schema (draft 2020-12) reader for the drivers, standard library only: the matrix driver
runs on GPU runners and in images that have python3 and no jsonschema (Ubuntu 22.04's is too old
for 2020-12). It knows the keywords pitfall's C++ validator knows (harness json_schema.cpp) but
if/then/else, and the tests hold it to Python's jsonschema on the same documents
(ci/tests/test_matrix.py, MatrixSchema).

The first problem found is returned, with where it is (a path of keys and indices) and what was
expected there: the `description` of the schema that refused the value (through `$ref` and
`allOf` too), so that a schema's descriptions are also its error messages; else words made from
the keyword that failed.
"""
from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass

ANNOTATIONS = {"$schema", "$id", "$defs", "$comment", "title", "description", "default", "examples"}
TYPE_WORDS = {"object": "an object", "array": "a list", "string": "a string", "integer": "an integer",
              "number": "a number", "boolean": "true or false", "null": "null"}


class SchemaError(Exception):
    """The schema uses what this reader does not know: a mistake in the schema, not the input."""


@dataclass
class Problem:
    path: tuple          # keys and indices from the document's root to the refused value
    text: str            # what was expected there ("expected ...", "missing field 'x'")


def _is_type(value, name: str) -> bool:
    # bool is an int to Python and never a number to JSON; 2.0 is an integer to JSON Schema (and
    # to jsonschema and the harness), though Python reads it as a float.
    if isinstance(value, bool) and name in ("integer", "number"):
        return False
    if name == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, (int, float))
    return isinstance(value, {"object": dict, "array": list, "string": str, "boolean": bool,
                              "null": type(None)}[name])


def _same(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


@functools.lru_cache(maxsize=None)
def _ecma(pattern: str) -> re.Pattern:
    """`pattern` as ECMA-262 reads it (what JSON Schema says patterns are): `$` is the end of the
    text, never the place before a final line break as in Python; \\d and \\w are ASCII."""
    out, in_class, i = [], False, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        in_class = (in_class or ch == "[") and ch != "]"
        out.append(r"\Z" if ch == "$" and not in_class else ch)
        i += 1
    return re.compile("".join(out), re.ASCII)


class Validator:
    """One schema, compiled once; first_problem(document) checks a document against it."""

    def __init__(self, schema: dict):
        self.root = schema
        _check_keywords(schema, "#")

    def first_problem(self, document) -> Problem | None:
        return self.check(self.root, document, (), "")

    def is_valid(self, document) -> bool:
        return self.first_problem(document) is None

    def check(self, schema, value, path: tuple, described: str) -> Problem | None:
        """The first problem of `value` (at `path` in the document) against `schema`, a part of
        this one. `described`: the description of the schema that refers to this one at the same
        place ($ref, allOf), which says what is expected there better than a shared definition."""
        if isinstance(schema, bool):
            return None if schema else Problem(path, "expected nothing here")
        described = described or schema.get("description", "")
        for keyword, keyword_check in _CHECKS:
            if keyword in schema:
                problem = keyword_check(self, schema, value, path, described)
                if problem:
                    return problem
        return None

    def resolve(self, ref: str):
        if not ref.startswith("#/$defs/") or ref[8:] not in self.root.get("$defs", {}):
            raise SchemaError(f"$ref {ref!r}: only #/$defs/<name> of the same schema is read")
        return self.root["$defs"][ref[8:]]


def _check_keywords(schema, at: str) -> None:
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise SchemaError(f"{at}: expected a schema (an object or a boolean)")
    for key, sub in schema.items():
        if key not in ANNOTATIONS and key not in _KNOWN:
            raise SchemaError(f"{at}/{key}: keyword not read here")
        for name, child in _subschemas(key, sub):
            _check_keywords(child, f"{at}/{key}{name}")
    for name, child in schema.get("$defs", {}).items():
        _check_keywords(child, f"{at}/$defs/{name}")


def _subschemas(key: str, sub):
    if key == "properties":
        return [(f"/{k}", v) for k, v in sub.items()]
    if key in ("allOf", "anyOf", "oneOf"):
        return [(f"/{i}", v) for i, v in enumerate(sub)]
    if key in ("items", "additionalProperties", "propertyNames", "not"):
        return [("", sub)]
    return []


def _expected(described: str, words: str) -> str:
    return f"expected {described or words}"


# ---- the keywords, each (validator, schema, value, path, described) -> Problem | None ----------


def _ref(v: Validator, s: dict, value, path: tuple, described: str):
    return v.check(v.resolve(s["$ref"]), value, path, described)


def _type(v: Validator, s: dict, value, path: tuple, described: str):
    names = s["type"] if isinstance(s["type"], list) else [s["type"]]
    if any(_is_type(value, n) for n in names):
        return None
    return Problem(path, _expected(described, " or ".join(TYPE_WORDS[n] for n in names)))


def _const(v: Validator, s: dict, value, path: tuple, described: str):
    ok = _same(value, s["const"])
    return None if ok else Problem(path, _expected(described, json.dumps(s["const"])))


def _enum(v: Validator, s: dict, value, path: tuple, described: str):
    if any(_same(value, e) for e in s["enum"]):
        return None
    return Problem(path, _expected(described, "one of " + ", ".join(str(e) for e in s["enum"])))


def _pattern(v: Validator, s: dict, value, path: tuple, described: str):
    if not isinstance(value, str) or _ecma(s["pattern"]).search(value):
        return None
    return Problem(path, _expected(described, f"a string matching {s['pattern']}"))


def _bound(keyword: str, kind: type, size, words: str):
    """minLength, maxItems, minimum and their like: a limit on size(value) for values of kind."""
    at_least = keyword.startswith("min")

    def check(v: Validator, s: dict, value, path: tuple, described: str):
        if not isinstance(value, kind) or isinstance(value, bool):
            return None
        n, limit = size(value), s[keyword]
        if (n >= limit) if at_least else (n <= limit):
            return None
        bound = f"{'at least' if at_least else 'at most'} {limit}" + (f" {words}" if words else "")
        return Problem(path, _expected(described, bound))
    return check


def _required(v: Validator, s: dict, value, path: tuple, described: str):
    # Those that `properties` names were asked for there, in its order.
    if not isinstance(value, dict):
        return None
    named = s.get("properties", {})
    missing = next((k for k in s["required"] if k not in value and k not in named), None)
    return Problem(path, f"missing field '{missing}'") if missing is not None else None


def _property_names(v: Validator, s: dict, value, path: tuple, described: str):
    if not isinstance(value, dict):
        return None
    names = s["propertyNames"]
    for key in value:
        if v.check(names, key, path + (key,), "") is not None:
            what = names.get("description", "an allowed name") if isinstance(names, dict) else "allowed"
            return Problem(path + (key,), f"{key!r} is not {what}")
    return None


def _properties(v: Validator, s: dict, value, path: tuple, described: str):
    """Each named field in the schema's order, a required one that is missing included: the
    first problem is the first a person reading the schema top down meets."""
    if not isinstance(value, dict):
        return None
    required = s.get("required", [])
    for key, sub in s["properties"].items():
        if key not in value:
            if key in required:
                return Problem(path, f"missing field '{key}'")
            continue
        problem = v.check(sub, value[key], path + (key,), "")
        if problem:
            return problem
    return None


def _additional(v: Validator, s: dict, value, path: tuple, described: str):
    if not isinstance(value, dict):
        return None
    named = s.get("properties", {})
    for key, item in value.items():
        if key in named:
            continue
        if s["additionalProperties"] is False:
            return Problem(path + (key,), "unknown field")
        problem = v.check(s["additionalProperties"], item, path + (key,), "")
        if problem:
            return problem
    return None


def _items(v: Validator, s: dict, value, path: tuple, described: str):
    if not isinstance(value, list):
        return None
    for i, item in enumerate(value):
        problem = v.check(s["items"], item, path + (i,), "")
        if problem:
            return problem
    return None


def _all_of(v: Validator, s: dict, value, path: tuple, described: str):
    for sub in s["allOf"]:
        problem = v.check(sub, value, path, described)
        if problem:
            return problem
    return None


def _matching(v: Validator, subs: list, value, path: tuple) -> int:
    return sum(v.check(sub, value, path, "") is None for sub in subs)


def _any_of(v: Validator, s: dict, value, path: tuple, described: str):
    ok = _matching(v, s["anyOf"], value, path) > 0
    return None if ok else Problem(path, _expected(described, "one of the forms the schema allows"))


def _one_of(v: Validator, s: dict, value, path: tuple, described: str):
    ok = _matching(v, s["oneOf"], value, path) == 1
    return None if ok else Problem(path, _expected(described, "exactly one of the forms the schema allows"))


def _not(v: Validator, s: dict, value, path: tuple, described: str):
    ok = v.check(s["not"], value, path, "") is not None
    return None if ok else Problem(path, _expected(described, "not the form the schema refuses"))


# In this order: a value's own kind first, then its size, then what it holds.
_CHECKS = [
    ("$ref", _ref), ("type", _type), ("const", _const), ("enum", _enum), ("pattern", _pattern),
    ("minLength", _bound("minLength", str, len, "character(s)")),
    ("maxLength", _bound("maxLength", str, len, "character(s)")),
    ("minimum", _bound("minimum", (int, float), lambda x: x, "")),
    ("maximum", _bound("maximum", (int, float), lambda x: x, "")),
    ("minItems", _bound("minItems", list, len, "item(s)")),
    ("maxItems", _bound("maxItems", list, len, "item(s)")),
    ("minProperties", _bound("minProperties", dict, len, "field(s)")),
    ("maxProperties", _bound("maxProperties", dict, len, "field(s)")),
    ("propertyNames", _property_names), ("properties", _properties), ("required", _required),
    ("additionalProperties", _additional), ("items", _items),
    ("allOf", _all_of), ("anyOf", _any_of), ("oneOf", _one_of), ("not", _not),
]
_KNOWN = {keyword for keyword, _ in _CHECKS}
