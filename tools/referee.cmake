# koma_referee: selfplay/referee.c (the match referee, Elo, the ladder, match
# games in koma.db) as a small library for usi-match, report and their tests,
# which need no network or search. koma_selfplay compiles the same file for
# the in-loop evaluation (selfplay/eval.c); no program links both.
if(TARGET koma_engine AND TARGET koma_data AND NOT TARGET koma_referee)
  add_library(koma_referee STATIC ${CMAKE_SOURCE_DIR}/selfplay/referee.c)
  target_include_directories(koma_referee PUBLIC ${CMAKE_SOURCE_DIR})
  target_link_libraries(koma_referee PUBLIC koma_engine koma_data SQLite::SQLite3 ${MATH_LIB})
endif()
