# bench_selfplay: self-play throughput (positions/s, evals/s, batch, busy) with a random net, no training (selfplay/).
if(TARGET koma_selfplay AND TARGET koma_train)
  add_executable(bench_selfplay ${CMAKE_CURRENT_SOURCE_DIR}/bench_selfplay.c)
  target_link_libraries(bench_selfplay PRIVATE koma_selfplay)
  set_target_properties(bench_selfplay PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endif()
