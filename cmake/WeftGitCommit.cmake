# Writes OUTPUT from TEMPLATE (src/core/version.cpp.in) with WEFT_VERSION and
# WEFT_GIT_COMMIT. Run by cmake/WeftVersion.cmake at configure time and, as
# `cmake -P`, before every build; configure_file leaves OUTPUT untouched when
# its text is unchanged, so only a new commit recompiles it.
#
# Inputs: SOURCE_DIR, TEMPLATE, OUTPUT, WEFT_VERSION, GIT_EXECUTABLE (may be
# empty), WEFT_GIT_COMMIT (non-empty: used as given, git is not asked).
if(NOT WEFT_GIT_COMMIT)
  set(WEFT_GIT_COMMIT unknown)
  if(GIT_EXECUTABLE)
    execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse --show-toplevel --short HEAD
                    WORKING_DIRECTORY "${SOURCE_DIR}"
                    RESULT_VARIABLE git_status OUTPUT_VARIABLE git_out ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(git_status EQUAL 0)
      string(REPLACE "\n" ";" git_out "${git_out}")
      list(GET git_out 0 git_top)
      list(GET git_out 1 git_commit)
      # Only this project's own checkout: a source tarball unpacked inside
      # some other repository must not report that repository's commit.
      file(REAL_PATH "${git_top}" git_top)
      file(REAL_PATH "${SOURCE_DIR}" source_real)
      if(git_top STREQUAL source_real)
        set(WEFT_GIT_COMMIT "${git_commit}")
      endif()
    endif()
  endif()
endif()
configure_file("${TEMPLATE}" "${OUTPUT}" @ONLY)
