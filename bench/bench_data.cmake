# bench_data: a seeded generator of dlshogi hcpe files (random legal games) for the data benchmark (bench_data.sh).
if(TARGET koma_data)
  add_executable(bench_data ${CMAKE_CURRENT_SOURCE_DIR}/bench_data.c)
  target_link_libraries(bench_data PRIVATE koma_data koma_engine ${MATH_LIB})
  set_target_properties(bench_data PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endif()
