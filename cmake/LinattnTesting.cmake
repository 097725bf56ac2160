# linattn_add_mpi_test(NAME name COMMAND exe args... NPROCS 1 2 3 ...)
# Registers name_npP for each P, launched as
#   MPIEXEC_EXECUTABLE MPIEXEC_NUMPROC_FLAG P MPIEXEC_PREFLAGS exe MPIEXEC_POSTFLAGS args
# so the same tests run under srun (-DMPIEXEC_EXECUTABLE=srun -DMPIEXEC_NUMPROC_FLAG=-n).
# With LAUNCHER_ARG, the launcher prefix is instead passed to the command as one argument
# (for driver scripts that start the program themselves). "@NP@" in COMMAND becomes P.
function(linattn_add_mpi_test)
  cmake_parse_arguments(T "LAUNCHER_ARG" "NAME;TIMEOUT" "COMMAND;NPROCS;LABELS" ${ARGN})
  foreach(np IN LISTS T_NPROCS)
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
    if(NOT T_TIMEOUT)
      set_tests_properties(${T_NAME}_np${np} PROPERTIES TIMEOUT 600)
    endif()
  endforeach()
endfunction()
