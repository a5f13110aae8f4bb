#!/bin/sh
# cross-windows.sh - cross-compile Koma for 64-bit Windows on Debian with
# MinGW-w64 (posix threads: x86_64-w64-mingw32-gcc-posix) and CMake.
#
#   tools/cross-windows.sh [BUILD_DIR]          (default: build-mingw)
#
# 1. installs the cross compiler, dpkg-dev and tcl (SQLite's amalgamation
#    generator) from Debian packages when missing (apt-get, through sudo when
#    not root);
# 2. fetches Debian's SOURCE packages of the deps Debian does not ship for
#    MinGW (sqlite3, xxhash, cjson, libinih) with `apt-get source` - adding a
#    deb-src entry for the configured Debian mirror under
#    /etc/apt/sources.list.d/koma-deb-src.sources when there is none - and
#    builds them as static libraries (+ .pc files) into BUILD_DIR/deps;
#    when the configured suite's source is not on the mirror, it retries the
#    suites in $KOMA_DEBSRC_FALLBACK_SUITES (default: "trixie testing
#    unstable") through a private apt configuration under BUILD_DIR (the
#    system's apt setup is untouched);
# 3. configures Koma with cmake/mingw-w64.cmake (CPU backend, portable GEMM:
#    -DKOMA_BLAS=OFF -DKOMA_CUDA=OFF, no -march=native, warnings as errors)
#    and builds everything, tests included.
# Nothing is written into the source tree. Re-running reuses BUILD_DIR/deps.
# Environment: KOMA_JOBS (parallel jobs, default 2), KOMA_WERROR (ON).
set -eu
cd "$(dirname "$0")/.."
SRC=$(pwd)
B=${1:-build-mingw}
case "$B" in /*) ;; *) B="$SRC/$B" ;; esac
JOBS=${KOMA_JOBS:-2}
TRIPLE=x86_64-w64-mingw32
CC="$TRIPLE-gcc-posix"
AR="$TRIPLE-gcc-ar-posix"
DEPS_SRC="$B/deps-src"
PREFIX="$B/deps"
FALLBACK_SUITES=${KOMA_DEBSRC_FALLBACK_SUITES:-trixie testing unstable}

say() { echo "cross-windows: $*"; }
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"

# ---- 1. build tools ------------------------------------------------------------
need_pkgs() {
  missing=""
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
  done
  if [ -n "$missing" ]; then
    say "installing:$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
  fi
}
need_pkgs gcc-mingw-w64-x86-64-posix mingw-w64-x86-64-dev binutils-mingw-w64-x86-64 \
  cmake make pkg-config dpkg-dev tcl xz-utils gcc libc6-dev

# ---- 2. Debian source packages ---------------------------------------------------
# The first Debian mirror and suite apt is configured with ("deb" entries).
debian_mirror() {
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk '/^URIs:/ && $2 ~ /debian/ && $2 !~ /security/ { print $2; exit }' "$f"
  done | head -n1
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\// && $i ~ /debian/ && $i !~ /security/) { print $i; exit } }' "$f"
  done | head -n1
}

ensure_deb_src() {
  if apt-cache showsrc sqlite3 2>/dev/null | grep -q '^Package:'; then return 0; fi
  out=/etc/apt/sources.list.d/koma-deb-src.sources
  say "no deb-src entries: writing $out"
  tmp=$(mktemp)
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && [ "$f" != "$out" ] || continue
    grep -q '^URIs:.*debian' "$f" || continue
    # deb822: same stanzas, source indexes only.
    sed -e 's/^Types:.*/Types: deb-src/' "$f" >>"$tmp"
    echo >>"$tmp"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    # one-line format: "deb [opts] URI suite comps" -> deb822 stanza
    awk '$1 == "deb" && /debian/ {
           i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
           printf "Types: deb-src\nURIs: %s\nSuites: %s\nComponents:", $i, $(i+1)
           for (j = i + 2; j <= NF; j++) printf " %s", $j
           printf "\n\n" }' "$f" >>"$tmp"
  done
  $SUDO install -m 0644 "$tmp" "$out"
  rm -f "$tmp"
  $SUDO apt-get update -qq
}

