# Cross build for 64-bit ARM Linux with Debian's cross compiler and multiarch libraries
# (docs/testing.md "The aarch64 check"; jobs/aarch64_check.sh installs them and uses this):
#   gcc-aarch64-linux-gnu          the compiler, its C library in /usr/aarch64-linux-gnu
#   libopenblas-dev:arm64, liblapacke-dev:arm64   BLAS, LAPACK, LAPACKE in /usr/lib/aarch64-linux-gnu
#   libgomp1:arm64                 OpenMP's run-time library for the tests (libc6:arm64 comes along)
#   qemu-user                      qemu-aarch64, which ctest puts in front of each test binary
# Use with -DLINATTN_CORE_ONLY=ON: Open MPI's arm64 -dev package cannot be installed beside the
# amd64 one the rest of the project needs, so linattn::dist and its tests are left out.
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DLINATTN_CORE_ONLY=ON
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
# Debian's multiarch directories (/usr/lib/aarch64-linux-gnu, /usr/include/aarch64-linux-gnu)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Libraries and headers for the target only; programs (python3, sh) from the build machine.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# ctest (and try_run) start each target executable as `qemu-aarch64 EXE ...`, with no binfmt_misc
# registration. The program runs on the arm64 packages' own loader and C library
# (/lib/ld-linux-aarch64.so.1 and /lib/aarch64-linux-gnu, libc6:arm64, which OpenBLAS's
# package depends on) and libgomp1:arm64, not under `-L /usr/aarch64-linux-gnu`: there the
# cross package's loader (glibc 2.36-8cross1) was paired with libc6:arm64's libc.so.6
# (2.36-9+deb12u14), found first in the multiarch directory, and pthread_create looped in
# the loader's stack cache (test_api: 7 s under qemu with matched ones, not done in 10 min).
# Give -DCMAKE_CROSSCOMPILING_EMULATOR=... to use another emulator or an ARM machine's ssh.
if(NOT CMAKE_CROSSCOMPILING_EMULATOR)
  find_program(LINATTN_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static NO_CMAKE_FIND_ROOT_PATH)
  if(LINATTN_QEMU_AARCH64)
    set(CMAKE_CROSSCOMPILING_EMULATOR ${LINATTN_QEMU_AARCH64})
  endif()
endif()
