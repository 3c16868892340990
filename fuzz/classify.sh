#!/usr/bin/env bash
# Reads one sanitizer / libFuzzer log and says whose bug it shows:
#   fuzz/classify.sh ROOT LOG
# ROOT is the source tree the target was built from (frames in ROOT/src/,
# ROOT/tools/ and ROOT/fuzz/ are qat's). Prints key=value lines:
#   class      qat | libhdf5 | none (the log shows no failure)
#   kind       heap-buffer-overflow, memory-leak, timeout, undefined-behavior...
#   frame      the failing frame: the first one that is not the sanitizer
#              runtime, libFuzzer or libc (a libc string or memory routine
#              only does what its caller asked: the caller is the failing frame)
#   qat_frame  the first frame in qat's code on the same stack (or "none")
#   owner      whose memory it was: a heap block's allocating frame, the
#              stack frame holding the variable, a global's definition
#   why        the rule that decided
#   named      the first frame outside the runtime that has a function name
#              (libhdf5's static functions have none): for grouping findings
#   top        the first three frames outside the runtime (evidence)
# The rule (docs/trust-model.md): qat when the failing frame is qat's, or
# the memory is (a qat stack variable, a block allocated by qat's code, the
# arena in src/autograd/context.c included), or a leaked block was allocated
# by qat's code; libhdf5 when the failing frame is libhdf5's on libhdf5's
# (or unknown) memory, a leak allocated by libhdf5, an oversized or
# out-of-memory allocation made by libhdf5, a timeout spent in libhdf5.
# Anything not shown to be libhdf5's (another library, no usable frame)
# counts as qat's: only libhdf5 is excused, and only with evidence.
# Exit status: 0, or 3 when the frames are not symbolized (no function or
# file names for the target's own code: classification would be guesswork),
# 2 on a usage error.
set -euo pipefail
if [ $# -ne 2 ] || [ ! -f "$2" ]; then
  echo "usage: fuzz/classify.sh ROOT LOG" >&2
  exit 2
fi
root=${1%/}
log=$2

awk -v root="$root" -v logname="$log" '
function basename(p) { sub(/.*\//, "", p); return p }
# parse a frame line into F_func, F_file (no line), F_loc (with line), F_mod
function parse(line,   rest, hasname, n, w) {
  rest = line
  sub(/^ *#[0-9]+ 0x[0-9a-f]+ /, "", rest)
  sub(/ \(BuildId: [0-9a-f]+\)$/, "", rest)
  F_func = ""; F_file = ""; F_loc = ""; F_mod = ""
  hasname = substr(rest, 1, 3) == "in "
  if (hasname) rest = substr(rest, 4)
  sub(/^ +/, "", rest)
  if (match(rest, /\([^()]*\+0x[0-9a-f]+\)$/)) {        # (module+0xoffset): no debug info
    F_mod = substr(rest, RSTART + 1, RLENGTH - 2)
    F_loc = F_mod
    sub(/\+0x[0-9a-f]+$/, "", F_mod)
    if (hasname) F_func = substr(rest, 1, RSTART - 1)
  } else if (match(rest, /\(<unknown module>\)$/)) {
    F_mod = "<unknown module>"; F_loc = F_mod
    if (hasname) F_func = substr(rest, 1, RSTART - 1)
  } else {                                               # FUNC FILE:LINE:COL
    n = split(rest, w, " ")
    F_loc = w[n]
    F_file = F_loc
    sub(/(:[0-9]+)?(:[0-9]+)?$/, "", F_file)
    if (hasname) F_func = substr(rest, 1, length(rest) - length(F_loc))
  }
  sub(/ +$/, "", F_func)
}
# runtime (sanitizers, libFuzzer), system (libc: passes its caller'"'"'s
# bug through), qat, libhdf5 or other
function category(func, file, mod) {
  if (func ~ /^(__interceptor_|__asan|__lsan|__ubsan|__sanitizer|__interception|__sancov|fuzzer::)/) return "runtime"
  if (file != "") {
    if (index(file, root "/src/") == 1 || index(file, root "/tools/") == 1 || index(file, root "/fuzz/") == 1) return "qat"
    if (func ~ /^H5/ || file ~ /(^|\/)H5[A-Za-z0-9_]*\.c$/) return "libhdf5"   # libhdf5 with debug symbols
    if (file ~ /compiler-rt\//) return "runtime"
    if (file !~ /^\// || file ~ /^\/usr\/include\//) return "system"      # glibc sources are relative
    return "other"
  }
  if (mod ~ /libhdf5/ || func ~ /^H5/) return "libhdf5"
  if (mod ~ /(libclang_rt|libasan|libubsan|liblsan)/) return "runtime"
  if (mod ~ /\/(libc|libm|libpthread|libdl|librt)\.so/ || mod ~ /\/ld-linux[^\/]*\.so/ || mod == "[vdso]") return "system"
  if (mod ~ /\.so(\.[0-9]+)*$/ || mod == "<unknown module>") return "other"
  # the target binary: qat'"'"'s code there has debug info, so a frame without
  # a file is the statically linked runtime, unless the symbolizer failed
  if (func == "" || func ~ /^(LLVMFuzzerTestOneInput|qat_)/) unsym = 1
  return "runtime"
}
function display(cat,   loc) {
  if (F_file != "") {
    loc = F_loc
    if (index(loc, root "/") == 1) loc = substr(loc, length(root) + 2)
    return (F_func != "" ? F_func " " : "?? ") loc
  }
  if (F_func != "") return F_func " (" basename(F_mod) ")"
  return "?? (" basename(F_loc) ")"
}
# record a frame into section s
function add(s, line,   c, d) {
  parse(line)
  c = category(F_func, F_file, F_mod)
  nframes[s]++
  if (c == "runtime" || c == "system") return
  d = display(c)
  if (!(s in first_cat)) { first_cat[s] = c; first_disp[s] = d }
  if (c == "qat" && !(s in qat_disp)) qat_disp[s] = d
  if (F_func != "" && !(s in named)) named[s] = d
  if (ntop[s] < 3) { top[s] = top[s] (ntop[s] ? " < " : "") d; ntop[s]++ }
}
function is_frame(line) { return line ~ /^ *#[0-9]+ 0x[0-9a-f]+ / }

BEGIN { sec = "pre"; nleak = 0; closed["pre"] = 0 }
{
  line = $0
  if (!seen && (line ~ /ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|MemorySanitizer|ThreadSanitizer|libFuzzer): / || line ~ /: runtime error: /)) {
    seen = 1
    if (line ~ /: runtime error: /) {
      kind = "undefined-behavior"
      detail = line; sub(/.*: runtime error: /, "", detail)
      ubloc = line; sub(/: runtime error: .*/, "", ubloc)
    } else if (line ~ /ERROR: LeakSanitizer:/) {
      kind = "memory-leak"
    } else if (line ~ /ERROR: libFuzzer: /) {
      kind = line; sub(/.*ERROR: libFuzzer: /, "", kind)
      sub(/ (\(|after|on|in).*$/, "", kind); gsub(/ /, "-", kind)
    } else {
      kind = line; sub(/.*Sanitizer: /, "", kind); sub(/ .*/, "", kind)
    }
    sec = "error"; next
  }
  if (line ~ /^SUMMARY: [A-Za-z]+Sanitizer: [a-z]/ && kind != "memory-leak") {
    k = line; sub(/^SUMMARY: [A-Za-z]+Sanitizer: /, "", k); sub(/ .*/, "", k)
    if (k != "undefined-behavior") kind = k       # allocation-size-too-big, out-of-memory...
    next
  }
  if (line ~ /freed by thread/) { sec = "free"; next }
  if (line ~ /allocated by thread/) { sec = "alloc"; next }
  if (line ~ /is located in stack of thread/) { sec = "stackvar"; next }
  if (line ~ /global variable .* defined in /) {
    g = line; sub(/.* defined in \047/, "", g); sub(/\047.*/, "", g)
    F_func = "global"; F_loc = g; F_file = g; F_mod = ""
    sub(/(:[0-9]+)?(:[0-9]+)?$/, "", F_file)
    gcat = category("", F_file, "")
    if (index(g, root "/") == 1) g = substr(g, length(root) + 2)
    gdisp = "global defined in " g
    next
  }
  if (line ~ /^(Direct|Indirect) leak of /) {
    nleak++; sec = "leak" nleak; direct[sec] = (line ~ /^Direct/); next
  }
  if (line ~ /^Live Heap Allocations/) { sec = "profilehead"; next }
  if (sec == "profilehead" && line ~ /byte\(s\).* in [0-9]+ allocation/) { sec = "profile"; next }
  if (is_frame(line)) {
    if (!closed[sec]) add(sec, line)
    next
  }
  # a stack ends at the first other line after its frames
  if (nframes[sec] > 0) closed[sec] = 1
}
END {
  if (unsym) {
    print "classify: " logname ": stack frames are not symbolized (no function or file names in the fuzz target'"'"'s own frames): install llvm-symbolizer (Debian: llvm-14) or set ASAN_SYMBOLIZER_PATH, and build with -g" > "/dev/stderr"
    exit 3
  }
  if (!seen && nframes["pre"] == 0) {
    print "class=none"; print "kind=none"; print "frame=none"; print "qat_frame=none"
    print "owner=none"; print "why=the log shows no failure"; print "named=none"; print "top=none"
    exit 0
  }
  if (kind == "") kind = "unknown"
  cls = ""; owner = "unknown"
  if (kind == "memory-leak" && nleak > 0) {
    # an indirect leak hangs off a direct one: the direct ones decide
    any_direct = 0
    for (i = 1; i <= nleak; i++) if (direct["leak" i]) any_direct = 1
    pick = ""; other = ""
    for (i = 1; i <= nleak; i++) {
      s = "leak" i
      if (any_direct && !direct[s]) continue
      if (pick == "") pick = s
      c = (s in first_cat) ? first_cat[s] : "none"
      if (c == "qat") { pick = s; cls = "qat"; why = "leaked block allocated by qat'"'"'s code"; break }
      if (c != "libhdf5" && other == "") other = s
    }
    if (cls == "" && other != "") {
      pick = other; cls = "qat"
      why = "leaked block not allocated by libhdf5 (" ((other in first_cat) ? first_cat[other] : "no frame") "): counted as qat'"'"'s"
    }
    if (cls == "") { cls = "libhdf5"; why = "every leaked block allocated by libhdf5" }
    frame = (pick in first_disp) ? first_disp[pick] : "none"
    owner = frame
    qf = (pick in qat_disp) ? qat_disp[pick] : "none"
    tp = top[pick]; nm = named[pick]
  } else {
    es = (nframes["error"] > 0) ? "error" : "pre"
    # libFuzzer'"'"'s rss-limit report has no stack, only the heap profile
    if (!(es in first_cat) && ("profile" in first_cat)) es = "profile"
    fcat = (es in first_cat) ? first_cat[es] : "none"
    frame = (es in first_disp) ? first_disp[es] : "none"
    if (ubloc != "" && frame == "none") {
      F_file = ubloc; sub(/(:[0-9]+)?(:[0-9]+)?$/, "", F_file); F_loc = ubloc; F_func = ""; F_mod = ""
      fcat = category("", F_file, ""); frame = display(fcat)
    }
    qf = (es in qat_disp) ? qat_disp[es] : "none"
    tp = top[es]; nm = named[es]
    ocat = ""
    if ("alloc" in first_cat) { ocat = first_cat["alloc"]; owner = "heap block allocated at " first_disp["alloc"] }
    else if ("stackvar" in first_cat) { ocat = first_cat["stackvar"]; owner = "stack of " first_disp["stackvar"] }
    else if (gcat != "") { ocat = gcat; owner = gdisp }
    else if (kind ~ /^(allocation-size-too-big|out-of-memory|malloc-exceeds-limit)$/) { ocat = fcat; owner = "allocation at " frame }
    if (fcat == "qat") { cls = "qat"; why = (kind == "timeout" ? "the time goes in qat'"'"'s code" : "the failing frame is qat'"'"'s") }
    else if (ocat == "qat") { cls = "qat"; why = (fcat == "libhdf5" ? "libhdf5" : fcat) " code on memory qat owns" }
    else if (fcat == "libhdf5") {
      cls = "libhdf5"
      if (kind == "timeout") why = "the time goes inside libhdf5"
      else if (ocat == "libhdf5") why = "libhdf5 code on libhdf5'"'"'s own memory"
      else if (ocat == "") why = "libhdf5 code on memory of unknown origin (not qat'"'"'s: no qat allocation or stack variable)"
      else why = "libhdf5 code on memory of " ocat
    } else {
      cls = "qat"; why = "not shown to be libhdf5'"'"'s (failing frame: " fcat "): counted as qat'"'"'s"
    }
    if (detail != "") kind = kind ": " detail
  }
  print "class=" cls; print "kind=" kind; print "frame=" frame; print "qat_frame=" qf
  print "owner=" owner; print "why=" why; print "named=" (nm == "" ? frame : nm)
  print "top=" (tp == "" ? "none" : tp)
}
' "$log"
