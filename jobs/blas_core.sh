# Sourced by jobs/env.sh: choose OPENBLAS_CORETYPE by measurement when nobody has set it
# (docs/design.md §4.9). Debian's OpenBLAS picks its kernels from the CPU's model, and a CPU
# newer than the library gets old ones (SSE3 kernels on an AVX-512 Xeon: 5x slow). So:
#   - a setting made by the user or the site (OPENBLAS_CORETYPE already in the environment,
#     even empty) is always kept;
#   - otherwise build/blas_probe runs once per candidate core type, checks sgemm and dgemm
#     against a plain loop, times them, and the fastest correct core is exported; the answer
#     is cached per host, CPU model and library in ${XDG_CACHE_HOME:-~/.cache}/linattn/;
#   - LINATTN_BLAS_PROBE=0 turns the probe off (the library's own choice stays).
# mpirun -x / srun --export pass it to every rank (jobs/main.sh, jobs/linattn.sbatch).
# Run it directly (bash jobs/blas_core.sh) to see the measurements.
_la_blas_core() {
  local root probe lib model key cache line best="" bestscore=0 c core ok sg dg score
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  probe="${LINATTN_BLAS_PROBE_BIN:-$root/build/blas_probe}"
  if [ -n "${OPENBLAS_CORETYPE+x}" ]; then
    [ "${_la_verbose:-0}" = 1 ] && echo "blas_core: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE} was set before: kept" >&2
    return 0
  fi
  [ "${LINATTN_BLAS_PROBE:-1}" = 0 ] && return 0
  [ -x "$probe" ] || return 0
  lib="$(ldd "$probe" 2>/dev/null | awk '/libopenblas/ {print $3; exit}')"
  model="$(awk -F: '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null)"
  key="$(printf '%s|%s|%s|%s' "$(hostname)" "$model" "$(readlink -f "$lib" 2>/dev/null)" \
         "$(stat -c %Y "$(readlink -f "$lib" 2>/dev/null)" 2>/dev/null)" | cksum | cut -d' ' -f1)"
  cache="${XDG_CACHE_HOME:-$HOME/.cache}/linattn/blas-core-$(hostname)-$key"
  if [ "${_la_verbose:-0}" != 1 ] && [ -r "$cache" ]; then
    best="$(cat "$cache")"
  else
    for c in default SkylakeX CooperLake SapphireRapids Zen Haswell Sandybridge; do
      if [ "$c" = default ]; then
        line="$(env -u OPENBLAS_CORETYPE timeout 120 "$probe" 2>/dev/null)" || line=""
      else
        line="$(OPENBLAS_CORETYPE=$c timeout 120 "$probe" 2>/dev/null)" || line=""
      fi
      [ "${_la_verbose:-0}" = 1 ] && echo "blas_core: $c: ${line:-crashed, timed out or wrong}" >&2
      case "$line" in *" ok=1 "*) ;; *) continue ;; esac
      sg="${line#* sgemm=}"; sg="${sg%% *}"
      dg="${line#* dgemm=}"; dg="${dg%% *}"
      score="$(awk -v s="$sg" -v d="$dg" 'BEGIN {printf "%.3f", sqrt(s * d)}')"
      if awk -v a="$score" -v b="$bestscore" 'BEGIN {exit !(a > 1.03 * b)}'; then
        best="$c" bestscore="$score"
      fi
    done
    [ -n "$best" ] || return 0
    mkdir -p "$(dirname "$cache")" 2>/dev/null && printf '%s\n' "$best" > "$cache.$$" 2>/dev/null &&
      mv -f "$cache.$$" "$cache" 2>/dev/null
    echo "blas_core: chose ${best} (sgemm x dgemm geometric mean ${bestscore} GFLOP/s, 1 thread)" \
         "; cached in $cache" >&2
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
