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
