# The Debian package (CPack DEB). Made by `make package`, which configures a
# build tree of its own with what the package needs:
#
#   cmake -S . -B build/package -G Ninja -DCMAKE_BUILD_TYPE=Release \
#         -DCMAKE_INSTALL_PREFIX=/usr -DWEFT_INSTALL_SERVICE=ON
#   cmake --build build/package --target weft_installables
#   (cd build/package && cpack -G DEB)       # build/package/weft_VERSION_ARCH.deb
#
# Only such a tree (the service on, the prefix /usr) defines the package;
# other trees have no `package` target.
#
# One package: the tool, the worker service, and the headers, static
# libraries, CMake package and pkg-config file for building against weft.
if(NOT WEFT_INSTALL_SERVICE OR NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  return()
endif()

set(WEFT_PACKAGE_MAINTAINER "weft maintainers <maintainers@users.noreply.a-seed-8859e995.example>"
    CACHE STRING "Maintainer field of the Debian package")

set(CPACK_PACKAGE_NAME weft)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "run one LLM across many machines")
set(CPACK_PACKAGE_DESCRIPTION
  "weft runs a large language model split over several ordinary machines: a host\n\
builds the model's compute graph and a scheduler cuts it across the local CPU\n\
and remote workers reached over TCP. This package holds the weft tool (run,\n\
perplexity, quantize, worker, check, bench), the weft-worker systemd service,\n\
and the headers, static libraries, CMake package and pkg-config file for\n\
programs built on the weft library. It needs an x86-64 CPU with AVX2, FMA and\n\
F16C (Intel Haswell, AMD Excavator or later); AVX-512 is used when present.")
set(CPACK_PACKAGE_CONTACT "${WEFT_PACKAGE_MAINTAINER}")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
# The service's files install to absolute paths (/etc/weft): staged with
# DESTDIR, so the install-time prefix in weft.pc is the real one (/usr).
set(CPACK_SET_DESTDIR ON)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends from the binary's shared libraries (dpkg-shlibdeps): libc, libstdc++,
# libcrypto, libxxhash.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# What a program linking the static libraries also needs.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libssl-dev, libxxhash-dev, pkg-config, cmake")

set(_weft_deb_dir ${PROJECT_BINARY_DIR}/generated/debian)
foreach(script postinst prerm postrm)
  configure_file(${PROJECT_SOURCE_DIR}/packaging/debian/${script}.in ${_weft_deb_dir}/${script} @ONLY)
endforeach()
# dpkg keeps an administrator's edits of a conffile across upgrades.
file(WRITE ${_weft_deb_dir}/conffiles "${CMAKE_INSTALL_FULL_SYSCONFDIR}/weft/worker.conf\n")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${_weft_deb_dir}/postinst ${_weft_deb_dir}/prerm ${_weft_deb_dir}/postrm ${_weft_deb_dir}/conffiles)
# 0755 for the scripts, 0644 for conffiles, whatever the umask was.
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)

include(CPack)
