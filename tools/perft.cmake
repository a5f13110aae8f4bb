# perft: leaf counts of the legal move tree (engine/ check and benchmark).
add_executable(perft ${CMAKE_CURRENT_SOURCE_DIR}/perft.c)
target_link_libraries(perft PRIVATE koma_engine)
set_target_properties(perft PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tools)
