# koma_glob_tests(LIBS ...): every tests/<module>/test_*.c becomes a ctest
# program labelled "cpu"; a file named test_*_gpu.c is labelled "gpu" (and
# exits 77 without a device). Special cases (slow variants, arguments) are
# added with koma_add_test after this call.
function(koma_glob_tests)
  cmake_parse_arguments(G "" "" "LIBS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/test_*.c)
  foreach(src ${srcs})
    get_filename_component(name ${src} NAME_WE)
    set(label cpu)
    if(name MATCHES "_gpu$")
      set(label gpu)
    endif()
    koma_add_test(NAME ${name} SOURCES ${src} LIBS ${G_LIBS} LABELS ${label})
  endforeach()
endfunction()
