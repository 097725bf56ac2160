# Sourced by jobs/env.sh: choose OPENBLAS_CORETYPE by measurement when nobody has set it
# (docs/design.md §4.9). Debian's OpenBLAS picks its kernels from the CPU's model, and a CPU
# newer than the library gets old ones (SSE3 on an AVX-512 Xeon: 5x slow). So:
#   - a setting made by the user or the site (OPENBLAS_CORETYPE already in the environment,
#     even empty) is always kept;
#   - otherwise build/blas_probe runs once per candidate core type that this CPU can run (its
#     /proc/cpuinfo flags, _la_blas_runnable below), checks sgemm and dgemm against a plain
#     loop, times them, and reports the core OpenBLAS really runs (openblas_get_corename). A
#     candidate that OpenBLAS runs as another core (an unknown name falls back to the widest
#     core of the CPU: SapphireRapids gives Cooperlake or Haswell in OpenBLAS 0.3.21) is
#     dropped, so the name exported is the one the report's blas_core will show;
#   - the fastest correct core is exported, under the name OpenBLAS reports; the library's own
#     choice is kept unless another is more than 3 % faster. The answer is cached per host,
#     CPU model and flags, and library, in ${XDG_CACHE_HOME:-~/.cache}/linattn/;
#   - LINATTN_BLAS_PROBE=0 turns the probe off (the library's own choice stays).
# mpirun -x / srun --export pass it to every rank (jobs/main.sh, jobs/linattn.sbatch).
# Run it directly (bash jobs/blas_core.sh) to see the measurements.
# For tests (tests/cli/check_blas_core.sh): LINATTN_BLAS_PROBE_BIN replaces build/blas_probe
# and LINATTN_BLAS_CPU_FLAGS the flags of /proc/cpuinfo (space-separated).

# The CPU flags: x86's "flags" line of /proc/cpuinfo (ARM's is "Features", which names no
# x86 core, so there only the library's own choice is a candidate).
_la_cpu_flags() {
  if [ -n "${LINATTN_BLAS_CPU_FLAGS+x}" ]; then
    printf '%s\n' "$LINATTN_BLAS_CPU_FLAGS"
  else
    awk -F: '/^flags[ \t]*:/ {print $2; exit}' /proc/cpuinfo 2>/dev/null
  fi
}

# Status 0 if a CPU with flags $2 can run OpenBLAS core type $1 ("default" always): the
# instruction sets each core's kernels are built for (gcc's -march of that CPU, the features
# that tell it apart). OpenBLAS does not check them when the core is forced: SkylakeX on a
# Zen 2 dies of SIGILL.
_la_blas_runnable() {
  local need f
  case "$1" in
    default) return 0 ;;
    SkylakeX) need="avx512f avx512cd avx512bw avx512dq avx512vl" ;;
    CooperLake) need="avx512f avx512cd avx512bw avx512dq avx512vl avx512_bf16" ;;
    SapphireRapids) need="avx512f avx512cd avx512bw avx512dq avx512vl avx512_bf16 avx512_fp16 amx_tile amx_bf16" ;;
    Haswell | Zen) need="avx2 fma" ;;
    Sandybridge) need="avx" ;;
    *) return 1 ;;
  esac
  for f in $need; do
    case " $2 " in *" $f "*) ;; *) return 1 ;; esac
  done
  return 0
}

