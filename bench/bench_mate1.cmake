# bench_mate1: ns per call of mate1_find (and the reference, mated test, encoding, rules status).
add_executable(bench_mate1 ${CMAKE_CURRENT_SOURCE_DIR}/bench_mate1.c)
target_link_libraries(bench_mate1 PRIVATE koma_engine)
set_target_properties(bench_mate1 PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
