# onnx-export: a Koma net as an ONNX model (tools/onnx_export.c). Built as
# build/tools/onnx-export, installed as koma-onnx-export; tests/tools/test_onnx_export.c
# runs its output in ONNX Runtime against Koma's CPU backend.
if(TARGET koma_nn AND TARGET koma_data)
  add_executable(onnx-export ${CMAKE_CURRENT_SOURCE_DIR}/onnx_export.c)
  target_link_libraries(onnx-export PRIVATE koma_data koma_nn koma_compat)
  set_target_properties(onnx-export PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tools)
  include(GNUInstallDirs)
  install(PROGRAMS $<TARGET_FILE:onnx-export> DESTINATION ${CMAKE_INSTALL_BINDIR} RENAME koma-onnx-export)
endif()
