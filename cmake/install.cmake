# What `cmake --install` (and `make install PREFIX=...`) puts where, and the
# Debian package built from it (`cpack -G DEB` in the build folder):
#   bin/clinfer (finding lib/libclinfer.so.0 beside it: RPATH $ORIGIN/../lib),
#   bin/clinfer-tools (the commands `clinfer` hands over; static library),
#   lib/libclinfer.so.0.1.0 (SONAME libclinfer.so.0),
#   lib/libclinfer-pull.so.0.1.0 (the optional part pull/: fetching
#   catalogue models; libcurl, libzip, libcrypto),
#   include/clinfer.h, include/clinfer_pull.h,
#   lib/pkgconfig/clinfer.pc,
#   lib/cmake/clinfer/ (find_package(clinfer): the target clinfer::clinfer),
#   share/doc/clinfer/copyright (the MIT license and the third-party
#   notices, in Debian's machine-readable format: cmake/copyright).
include(CMakePackageConfigHelpers)

set_target_properties(clinfer PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
install(TARGETS clinfer clinfer_tools RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS clinfer_shared EXPORT clinferTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set_target_properties(clinfer_pull PROPERTIES INSTALL_RPATH "$ORIGIN")
install(TARGETS clinfer_pull LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${CMAKE_SOURCE_DIR}/include/clinfer.h ${CMAKE_SOURCE_DIR}/include/clinfer_pull.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# where Debian policy wants it (/usr/share/doc/<package>/copyright), under any prefix
install(FILES ${CMAKE_SOURCE_DIR}/cmake/copyright DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/clinfer)

# clinfer.pc is written at install time, for the prefix installed into
# (--prefix, PREFIX=, /usr in the .deb); an unpacked tree is used with
# `pkg-config --define-prefix`. Outside /usr and /usr/local (which the
# loader searches) its Libs carry an rpath to the prefix's lib, so that a
# program built with `pkg-config --libs clinfer` runs without
# LD_LIBRARY_PATH.
install(CODE "if(CMAKE_INSTALL_PREFIX MATCHES \"^/usr(/local)?/?$\")
  set(CLINFER_PC_RPATH \"\")
else()
  set(CLINFER_PC_RPATH \" -Wl,-rpath,\\\${libdir}\")
endif()
set(CMAKE_INSTALL_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
set(CMAKE_INSTALL_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
set(PROJECT_VERSION ${PROJECT_VERSION})
configure_file(\"${CMAKE_SOURCE_DIR}/cmake/clinfer.pc.in\" \"${CMAKE_BINARY_DIR}/clinfer.pc\" @ONLY)")
install(FILES ${CMAKE_BINARY_DIR}/clinfer.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

set(CLINFER_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/clinfer)
install(EXPORT clinferTargets NAMESPACE clinfer:: DESTINATION ${CLINFER_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/clinferConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/clinferConfig.cmake INSTALL_DESTINATION ${CLINFER_CMAKE_DIR})
# 0.x: a minor version may break the API, so only the same minor is compatible.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/clinferConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/clinferConfig.cmake ${CMAKE_BINARY_DIR}/clinferConfigVersion.cmake
        DESTINATION ${CLINFER_CMAKE_DIR})

# The .deb: run-time dependencies are what dpkg-shlibdeps finds the binaries
# linked with (OpenCL loader, PCRE2, CLBlast and OpenBLAS when built with
# them); an OpenCL driver (ICD) is recommended, not required, since any
# vendor's will do.
set(CPACK_PACKAGE_NAME clinfer)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "portable LLM inference engine on OpenCL: command, library and header")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "clinfer developers <clinfer@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "pocl-opencl-icd | opencl-icd")
set(CPACK_RESOURCE_FILE_LICENSE ${CMAKE_SOURCE_DIR}/LICENSE) # MIT; the .deb's is share/doc/clinfer/copyright
set(CPACK_GENERATOR DEB)
include(CPack)