_la_blas_core() {
  local root probe lib model flags key cache line best="" bestcore="" bestscore=0 c core sg dg score
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  probe="${LINATTN_BLAS_PROBE_BIN:-$root/build/blas_probe}"
  if [ -n "${OPENBLAS_CORETYPE+x}" ]; then
    if [ "${_la_verbose:-0}" = 1 ]; then
      line=""
      if [ -x "$probe" ]; then line="$(timeout 120 "$probe" --check-only 2>/dev/null)" || line=""; fi
      case "$line" in core=*) core="${line#core=}"; core="(OpenBLAS runs ${core%% *})" ;; *) core="" ;; esac
      echo "blas_core: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE} was set before: kept${core:+ $core}" >&2
    fi
    return 0
  fi
  [ "${LINATTN_BLAS_PROBE:-1}" = 0 ] && return 0
  [ -x "$probe" ] || return 0
  lib="$(ldd "$probe" 2>/dev/null | awk '/libopenblas/ {print $3; exit}')"
  model="$(awk -F: '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null)"
  flags="$(_la_cpu_flags)"
  key="$(printf '%s|%s|%s|%s|%s' "$(hostname)" "$model" "$flags" "$(readlink -f "$lib" 2>/dev/null)" \
         "$(stat -c %Y "$(readlink -f "$lib" 2>/dev/null)" 2>/dev/null)" | cksum | cut -d' ' -f1)"
  # blas-core2: the cache of the scripts before 2 held the name asked for, not the one run
  cache="${XDG_CACHE_HOME:-$HOME/.cache}/linattn/blas-core2-$(hostname)-$key"
  if [ "${_la_verbose:-0}" != 1 ] && [ -r "$cache" ]; then
    read -r best bestcore < "$cache" || true
  else
    for c in default SkylakeX CooperLake SapphireRapids Zen Haswell Sandybridge; do
      if ! _la_blas_runnable "$c" "$flags"; then
        [ "${_la_verbose:-0}" = 1 ] && echo "blas_core: $c: skipped, this CPU lacks its instructions" >&2
        continue
      fi
      if [ "$c" = default ]; then
        line="$(env -u OPENBLAS_CORETYPE timeout 120 "$probe" 2>/dev/null)" || line=""
      else
        line="$(OPENBLAS_CORETYPE=$c timeout 120 "$probe" 2>/dev/null)" || line=""
      fi
      [ "${_la_verbose:-0}" = 1 ] && echo "blas_core: $c: ${line:-crashed, timed out or wrong}" >&2
      case "$line" in "core="*" ok=1 "*) ;; *) continue ;; esac
      core="${line#core=}"; core="${core%% *}"
      # OpenBLAS ran another core than the one asked for: exporting $c would name a core
      # that does not run (the name it runs as is tried on its own when it is a candidate)
      if [ "$c" != default ] && [ "${core,,}" != "${c,,}" ]; then
        [ "${_la_verbose:-0}" = 1 ] && echo "blas_core: $c: dropped, OpenBLAS runs $core instead" >&2
        continue
      fi
      sg="${line#* sgemm=}"; sg="${sg%% *}"
      dg="${line#* dgemm=}"; dg="${dg%% *}"
      score="$(awk -v s="$sg" -v d="$dg" 'BEGIN {printf "%.3f", sqrt(s * d)}')"
      if awk -v a="$score" -v b="$bestscore" 'BEGIN {exit !(a > 1.03 * b)}'; then
        best="$c" bestcore="$core" bestscore="$score"
        [ "$c" = default ] || best="$core" # the name OpenBLAS gives it, which it accepts back
      fi
    done
    [ -n "$best" ] || return 0
    mkdir -p "$(dirname "$cache")" 2>/dev/null && printf '%s %s\n' "$best" "$bestcore" > "$cache.$$" 2>/dev/null &&
      mv -f "$cache.$$" "$cache" 2>/dev/null
    if [ "$best" = default ]; then
      echo "blas_core: chose ${bestcore}, the library's own choice (OPENBLAS_CORETYPE left unset;" \
           "sgemm x dgemm geometric mean ${bestscore} GFLOP/s, 1 thread); cached in $cache" >&2
    else
      echo "blas_core: chose ${bestcore} (sgemm x dgemm geometric mean ${bestscore} GFLOP/s, 1 thread)" \
           "; cached in $cache" >&2
    fi
  fi
  # the library's own choice won (within 3 %): leave it alone
  [ -n "$best" ] && [ "$best" != default ] && export OPENBLAS_CORETYPE="$best"
  return 0
}
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  _la_verbose=1
  _la_blas_core
  echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-}"
else
  _la_blas_core
fi
