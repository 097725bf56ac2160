#!/usr/bin/env bash
# jobs/blas_core.sh (docs/design.md §4.9) exports, prints and caches the core OpenBLAS really
# runs, and tries only the cores this CPU can run (test blas_core, label unit).
#  1. _la_blas_runnable against flag lists of real CPUs (Zen 2, Zen 4, Sapphire Rapids,
#     Sandy Bridge, ARM's Features line, none).
#  2. A fake blas_probe that answers as OpenBLAS 0.3.21 on a Zen 2 (SkylakeX and CooperLake die
#     of SIGILL; SapphireRapids, a name that release does not know, runs Haswell and times
#     fastest), with the Zen 2 flags: the probe is never started for an AVX-512 core, the
#     script chooses, prints, caches and exports Haswell, a second (sourced) run takes the
#     cache without probing, and a set OPENBLAS_CORETYPE is kept with the core it runs named.
#     The scripts before this test chose "SapphireRapids" there (issue 36).
#  3. The same on a Sapphire Rapids with that release, where SapphireRapids runs Cooperlake:
#     it is dropped, and Cooperlake is exported in OpenBLAS's spelling.
#  4. With the real build/blas_probe (when given) on this machine: the exported core (or, when
#     the library's own choice won, the unset variable) makes OpenBLAS report exactly the core
#     the script printed.
# Usage: check_blas_core.sh SRC [BLAS_PROBE]
set -u
src=$1 real=${2:-}
script=$src/jobs/blas_core.sh
fails=0
check() { # check COND_STATUS WHAT [GOT]
  if [ "$1" = 0 ]; then echo "ok: $2"; else echo "FAIL: $2${3:+ (got: $3)}"; fails=$((fails + 1)); fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset OPENBLAS_CORETYPE

# --- 1. the filter ---
zen2="fpu sse sse2 ssse3 sse4_1 sse4_2 avx f16c fma avx2 bmi1 bmi2"
zen4="$zen2 avx512f avx512dq avx512ifma avx512cd avx512bw avx512vl avx512_bf16 avx512vbmi"
spr="$zen4 avx_vnni avx512_fp16 amx_bf16 amx_tile amx_int8"
snb="fpu sse sse2 ssse3 sse4_1 sse4_2 avx"
arm="fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm"
runnable() { # runnable FLAGS -> the candidates _la_blas_runnable accepts, space-separated
  (LINATTN_BLAS_PROBE=0; . "$script"
   for c in default SkylakeX CooperLake SapphireRapids Zen Haswell Sandybridge; do
     _la_blas_runnable "$c" "$1" && printf '%s ' "$c"
   done)
}
for case in "zen2|default Zen Haswell Sandybridge " \
            "zen4|default SkylakeX CooperLake Zen Haswell Sandybridge " \
            "spr|default SkylakeX CooperLake SapphireRapids Zen Haswell Sandybridge " \
            "snb|default Sandybridge " "arm|default " "none|default "; do
  name=${case%%|*} want=${case#*|}
  case $name in zen2) f=$zen2 ;; zen4) f=$zen4 ;; spr) f=$spr ;; snb) f=$snb ;; arm) f=$arm ;; none) f="" ;; esac
  got=$(runnable "$f")
  [ "$got" = "$want" ]; check $? "candidates on $name: $want" "$got"
done
# a flag that only contains another's name does not count (avx512f is not avx)
got=$(runnable "sse2 avx512fx avx2x")
[ "$got" = "default " ]; check $? "flags are matched as whole words" "$got"

# --- 2. Zen 2 with OpenBLAS 0.3.21 (fake probe) ---
fake=$tmp/fake_probe
cat > "$fake" <<'EOF'
#!/usr/bin/env bash
# Answers as OpenBLAS would on the CPU $FAKE_CPU; logs each core type asked for.
c=${OPENBLAS_CORETYPE-default}
[ "${1:-}" = --check-only ] || echo "$c" >> "$FAKE_LOG"
line() { echo "core=$1 ok=1 sgemm=$2 dgemm=$3 err=0.01"; }
case "$FAKE_CPU:$c" in
  zen2:default | zen2:Zen) line Zen 70.7 47.7 ;;
  zen2:SapphireRapids) line Haswell 95.0 48.0 ;;   # unknown name: falls back to Haswell
  zen2:Haswell) line Haswell 90.0 46.0 ;;
  zen2:Sandybridge) line Sandybridge 50.0 25.0 ;;
  zen2:*) kill -ILL $$ ;;                           # AVX-512 kernels on a CPU without them
  spr:default) line Cooperlake 150.0 65.0 ;;
  spr:SkylakeX) line SkylakeX 158.0 66.0 ;;
  spr:CooperLake | spr:Cooperlake) line Cooperlake 165.0 70.0 ;;
  spr:SapphireRapids) line Cooperlake 180.0 75.0 ;; # unknown name: falls back to Cooperlake
  spr:Zen) line Zen 94.0 48.0 ;;
  spr:Haswell) line Haswell 83.0 43.0 ;;
  spr:Sandybridge) line Sandybridge 68.0 33.0 ;;
  *) exit 1 ;;
