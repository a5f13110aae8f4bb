# bench_mcts: search tree speed with a dummy network, and the fixed bench signature (mcts/).
if(TARGET koma_mcts)
  add_executable(bench_mcts ${CMAKE_CURRENT_SOURCE_DIR}/bench_mcts.c)
  target_link_libraries(bench_mcts PRIVATE koma_mcts)
  set_target_properties(bench_mcts PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endif()
