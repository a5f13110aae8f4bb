# report: one self-contained HTML page (inline SVG, and the board's script
# tools/report_board.js embedded as a C string) about a run, from its
# koma.db and its shards. Built as build/tools/report.
if(TARGET koma_match)
  set(_js ${CMAKE_CURRENT_SOURCE_DIR}/report_board.js)
  set(_js_h ${CMAKE_BINARY_DIR}/generated/report_board_js.h)
  add_custom_command(OUTPUT ${_js_h}
                     COMMAND ${CMAKE_COMMAND} -DIN=${_js} -DOUT=${_js_h} -DNAME=report_board_js
                             -P ${CMAKE_SOURCE_DIR}/cmake/embed_text.cmake
                     DEPENDS ${_js} ${CMAKE_SOURCE_DIR}/cmake/embed_text.cmake
                     COMMENT "Embedding report_board.js")
  add_executable(report ${CMAKE_CURRENT_SOURCE_DIR}/report.c ${CMAKE_CURRENT_SOURCE_DIR}/report_games.c ${_js_h})
  target_include_directories(report PRIVATE ${CMAKE_BINARY_DIR}/generated)
  target_link_libraries(report PRIVATE koma_match)
  set_target_properties(report PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tools)
endif()
