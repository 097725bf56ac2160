# Test registration helpers (tests/CMakeLists.txt).
#
# A test that needs Python 3 with NumPy says REQUIRES_PYTHON. When LINATTN_HAVE_PYTHON is
# false in the calling scope, such a test is still registered under its name, as a
# placeholder that ctest reports as skipped (with the reason in LINATTN_PYTHON_SKIP), so a
# configuration without Python builds and runs every C test and shows what it left out.

# linattn_skip_test(NAME name REASON text [LABELS ...]): a placeholder reported as skipped.
function(linattn_skip_test)
  cmake_parse_arguments(S "" "NAME;REASON" "LABELS" ${ARGN})
  add_test(NAME ${S_NAME} COMMAND ${CMAKE_COMMAND} -E echo "skipped: ${S_REASON}")
  set_tests_properties(${S_NAME} PROPERTIES SKIP_REGULAR_EXPRESSION "skipped: " LABELS "${S_LABELS}")
endfunction()

# linattn_add_test(NAME name [REQUIRES_PYTHON] [LABELS ...] [TIMEOUT s] [ENVIRONMENT ...]
#                  [SKIP_RETURN_CODE c] COMMAND exe args...)
function(linattn_add_test)
  cmake_parse_arguments(T "REQUIRES_PYTHON" "NAME;TIMEOUT;SKIP_RETURN_CODE"
    "COMMAND;LABELS;ENVIRONMENT" ${ARGN})
  if(T_REQUIRES_PYTHON AND NOT LINATTN_HAVE_PYTHON)
    linattn_skip_test(NAME ${T_NAME} REASON "${LINATTN_PYTHON_SKIP}" LABELS "${T_LABELS}")
    return()
  endif()
  add_test(NAME ${T_NAME} COMMAND ${T_COMMAND})
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}")
  if(T_TIMEOUT)
    set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT})
  endif()
  if(T_ENVIRONMENT)
    set_tests_properties(${T_NAME} PROPERTIES ENVIRONMENT "${T_ENVIRONMENT}")
  endif()
  if(DEFINED T_SKIP_RETURN_CODE)
    set_tests_properties(${T_NAME} PROPERTIES SKIP_RETURN_CODE ${T_SKIP_RETURN_CODE})
  endif()
endfunction()

# linattn_add_mpi_test(NAME name COMMAND exe args... NPROCS 1 2 3 ... [REQUIRES_PYTHON])
# Registers name_npP for each P, launched as
#   MPIEXEC_EXECUTABLE MPIEXEC_NUMPROC_FLAG P MPIEXEC_PREFLAGS exe MPIEXEC_POSTFLAGS args
# so the same tests run under srun (-DMPIEXEC_EXECUTABLE=srun -DMPIEXEC_NUMPROC_FLAG=-n).
# With LAUNCHER_ARG, the launcher prefix is instead passed to the command as one argument
# (for driver scripts that start the program themselves). "@NP@" in COMMAND becomes P.
# The ranks inherit ctest's environment (mpirun passes it on to local ranks), so the
# sanitizer options of the `sanitize` test preset reach them.
# FULL_NPROCS P ...: further rank counts, registered with the label `full` (the exhaustive
# tier: `bash jobs/test.sh --full`; docs/testing.md "Test time").
function(linattn_add_mpi_test)
  cmake_parse_arguments(T "LAUNCHER_ARG;REQUIRES_PYTHON" "NAME;TIMEOUT" "COMMAND;NPROCS;LABELS;FULL_NPROCS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set(base_labels "${T_LABELS}")
  foreach(np IN LISTS T_NPROCS T_FULL_NPROCS)
    set(T_LABELS "${base_labels}")
    if(np IN_LIST T_FULL_NPROCS)
      list(APPEND T_LABELS full)
    endif()
    if(T_REQUIRES_PYTHON AND NOT LINATTN_HAVE_PYTHON)
      linattn_skip_test(NAME ${T_NAME}_np${np} REASON "${LINATTN_PYTHON_SKIP}" LABELS "mpi;${T_LABELS}")
      continue()
    endif()
    string(REPLACE "@NP@" "${np}" command "${T_COMMAND}")
    set(pre ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS})
    if(T_LAUNCHER_ARG)
      list(JOIN pre " " pre_s)
      set(cmd ${command} --launcher "${pre_s}")
    else()
      list(GET command 0 exe)
      set(rest "")
      list(LENGTH command ncmd)
      if(ncmd GREATER 1) # SUBLIST refuses a begin index equal to the length
        list(SUBLIST command 1 -1 rest)
      endif()
      set(cmd ${pre} ${exe} ${MPIEXEC_POSTFLAGS} ${rest})
    endif()
    add_test(NAME ${T_NAME}_np${np} COMMAND ${cmd})
    set_tests_properties(${T_NAME}_np${np} PROPERTIES PROCESSORS ${np}
      LABELS "mpi;${T_LABELS}" TIMEOUT ${T_TIMEOUT}
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;OMPI_MCA_orte_execute_quiet=1;OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1")
  endforeach()
endfunction()
