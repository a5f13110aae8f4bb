# ship-net: a run's model -> the net that ships (weights only, koma.shipped.* metadata); maintenance, not installed.
if(TARGET koma_nn)
  add_executable(ship-net ${CMAKE_CURRENT_SOURCE_DIR}/ship_net.c)
  target_link_libraries(ship-net PRIVATE koma_nn koma_compat)
  set_target_properties(ship-net PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tools)
endif()
