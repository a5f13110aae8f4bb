# bench_nn_gpu: CUDA backend speed (inference by batch vs tensor-core peak, training).
# Built only with the CUDA backend (KOMA_HAVE_CUDA); see docs/BENCHMARKS.md.
if(TARGET koma_nn AND KOMA_HAVE_CUDA)
  add_executable(bench_nn_gpu ${CMAKE_CURRENT_LIST_DIR}/bench_nn_gpu.c)
  target_link_libraries(bench_nn_gpu PRIVATE koma_nn)
  set_target_properties(bench_nn_gpu PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endif()
