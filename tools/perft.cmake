# perft: leaf counts of the legal move tree (engine/ check and benchmark).
add_executable(perft ${CMAKE_CURRENT_SOURCE_DIR}/perft.c)
target_link_libraries(perft PRIVATE koma_engine)
set_target_properties(perft PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tools)

# perft_portable, perft_sse2: the same tool on the other bitboard
# representations (the engine libraries tests/engine builds), to compare
# their speed in one build. tests/ is configured after tools/, hence the
# call deferred to the end of the top-level CMakeLists.txt.
function(koma_perft_variants)
  foreach(variant portable sse2)
    if(TARGET koma_engine_${variant})
      add_executable(perft_${variant} ${CMAKE_SOURCE_DIR}/tools/perft.c)
      target_link_libraries(perft_${variant} PRIVATE koma_engine_${variant})
      set_target_properties(perft_${variant} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tools)
    endif()
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL koma_perft_variants)
