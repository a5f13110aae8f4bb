# genconfig: self-play settings measured on this machine, written as an INI
# for `selfplay --config` (tools/genconfig.c). Built as build/tools/genconfig,
# installed as koma-genconfig; its test drives the real binary and selfplay.
if(TARGET koma_selfplay AND TARGET koma_train)
  add_executable(genconfig ${CMAKE_CURRENT_SOURCE_DIR}/genconfig.c)
  target_link_libraries(genconfig PRIVATE koma_selfplay)
  set_target_properties(genconfig PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tools)
  if(TARGET selfplay)
    koma_add_test(NAME test_genconfig SOURCES ${CMAKE_SOURCE_DIR}/tests/tools/test_genconfig.c LIBS koma_selfplay
                  LABELS cpu ARGS $<TARGET_FILE:genconfig> $<TARGET_FILE:selfplay> TIMEOUT 300)
    add_dependencies(test_genconfig genconfig selfplay)
  endif()
endif()
