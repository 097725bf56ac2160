# FindScaLAPACK: ScaLAPACK built for Open MPI (Debian: libscalapack-openmpi-dev).
# Defines ScaLAPACK::ScaLAPACK.
find_library(ScaLAPACK_LIBRARY NAMES scalapack-openmpi scalapack)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(ScaLAPACK REQUIRED_VARS ScaLAPACK_LIBRARY)
if(ScaLAPACK_FOUND AND NOT TARGET ScaLAPACK::ScaLAPACK)
  add_library(ScaLAPACK::ScaLAPACK UNKNOWN IMPORTED)
  set_target_properties(ScaLAPACK::ScaLAPACK PROPERTIES IMPORTED_LOCATION "${ScaLAPACK_LIBRARY}")
endif()
mark_as_advanced(ScaLAPACK_LIBRARY)
