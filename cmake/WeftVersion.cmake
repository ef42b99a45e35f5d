# The version facts of weft/version.h: the header, generated from
# include/weft/version.h.in with project(weft VERSION ...), and the library
# side (weft::version(), weft::git_commit()) compiled into weft_core.
#
# The commit is asked of git at configure time and again before every build
# (`git rev-parse`, a few milliseconds); the generated .cpp changes only when
# the commit does, so a new commit recompiles one file and relinks, nothing
# more. Builds from a tarball report "unknown" unless WEFT_GIT_COMMIT is set.
set(WEFT_GIT_COMMIT "" CACHE STRING "Commit reported by weft --version (empty: ask git; 'unknown' outside a checkout)")
find_package(Git QUIET)

set(WEFT_GENERATED_INCLUDE_DIR ${PROJECT_BINARY_DIR}/generated/include)
configure_file(${PROJECT_SOURCE_DIR}/include/weft/version.h.in ${WEFT_GENERATED_INCLUDE_DIR}/weft/version.h @ONLY)
target_include_directories(weft_core PUBLIC $<BUILD_INTERFACE:${WEFT_GENERATED_INCLUDE_DIR}>)

set(_weft_version_cpp ${PROJECT_BINARY_DIR}/generated/weft_version.cpp)
set(_weft_version_args
  -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
  -DTEMPLATE=${PROJECT_SOURCE_DIR}/src/core/version.cpp.in
  -DOUTPUT=${_weft_version_cpp}
  -DWEFT_VERSION=${PROJECT_VERSION}
  -DGIT_EXECUTABLE=${GIT_EXECUTABLE}
  -DWEFT_GIT_COMMIT=${WEFT_GIT_COMMIT})
# Once now, so the file exists for the first build.
execute_process(COMMAND ${CMAKE_COMMAND} ${_weft_version_args} -P ${PROJECT_SOURCE_DIR}/cmake/WeftGitCommit.cmake
                COMMAND_ERROR_IS_FATAL ANY)
target_sources(weft_core PRIVATE ${_weft_version_cpp})
if(GIT_EXECUTABLE AND NOT WEFT_GIT_COMMIT)
  # BYPRODUCTS: Ninja re-checks the file's time after the command (restat),
  # so an unchanged commit rebuilds nothing.
  add_custom_target(weft_git_commit
    COMMAND ${CMAKE_COMMAND} ${_weft_version_args} -P ${PROJECT_SOURCE_DIR}/cmake/WeftGitCommit.cmake
    BYPRODUCTS ${_weft_version_cpp}
    COMMENT "Checking the git commit for weft --version"
    VERBATIM)
  add_dependencies(weft_core weft_git_commit)
endif()
