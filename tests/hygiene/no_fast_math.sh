#!/bin/sh
# Numerical hygiene (docs/design.md §7): no target of this build is compiled with value-changing
# float flags, and no CMake file of the project asks for them. Usage: no_fast_math.sh SRC BUILD
src=$1 build=$2
pat='-ffast-math|-ffinite-math-only|-Ofast|-funsafe-math-optimizations|-fno-signed-zeros|-freciprocal-math|-fassociative-math'
n=$(find "$build" -name flags.make | wc -l)
[ "$n" -gt 0 ] || { echo "FAIL: no flags.make under $build"; exit 1; }
bad=$(find "$build" -name flags.make -exec grep -lE -- "$pat" {} +)
bad2=$(grep -rlE --include=CMakeLists.txt --include='*.cmake' --include=CMakePresets.json -- "$pat" "$src" 2>/dev/null | grep -v "^$build")
if [ -n "$bad$bad2" ]; then
  echo "FAIL: value-changing float flags in: $bad $bad2"
  exit 1
fi
echo "ok: $n targets' flags and the project's CMake files have none of: $pat"
