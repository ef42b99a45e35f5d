# How code whose own speed does not matter is compiled: the test programs
# and the weft tool (an argument adapter: its work runs in the libraries,
# which keep the tree's optimisation). Build time is most of `make test`
# (three trees on two cores), so such a target is compiled at -O1 in
# Release trees and -O0 in sanitized ones, where instrumented -O1 code
# generation takes twice as long as -O0 (a test file with ASan+UBSan: 32 s
# against 17 s of CPU) for no bug a sanitizer would miss.
function(weft_light_optimisation target)
  if(WEFT_SANITIZE)
    target_compile_options(${target} PRIVATE -O0)
  elseif(CMAKE_BUILD_TYPE STREQUAL "Release")
    target_compile_options(${target} PRIVATE -O1)
  endif()
endfunction()

# Test code under AddressSanitizer+UBSan: address checks only. UBSan's checks
# in a test file's own code (the float64 references, fixtures, loops over
# cases) cost a third of compiling it (8.6 s against 5.6 s of CPU) and could
# find only a bug of the test; the libraries under test keep every check.
function(weft_test_sanitizers target)
  if(WEFT_SANITIZE MATCHES "undefined")
    target_compile_options(${target} PRIVATE -fno-sanitize=undefined)
  endif()
endfunction()

# Libraries whose speed no test measures and no model step waits on (the
# server's JSON and HTTP code): -O0 in sanitized trees (a serve file under
# ASan+UBSan: 12.4 s of CPU at -O1, 8.6 s at -O0), the tree's own level
# elsewhere. Not the chat-template interpreter: its step-budget tests run it
# for millions of steps (7 s under ASan at -O1, 35 s at -O0).
function(weft_sanitized_light_optimisation target)
  if(WEFT_SANITIZE)
    target_compile_options(${target} PRIVATE -O0)
  endif()
endfunction()
