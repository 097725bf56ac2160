# Sourced by the job scripts: Open MPI as root needs these; one BLAS thread per OpenMP thread.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OPENBLAS_NUM_THREADS=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_orte_execute_quiet=1   # no "Primary job terminated ..." notice on exit code 2/3
# OpenBLAS's kernels: chosen by measurement unless the user or the site chose (blas_core.sh)
. "$(dirname "${BASH_SOURCE[0]}")/blas_core.sh"
# The Python package (docs/python.md): `import linattn` finds python/linattn, which loads
# build/python/liblinattn_py.so (or $LINATTN_LIBRARY).
_la_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case ":${PYTHONPATH:-}:" in *":$_la_root/python:"*) ;; *) export PYTHONPATH="$_la_root/python${PYTHONPATH:+:$PYTHONPATH}" ;; esac
unset _la_root
