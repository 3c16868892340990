#!/usr/bin/env bash
# The modules of src/ (one folder each; src/layers/ops is part of layers)
# reach each other only through their public headers (include/qat) and
# the headers a module offers the others on purpose: a header of src/M
# may be included from src/N (N != M) only if its comment has a line
#     Shared with: src/N ...
# naming N. Every other header is private to its folder. The folders'
# dependency graph this gives must have no cycle. Prints each offending
# include, then the graph.
#   module_graph.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: module_graph.sh SOURCE_DIR}
cd "$src"
bad=0
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
while IFS= read -r f; do
  mod=$(cut -d/ -f2 <<< "$f")
  while IFS= read -r inc; do
    case $inc in
      qat/*) continue ;;                   # public
      */*) ;;
      *) continue ;;                       # the same folder (or a generated header)
    esac
    if [[ $inc == ../* ]]; then            # src/layers/ops -> src/layers
      target=$(realpath -m --relative-to=. "$(dirname "$f")/$inc")
    else
      target="src/$inc"
    fi
    owner=$(cut -d/ -f2 <<< "$target")
    [ "$owner" = "$mod" ] && continue
    if [ ! -f "$target" ]; then
      echo "$f: #include \"$inc\": no such header in src/"; bad=1; continue
    fi
    if ! grep -qE "^ \* Shared with:.*\bsrc/$mod\b" "$target"; then
      echo "$f: #include \"$inc\": private to src/$owner (its comment shares it with: $(sed -n 's/^ \* Shared with: *//p' "$target" | head -1))"
      bad=1
    fi
    echo "$mod $owner" >> "$edges"
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(find src -name '*.[ch]' | sort)
sort -u "$edges" -o "$edges"
if ! tsort "$edges" > /dev/null 2>&1; then
  echo "the modules' dependencies have a cycle:"; tsort "$edges" 2>&1 >/dev/null | sed 's/^/  /'; bad=1
fi
echo "module graph ($(wc -l < "$edges") edges between folders, each through a shared header):"
awk '{d[$1] = d[$1] " " $2} END {for (m in d) print "  " m " ->" d[m]}' "$edges" | sort
exit $bad
