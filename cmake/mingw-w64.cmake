# mingw-w64.cmake - CMake toolchain: cross-compile Koma for 64-bit Windows with
# Debian's MinGW-w64 (posix threads variant: winpthreads), run tests under wine.
#
#   cmake -S . -B build-mingw -DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64.cmake \
#         -DKOMA_MINGW_PREFIX=$PWD/build-mingw/deps -DKOMA_BLAS=OFF -DKOMA_CUDA=OFF
#
# KOMA_MINGW_PREFIX (cache variable, or the environment variable of that name)
# is where tools/cross-windows.sh installed the cross-built SQLite, xxHash,
# cJSON and inih (include/, lib/, lib/pkgconfig/). find_package/find_library
# and pkg-config look there and in the MinGW sysroot only, never in /usr.
# Executables are linked statically (libgcc, winpthreads, the deps), so a test
# .exe runs under wine or on Windows without any DLL beside it.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)

set(KOMA_MINGW_TRIPLE x86_64-w64-mingw32)
find_program(CMAKE_C_COMPILER NAMES ${KOMA_MINGW_TRIPLE}-gcc-posix REQUIRED)
find_program(CMAKE_CXX_COMPILER NAMES ${KOMA_MINGW_TRIPLE}-g++-posix)
find_program(CMAKE_RC_COMPILER NAMES ${KOMA_MINGW_TRIPLE}-windres)
find_program(CMAKE_AR NAMES ${KOMA_MINGW_TRIPLE}-gcc-ar-posix ${KOMA_MINGW_TRIPLE}-ar)
find_program(CMAKE_RANLIB NAMES ${KOMA_MINGW_TRIPLE}-gcc-ranlib-posix ${KOMA_MINGW_TRIPLE}-ranlib)

if(NOT KOMA_MINGW_PREFIX AND DEFINED ENV{KOMA_MINGW_PREFIX})
  set(KOMA_MINGW_PREFIX "$ENV{KOMA_MINGW_PREFIX}")
endif()
set(KOMA_MINGW_PREFIX "${KOMA_MINGW_PREFIX}" CACHE PATH "Prefix of the cross-built dependencies")
# try_compile projects re-read this file: hand them the prefix too.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES KOMA_MINGW_PREFIX)

set(CMAKE_FIND_ROOT_PATH /usr/${KOMA_MINGW_TRIPLE})
if(KOMA_MINGW_PREFIX)
  list(APPEND CMAKE_FIND_ROOT_PATH "${KOMA_MINGW_PREFIX}")
  list(APPEND CMAKE_PREFIX_PATH "${KOMA_MINGW_PREFIX}")
endif()
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# Static archives first (libfoo.a before libfoo.dll.a).
set(CMAKE_FIND_LIBRARY_SUFFIXES .a .lib .dll.a)

# pkg-config sees the cross prefix only (never the build machine's .pc files).
if(KOMA_MINGW_PREFIX)
  set(ENV{PKG_CONFIG_LIBDIR} "${KOMA_MINGW_PREFIX}/lib/pkgconfig")
else()
  set(ENV{PKG_CONFIG_LIBDIR} "/usr/${KOMA_MINGW_TRIPLE}/lib/pkgconfig")
endif()
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")

set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")

# ctest runs each test .exe through wine (Debian: wine / wine64).
if(NOT CMAKE_CROSSCOMPILING_EMULATOR)
  find_program(KOMA_WINE NAMES wine64 wine)
  if(KOMA_WINE)
    set(CMAKE_CROSSCOMPILING_EMULATOR ${KOMA_WINE})
  endif()
endif()
