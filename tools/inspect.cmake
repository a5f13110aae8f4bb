# inspect: a run's summary, a database, or one shard (data/ check and debugging).
if(TARGET koma_data AND TARGET koma_engine AND TARGET koma_match)
  add_executable(inspect ${CMAKE_CURRENT_SOURCE_DIR}/inspect.c)
  target_link_libraries(inspect PRIVATE koma_data koma_engine koma_match)
  set_target_properties(inspect PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tools)
endif()
