# loop-summary: the figures of a selfplay loop from its run (koma.db, log), for
# tools/gpu-checks.sh's `loop` stage; maintenance, not installed.
if(TARGET koma_data)
  add_executable(loop-summary ${CMAKE_CURRENT_SOURCE_DIR}/loop_summary.c)
  target_link_libraries(loop-summary PRIVATE koma_data koma_compat)
  set_target_properties(loop-summary PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tools)
endif()