esac
EOF
chmod +x "$fake"
export LINATTN_BLAS_PROBE_BIN=$fake FAKE_LOG=$tmp/log
run_case() { # run_case CPU FLAGS -> $out (stdout+stderr of a direct run), $log (cores asked)
  : > "$FAKE_LOG"
  out=$(FAKE_CPU=$1 LINATTN_BLAS_CPU_FLAGS=$2 XDG_CACHE_HOME=$tmp/cache_$1 bash "$script" 2>&1)
  log=$(tr '\n' ' ' < "$FAKE_LOG")
}
run_case zen2 "$zen2"
[ "$log" = "default Zen Haswell Sandybridge " ]; check $? "zen2: the probe ran only the runnable cores" "$log"
echo "$out" | grep -qx "OPENBLAS_CORETYPE=Haswell"; check $? "zen2: exports Haswell" "$out"
echo "$out" | grep -q "^blas_core: chose Haswell "; check $? "zen2: prints 'chose Haswell'" "$out"
echo "$out" | grep -q "^blas_core: SapphireRapids: skipped, this CPU lacks its instructions"
check $? "zen2: says why SapphireRapids was not tried" "$out"
cached=$(cat "$tmp"/cache_zen2/linattn/blas-core2-* 2>/dev/null)
[ "$cached" = "Haswell Haswell" ]; check $? "zen2: the cache holds Haswell" "$cached"
# sourced, as jobs/env.sh does: from the cache, no probe
: > "$FAKE_LOG"
got=$(FAKE_CPU=zen2 LINATTN_BLAS_CPU_FLAGS=$zen2 XDG_CACHE_HOME=$tmp/cache_zen2 \
      bash -c '. "$1" 2>/dev/null; echo "${OPENBLAS_CORETYPE-unset}"' _ "$script")
[ "$got" = Haswell ] && [ ! -s "$FAKE_LOG" ]; check $? "zen2: sourced again, Haswell from the cache without probing" "$got; probed: $(tr '\n' ' ' < "$FAKE_LOG")"
# the same CPU model with other flags (a hypervisor that hides some) does not take that cache
got=$(FAKE_CPU=zen2 LINATTN_BLAS_CPU_FLAGS=$snb XDG_CACHE_HOME=$tmp/cache_zen2 \
      bash -c '. "$1" 2>/dev/null; echo "${OPENBLAS_CORETYPE-unset}"' _ "$script")
[ "$got" = unset ]; check $? "zen2: other flags, another cache entry (Sandybridge slower than the library's Zen)" "$got"
# a setting made before is kept, and the core it runs is named
out=$(FAKE_CPU=zen2 OPENBLAS_CORETYPE=SapphireRapids bash "$script" 2>&1)
echo "$out" | grep -q "OPENBLAS_CORETYPE=SapphireRapids was set before: kept (OpenBLAS runs Haswell)" &&
  echo "$out" | grep -qx "OPENBLAS_CORETYPE=SapphireRapids"
check $? "zen2: a set OPENBLAS_CORETYPE is kept, and what it runs is printed" "$out"

# --- 3. Sapphire Rapids with OpenBLAS 0.3.21 (fake probe) ---
run_case spr "$spr"
[ "$log" = "default SkylakeX CooperLake SapphireRapids Zen Haswell Sandybridge " ]
check $? "spr: every candidate probed" "$log"
echo "$out" | grep -q "^blas_core: SapphireRapids: dropped, OpenBLAS runs Cooperlake instead"
check $? "spr: SapphireRapids dropped (OpenBLAS runs Cooperlake)" "$out"
echo "$out" | grep -qx "OPENBLAS_CORETYPE=Cooperlake" && echo "$out" | grep -q "^blas_core: chose Cooperlake "
check $? "spr: exports and prints Cooperlake, OpenBLAS's spelling" "$out"
unset LINATTN_BLAS_PROBE_BIN FAKE_LOG

# --- 4. the real library on this machine ---
if [ -n "$real" ] && [ -x "$real" ]; then
  out=$(LINATTN_BLAS_PROBE_BIN=$real XDG_CACHE_HOME=$tmp/cache_real bash "$script" 2>&1)
  echo "$out" | sed 's/^/  | /'
  printed=$(echo "$out" | sed -n 's/^blas_core: chose \([^ ,]*\).*/\1/p')
  exported=$(echo "$out" | sed -n 's/^OPENBLAS_CORETYPE=//p')
  if [ -n "$exported" ]; then
    ran=$(OPENBLAS_CORETYPE=$exported "$real" --check-only | sed -n 's/^core=\([^ ]*\).*/\1/p')
  else
    ran=$(env -u OPENBLAS_CORETYPE "$real" --check-only | sed -n 's/^core=\([^ ]*\).*/\1/p')
  fi
  [ -n "$printed" ] && [ "$printed" = "$ran" ] && { [ -z "$exported" ] || [ "$exported" = "$ran" ]; }
  check $? "real OpenBLAS: printed '$printed', exported '${exported:-(unset)}', OpenBLAS runs '$ran'"
else
  echo "note: no blas_probe given, the real library's case is not run"
fi

[ $fails = 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all checks passed"
