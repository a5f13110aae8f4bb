# bench_ranks: rank 0's commit rate of game messages, and net sends over the mailbox (mpirun -np 2).
if(TARGET koma_selfplay AND TARGET koma_dist)
  add_executable(bench_ranks ${CMAKE_CURRENT_SOURCE_DIR}/bench_ranks.c)
  target_link_libraries(bench_ranks PRIVATE koma_selfplay koma_data koma_dist)
  set_target_properties(bench_ranks PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endif()
