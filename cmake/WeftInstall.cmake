# What `cmake --install` puts under the prefix:
#
#   bin/weft                                   the tool
#   include/weft/...                           the public headers (and the generated version.h)
#   LIBDIR/libweft_*.a                         the static libraries
#   LIBDIR/cmake/weft/                         find_package(weft): weft::weft, weft::weft_<library>
#   LIBDIR/pkgconfig/weft.pc                   pkg-config --cflags --libs weft
#   share/doc/weft/                            README, docs/, examples/
#
# and, with WEFT_INSTALL_SERVICE (the Debian package: cmake/WeftPackaging.cmake),
# the weft-worker systemd unit and SYSCONFDIR/weft/worker.conf.
# The conformance suite (tests/conformance) stays a build-only library: its
# headers are test code, and `weft check` links it into the tool.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The installed libraries in link order: each before everything it depends
# on, as the single-pass linker needs for pkg-config's Libs. One list for the
# export, the umbrella target and weft.pc; a library missing here fails the
# configure below. Libraries whose sources are not there yet are skipped.
set(WEFT_INSTALL_LIBRARIES
  weft_serve weft_chat_template
  weft_runtime
  weft_model weft_tokenizer weft_sampling weft_gguf
  weft_rpc_server weft_rpc_client weft_rpc_protocol weft_rpc_transport
  weft_async weft_cpu weft_sched weft_alloc weft_backend weft_core)

# Every static library under src/ must be in the list: a new one would
# otherwise be left out of the package while the others name it.
function(weft_collect_static_libraries dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  set(found)
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "STATIC_LIBRARY")
      list(APPEND found ${t})
    endif()
  endforeach()
  foreach(d IN LISTS subdirs)
    weft_collect_static_libraries(${d} sub)
    list(APPEND found ${sub})
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()
weft_collect_static_libraries(${PROJECT_SOURCE_DIR}/src _weft_src_libraries)
foreach(lib IN LISTS _weft_src_libraries)
  if(NOT lib IN_LIST WEFT_INSTALL_LIBRARIES)
    message(FATAL_ERROR "src/ defines the library ${lib}, which is not in WEFT_INSTALL_LIBRARIES "
                        "(cmake/WeftInstall.cmake): add it there, before the libraries it links")
  endif()
endforeach()
set(_weft_libraries)
foreach(lib IN LISTS WEFT_INSTALL_LIBRARIES)
  if(TARGET ${lib})
    list(APPEND _weft_libraries ${lib})
  endif()
endforeach()

# weft::weft: everything a program needs. Static libraries, so linking all of
# them costs nothing for the parts a program does not call.
add_library(weft_umbrella INTERFACE)
set_target_properties(weft_umbrella PROPERTIES EXPORT_NAME weft)
target_link_libraries(weft_umbrella INTERFACE ${_weft_libraries})
add_library(weft::weft ALIAS weft_umbrella)

set(WEFT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
install(TARGETS ${_weft_libraries} weft_umbrella EXPORT weftTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS weft RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/weft DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(FILES ${WEFT_GENERATED_INCLUDE_DIR}/weft/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/weft)

install(EXPORT weftTargets NAMESPACE weft:: DESTINATION ${WEFT_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/weftConfig.cmake.in
  ${PROJECT_BINARY_DIR}/generated/weftConfig.cmake INSTALL_DESTINATION ${WEFT_INSTALL_CMAKEDIR})
# 0.x releases promise no compatibility across minor versions yet, but a
# program asking for 0.5 should still find a later 0.x rather than nothing.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/generated/weftConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/generated/weftConfig.cmake ${PROJECT_BINARY_DIR}/generated/weftConfigVersion.cmake
        DESTINATION ${WEFT_INSTALL_CMAKEDIR})

# weft.pc. The libraries are static only, so what they link (libcrypto,
# libxxhash, cpp-httplib, threads; nlohmann_json's headers) is needed by every program and goes in Requires and
# Libs, not in the .private fields that only `pkg-config --static` reads.
# The prefix is the one installed to (`cmake --install --prefix P`, or
# CMAKE_INSTALL_PREFIX), so the file is finished at install time: configure
# time fills in the rest and leaves @WEFT_PC_PREFIX@ for then.
list(TRANSFORM _weft_libraries PREPEND "-l" OUTPUT_VARIABLE _weft_pc_flags)
string(JOIN " " WEFT_PC_LIBS ${_weft_pc_flags})
set(WEFT_PC_REQUIRES "libssl libcrypto libxxhash cpp-httplib nlohmann_json")
set(WEFT_PC_PREFIX "@WEFT_PC_PREFIX@")
configure_file(${PROJECT_SOURCE_DIR}/cmake/weft.pc.in ${PROJECT_BINARY_DIR}/generated/weft.pc.in @ONLY)
install(CODE "
  set(WEFT_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  configure_file(\"${PROJECT_BINARY_DIR}/generated/weft.pc.in\" \"${PROJECT_BINARY_DIR}/generated/weft.pc\" @ONLY)
")
install(FILES ${PROJECT_BINARY_DIR}/generated/weft.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} FILES_MATCHING PATTERN "*.md")
install(FILES ${PROJECT_SOURCE_DIR}/examples/CMakeLists.txt ${PROJECT_SOURCE_DIR}/examples/generate.cpp
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

# The systemd unit for `weft worker` and its configuration. Off by default:
# they go to absolute paths (SYSCONFDIR is /etc for the prefix /usr), which
# `cmake --install --prefix` cannot relocate.
option(WEFT_INSTALL_SERVICE "Install the weft-worker systemd unit and SYSCONFDIR/weft/worker.conf (the Debian package)" OFF)
if(WEFT_INSTALL_SERVICE)
  set(WEFT_BINARY ${CMAKE_INSTALL_FULL_BINDIR}/weft)
  set(WEFT_CONF_DIR ${CMAKE_INSTALL_FULL_SYSCONFDIR}/weft)
  configure_file(${PROJECT_SOURCE_DIR}/packaging/weft-worker.service.in ${PROJECT_BINARY_DIR}/generated/weft-worker.service @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/generated/weft-worker.service DESTINATION lib/systemd/system)
  install(FILES ${PROJECT_SOURCE_DIR}/packaging/worker.conf DESTINATION ${WEFT_CONF_DIR})
endif()

# Everything the install rules need built: `make package` builds this rather
# than every test.
add_custom_target(weft_installables)
add_dependencies(weft_installables weft ${_weft_libraries})
