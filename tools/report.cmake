# report: one self-contained HTML page (inline SVG) about a run, from its
# koma.db. Built as build/tools/report.
if(TARGET koma_match)
  add_executable(report ${CMAKE_CURRENT_SOURCE_DIR}/report.c)
  target_link_libraries(report PRIVATE koma_match)
  set_target_properties(report PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tools)
endif()
