# bench_train: trainer speed (samples/s of whole steps, gather vs train step) on a scratch run (train/).
if(TARGET koma_train)
  add_executable(bench_train ${CMAKE_CURRENT_SOURCE_DIR}/bench_train.c)
  target_link_libraries(bench_train PRIVATE koma_train)
  set_target_properties(bench_train PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endif()
