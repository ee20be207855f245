"""Which of a scenario's evidence threads its baselines gate, read from scenario.json and expected/.

Each thread in a scenario.json's "evidence" names, in "gated_by", what of the scenario shows the
thread's effect: [{"variant": "<variant>", "<kind>": "<name>"}], kind one of
  check        a ctx.check the case runs (pinned when the entry's "records" lists it);
  measurement  a measurement (pinned when the entry bounds it or its "records" lists it);
  event        an event the entry pins;
  error        an error the entry's outcome or one of its events names;
  signal       the signal the entry's outcome names (SIGSEGV);
  ran_on       the start of the entry's ran_on ("cpu: silent fallback").
"seen_on" says on which backend the thread's failure happened ("cuda" unless "cpu": a host-side
failure such as mlock's ENOMEM). A thread is then, by the best of what it names:
  gated                 pinned in an entry that reproduces the case where the thread saw it
                        (observed on a GPU for "cuda");
  checked, not pinned   a check the case runs where the thread saw it, in an entry blessed
                        before entries listed their checks (its failure fails the case; its
                        absence would not be noticed until the entry is blessed again);
  modelled              pinned only in a model of it: the CPU backend for a GPU failure, a
                        prediction, a documented entry.
A thread whose gated_by names nothing any of these is refused: its "shows" is a claim no
baseline holds the scenario to.
"""
from __future__ import annotations


from claims import claim_of
from pitfall_drivers.files import BadInput  # tools/, on the path catalog.py sets

REF_KINDS = ("check", "measurement", "event", "error", "signal", "ran_on")
CLASSES = ("gated", "checked, not pinned", "modelled")  # best first


def read_gated_by(item: dict, where: str, variant_names: set) -> tuple[list[tuple[str, str, str]], str]:
    """(variant, kind, name) of an evidence item's gated_by, and its seen_on."""
    refs = item.get("gated_by")
    if not isinstance(refs, list) or not refs or len(refs) > 32:
        raise BadInput(f"{where}.gated_by: expected 1 to 32 of {{\"variant\", one of "
                       f"{', '.join(REF_KINDS)}}}: what of the scenario gates the thread's effect")
    out = []
    for j, ref in enumerate(refs):
        at = f"{where}.gated_by[{j}]"
        if not isinstance(ref, dict) or set(ref) - {"variant", *REF_KINDS}:
            raise BadInput(f"{at}: expected {{\"variant\", one of {', '.join(REF_KINDS)}}}")
        kinds = [k for k in REF_KINDS if k in ref]
        if ref.get("variant") not in variant_names:
            raise BadInput(f"{at}.variant: expected one of the scenario's variants")
        if len(kinds) != 1 or not isinstance(ref[kinds[0]], str) or not ref[kinds[0]] or len(ref[kinds[0]]) > 200:
            raise BadInput(f"{at}: expected exactly one of {', '.join(REF_KINDS)}, a name")
        out.append((ref["variant"], kinds[0], ref[kinds[0]]))
    seen_on = item.get("seen_on", "cuda")
    if seen_on not in ("cuda", "cpu"):
        raise BadInput(f"{where}.seen_on: expected \"cuda\" or \"cpu\": where the thread's failure happened")
    return out, seen_on


def _names(value) -> list:
    return value if isinstance(value, list) else []


def pinned(entry: dict, kind: str, name: str) -> bool:
    """Whether a baseline entry holds its case to `name` of `kind`."""
    records = entry.get("records") if isinstance(entry.get("records"), dict) else {}
    events = entry.get("events") if isinstance(entry.get("events"), dict) else {}
    if kind == "check":
        return name in _names(records.get("checks"))
    if kind == "measurement":
        bounds = entry.get("measurements") if isinstance(entry.get("measurements"), dict) else {}
        return name in bounds or name in _names(records.get("measurements"))
    if kind == "event":
        return name in events
    if kind == "error":
        outcomes = [entry.get("outcome")] + list(events.values())
        return any(isinstance(o, dict) and o.get("error") == name for o in outcomes)
    if kind == "signal":
        return isinstance(entry.get("outcome"), dict) and entry["outcome"].get("signal") == name
    ran_on = entry.get("ran_on")
    return isinstance(ran_on, str) and ran_on.startswith(name)


def classify_thread(refs, seen_on: str, entries: list[tuple[str, str, str, dict]], variants: dict,
                    source: str) -> tuple[str | None, list[str]]:
    """The thread's class (None: gated by nothing) and, for it, where: "profile: variant kind name".
    `entries`: (profile, backend, variant, entry) of every baseline of the scenario."""
    found: dict[str, list[str]] = {c: [] for c in CLASSES}
    for variant, kind, name in refs:
        for profile, backend, v, entry in entries:
            if v != variant:
                continue
            claim = claim_of(entry, backend, variants.get(v, {}))
            if claim == "unsupported":
                continue
            at = f"{profile}: {backend}.{v} {kind} {name}"
            if pinned(entry, kind, name):
                here = claim == "reproduced" and backend == seen_on
                found["gated" if here else "modelled"].append(at)
            elif kind == "check" and "records" not in entry and claim == "reproduced" and \
                    backend == seen_on and f'"{name}"' in source:
                found["checked, not pinned"].append(at)
    for c in CLASSES:
        if found[c]:
            return c, found[c]
    return None, []


def classify_evidence(scenario: dict, entries: list[dict], source: str) -> None:
    """Sets each of the scenario's evidence items' "class" and "gated_at", from its baseline
    entries (claims.scenario_entries()); BadInput naming the thread when one is gated by nothing."""
    entries = [(e["profile"], e["backend"], e["variant"], e["entry"]) for e in entries]
    for i, e in enumerate(scenario["evidence"]):
        cls, where = classify_thread(e["gated_by"], e["seen_on"], entries, scenario["variants_by_name"], source)
        if cls is None:
            raise BadInput(f"{scenario['folder'] / 'scenario.json'}: field 'evidence[{i}].gated_by': "
                           f"{e['repo']}#{e['number']}: nothing it names is pinned by a baseline under "
                           "expected/ (a check in an entry's records, a bounded or recorded measurement, "
                           "an event, an error, a signal, ran_on): its 'shows' is a claim nothing holds the "
                           "scenario to")
        e["class"], e["gated_at"] = cls, where


def count_line(scenarios: list[dict]) -> str:
    counts = {c: 0 for c in CLASSES}
    for s in scenarios:
        for e in s["evidence"]:
            counts[e["class"]] += 1
    total = sum(counts.values())
    return (f"{total} evidence threads: " + ", ".join(f"{n} {c}" for c, n in counts.items()) +
            " (ci/evidence.py says what each class means).")
