# bench_dist: MPI_Allreduce time of one gradient per net size (run it under mpirun; dist/).
if(TARGET koma_nn AND TARGET koma_dist)
  add_executable(bench_dist ${CMAKE_CURRENT_SOURCE_DIR}/bench_dist.c)
  target_link_libraries(bench_dist PRIVATE koma_nn koma_dist)
  set_target_properties(bench_dist PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endif()
