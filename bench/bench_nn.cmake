# bench_nn: CPU backend speed (inference by batch, training, conv vs sgemm).
if(TARGET koma_nn)
  add_executable(bench_nn ${CMAKE_CURRENT_LIST_DIR}/bench_nn.c)
  target_link_libraries(bench_nn PRIVATE koma_nn)
endif()
