# import: CSA/KIF/USI game records into a run's koma.db + shards (data/record.c), for train --from-games.
if(TARGET koma_data AND TARGET koma_engine)
  add_executable(import ${CMAKE_CURRENT_SOURCE_DIR}/import.c)
  target_link_libraries(import PRIVATE koma_config koma_data koma_engine)
  target_compile_definitions(import PRIVATE KOMA_VERSION_STRING="${PROJECT_VERSION}")
  set_target_properties(import PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tools)
endif()
