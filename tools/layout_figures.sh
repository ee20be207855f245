#!/usr/bin/env bash
# Prints the layout figures issue 29 tracks, each from the command that measures it, so that a
# before and an after come from the same script: folders and files under harness/, the biggest
# C++ file, files over 1,000 lines, functions over 80 lines, the highest cyclomatic complexity
# (lizard), duplicate pairs in scenarios/ and ci/ (the `duplicates` tool, where installed),
# scenario lines and README lines.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v lizard >/dev/null || { echo "layout_figures: lizard is not installed (python3 -m pip install lizard)" >&2; exit 2; }
# Tracked files as they are in the working tree (one being moved may be gone).
existing() { while read -r f; do [ -f "$f" ] && echo "$f"; done; }
echo "harness folders: $(find harness -type d -not -path '*/fixtures/*' | wc -l)"
echo "harness files:   $( (git ls-files harness; git ls-files --others --exclude-standard harness) | sort -u | existing | wc -l)"
sources=$( (git ls-files 'harness/*.cpp' 'harness/*.hpp' 'harness/*.cu' 'harness/*.cuh'; git ls-files --others --exclude-standard harness) | grep -E '\.(cpp|hpp|cu|cuh)$' | grep -v '/tests/' | sort -u | existing)
echo "biggest harness source: $(wc -l $sources | grep -v ' total$' | sort -n | tail -1)"
echo "harness sources over 1000 lines: $(wc -l $sources | grep -v ' total$' | awk '$1 > 1000' | wc -l)"
echo "harness sources over 600 lines:  $(wc -l $sources | grep -v ' total$' | awk '$1 > 600' | wc -l)"
# lizard's CSV: nloc,ccn,tokens,params,length,location,file,function,long_name,start,end
code=$( (echo "$sources"; git ls-files 'scenarios/*.cpp' 'scenarios/*.cu' 'scenarios/*.hpp' \
  'scenarios/*.cuh' 'ci/*.py' 'tools/*.py') | grep -v '/tests/' | sort -u | existing)
lizard --csv $code 2>/dev/null > /tmp/layout_figures.csv || true
echo "functions over 80 lines: $(awk -F, '$5 > 80' /tmp/layout_figures.csv | wc -l)"
echo "highest cyclomatic complexity: $(sort -t, -k2 -n /tmp/layout_figures.csv | tail -1 | awk -F, '{gsub(/"/,"",$8); print $2" ("$8" in "$7")"}')"
echo "functions over complexity 20: $(awk -F, '$2 > 20' /tmp/layout_figures.csv | wc -l)"
echo "scenario lines: $(cat $(git ls-files 'scenarios/*.cpp' 'scenarios/*.cu' 'scenarios/*.hpp' 'scenarios/*.cuh') | wc -l)"
echo "README lines: $(wc -l < README.md)"
if command -v duplicates >/dev/null; then
  echo "duplicate pairs in scenarios/: $(duplicates --repo scenarios --seconds 60 | head -1)"
  echo "duplicate pairs in ci/ and tools/: $(duplicates --repo ci --seconds 60 | head -1); $( [ -d tools ] && duplicates --repo tools --seconds 60 | head -1)"
fi