# apt-get source PKG into DEPS_SRC/PKG (one unpacked, patched tree).
fetch_source() {
  pkg=$1
  [ -f "$DEPS_SRC/$pkg/.done" ] && return 0
  rm -rf "$DEPS_SRC/$pkg"
  mkdir -p "$DEPS_SRC/$pkg"
  if (cd "$DEPS_SRC/$pkg" && apt-get source -qq "$pkg" >source.log 2>&1); then
    :
  else
    mirror=$(debian_mirror)
    [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
    ok=""
    for suite in $FALLBACK_SUITES; do
      say "apt-get source $pkg failed (see $DEPS_SRC/$pkg/source.log); trying $suite from $mirror"
      apt_dir="$B/apt-fallback/$suite"
      mkdir -p "$apt_dir/lists/partial" "$apt_dir/parts"
      echo "deb-src $mirror $suite main" >"$apt_dir/sources.list"
      A="-o Dir::Etc::SourceList=$apt_dir/sources.list -o Dir::Etc::SourceParts=$apt_dir/parts -o Dir::State::Lists=$apt_dir/lists"
      [ "$(id -u)" -eq 0 ] && A="$A -o APT::Sandbox::User=root"
      [ -f "$apt_dir/lists/.updated" ] || { apt-get $A update -qq && touch "$apt_dir/lists/.updated"; } || continue
      rm -rf "$DEPS_SRC/$pkg"
      mkdir -p "$DEPS_SRC/$pkg"
      if (cd "$DEPS_SRC/$pkg" && apt-get $A source -qq "$pkg" >source.log 2>&1); then
        ok=1
        break
      fi
    done
    if [ -z "$ok" ]; then
      cat "$DEPS_SRC/$pkg/source.log" >&2
      say "cannot fetch the Debian source of $pkg"
      exit 1
    fi
  fi
  touch "$DEPS_SRC/$pkg/.done"
}

srcdir() { find "$DEPS_SRC/$1" -mindepth 1 -maxdepth 1 -type d | head -n1; }
version_of() { basename "$(srcdir "$1")" | sed 's/^[^-]*-//'; }

write_pc() { # name version libs cflags description
  cat >"$PREFIX/lib/pkgconfig/$1.pc" <<EOF
prefix=$PREFIX
includedir=\${prefix}/include
libdir=\${prefix}/lib

Name: $1
Description: $5 (cross-built for $TRIPLE by tools/cross-windows.sh)
Version: $2
Libs: -L\${libdir} $3
Cflags: -I\${includedir} $4
EOF
}

build_deps() {
  [ -f "$PREFIX/.done" ] && { say "deps: reusing $PREFIX"; return 0; }
  ensure_deb_src
  for p in sqlite3 xxhash cjson libinih; do fetch_source "$p"; done
  rm -rf "$PREFIX"
  mkdir -p "$PREFIX/include/cjson" "$PREFIX/lib/pkgconfig" "$B/deps-obj"
  O="$B/deps-obj"
  CFLAGS="-O2 -g0"

  # SQLite: the amalgamation (sqlite3.c) is generated on the build machine
  # (lemon, mkkeywordhash, tclsh); it is the same C file for every target.
  s=$(srcdir sqlite3)
  if [ ! -f "$s/bld-native/sqlite3.c" ]; then
    say "sqlite3: generating the amalgamation"
    mkdir -p "$s/bld-native"
    (cd "$s/bld-native" && ../configure --disable-tcl >configure.log 2>&1 && make -j"$JOBS" sqlite3.c >make.log 2>&1) || {
      say "sqlite3 amalgamation failed: see $s/bld-native/*.log"; exit 1; }
  fi
  say "sqlite3: compiling for $TRIPLE"
  # The compile-time options of Debian's own libsqlite3 (debian/rules).
  $CC $CFLAGS -fno-strict-aliasing $(sed -n '/^export CFLAGS += -O2/,/^$/p' "$s/debian/rules" |
    grep -o -- '-DSQLITE_[A-Z0-9_]*\(=[0-9]*\)\?' | tr '\n' ' ') \
    -c "$s/bld-native/sqlite3.c" -o "$O/sqlite3.o"
  $AR rcs "$PREFIX/lib/libsqlite3.a" "$O/sqlite3.o"
  cp "$s/bld-native/sqlite3.h" "$s/bld-native/sqlite3ext.h" "$PREFIX/include/"
  write_pc sqlite3 "$(cat "$s/VERSION")" "-lsqlite3" "" "SQL database engine"

  s=$(srcdir xxhash)
  say "xxhash: compiling"
  $CC $CFLAGS -c "$s/xxhash.c" -o "$O/xxhash.o"
  $AR rcs "$PREFIX/lib/libxxhash.a" "$O/xxhash.o"
  cp "$s/xxhash.h" "$s/xxh3.h" "$PREFIX/include/"
  write_pc libxxhash "$(version_of xxhash)" "-lxxhash" "" "extremely fast hash algorithm"

  # cJSON: static use; CJSON_HIDE_SYMBOLS drops __declspec(dllexport/dllimport).
  s=$(srcdir cjson)
  say "cjson: compiling"
  $CC $CFLAGS -DCJSON_HIDE_SYMBOLS -c "$s/cJSON.c" -o "$O/cJSON.o"
  $AR rcs "$PREFIX/lib/libcjson.a" "$O/cJSON.o"
  cp "$s/cJSON.h" "$PREFIX/include/cjson/"
  write_pc libcjson "$(version_of cjson)" "-lcjson" "-I\${includedir}/cjson -DCJSON_HIDE_SYMBOLS" "Ultralightweight JSON parser in ANSI C"

  # inih: ini.h defaults, the same handler signature as Debian's libinih-dev.
  s=$(srcdir libinih)
  say "inih: compiling"
  $CC $CFLAGS -c "$s/ini.c" -o "$O/ini.o"
  $AR rcs "$PREFIX/lib/libinih.a" "$O/ini.o"
  cp "$s/ini.h" "$PREFIX/include/"
  write_pc inih "$(version_of libinih)" "-linih" "" "simple .INI file parser"

  touch "$PREFIX/.done"
}

build_deps

# ---- 3. Koma ----------------------------------------------------------------------
say "configuring $B"
cmake -S "$SRC" -B "$B" \
  -DCMAKE_TOOLCHAIN_FILE="$SRC/cmake/mingw-w64.cmake" \
  -DKOMA_MINGW_PREFIX="$PREFIX" \
  -DCMAKE_BUILD_TYPE=Release \
  -DKOMA_BLAS=OFF -DKOMA_CUDA=OFF -DKOMA_NATIVE=OFF \
  -DKOMA_WERROR="${KOMA_WERROR:-ON}"
say "building"
cmake --build "$B" -j"$JOBS"
say "done: Windows executables under $B"
