# embed_text.cmake - a text file as a C string: cmake -DIN=FILE -DOUT=HEADER -DNAME=IDENT -P embed_text.cmake
# writes `static const char NAME[] = "...";` (one literal per line; backslashes and quotes escaped),
# rewriting OUT only when its text changes. tools/report.cmake embeds report_board.js this way.
file(READ "${IN}" text)
string(REPLACE "\\" "\\\\" text "${text}")
string(REPLACE "\"" "\\\"" text "${text}")
string(REPLACE "\t" "\\t" text "${text}")
string(REPLACE "\r" "" text "${text}")
string(REGEX REPLACE "\n" "\\\\n\"\n\"" text "${text}")
set(body "/* generated from ${IN} by cmake/embed_text.cmake: do not edit */\nstatic const char ${NAME}[] =\n\"${text}\";\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
  if(old STREQUAL body)
    return()
  endif()
endif()
file(WRITE "${OUT}" "${body}")
