# export: a run's games out as dlshogi hcpe/hcpe3 or YaneuraOu psv (data/fmt_file.c).
if(TARGET koma_data AND TARGET koma_engine)
  add_executable(export ${CMAKE_CURRENT_SOURCE_DIR}/export.c)
  target_link_libraries(export PRIVATE koma_config koma_data koma_engine)
  target_compile_definitions(export PRIVATE KOMA_VERSION_STRING="${PROJECT_VERSION}")
  set_target_properties(export PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tools)
endif()
