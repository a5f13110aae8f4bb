# usi-match: a match between two USI engines judged by Koma's referee, with
# Elo, CSA records and the run database. Built as build/tools/usi-match.
if(TARGET koma_match)
  add_executable(usi-match ${CMAKE_CURRENT_SOURCE_DIR}/usi_match.c)
  target_link_libraries(usi-match PRIVATE koma_match koma_config)
  set_target_properties(usi-match PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tools)
endif()
