# bench_conv_lowp: one 3x3 convolution on the Winograd route (fp32, bf16) and
# oneDNN's (f32, bf16, int8), side by side (issue 47). oneDNN builds only.
if(TARGET koma_nn AND KOMA_HAVE_DNNL)
  add_executable(bench_conv_lowp ${CMAKE_CURRENT_LIST_DIR}/bench_conv_lowp.c)
  target_link_libraries(bench_conv_lowp PRIVATE koma_nn ${DNNL_LIBRARY} OpenMP::OpenMP_C)
  target_include_directories(bench_conv_lowp PRIVATE ${DNNL_INCLUDE_DIR})
endif()
