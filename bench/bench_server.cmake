# bench_server: inference server throughput (clients x batch size) next to direct nn_forward.
if(TARGET koma_nn)
  add_executable(bench_server ${CMAKE_CURRENT_LIST_DIR}/bench_server.c)
  target_link_libraries(bench_server PRIVATE koma_nn)
  set_target_properties(bench_server PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endif()
