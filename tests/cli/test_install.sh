#!/usr/bin/env bash
# Installs the built tree into a temporary prefix, then builds and runs a
# consumer program against it twice: through find_package(tidemark) and
# through pkg-config.  Checks the installed files users rely on.
. "${BASH_SOURCE[0]%/*}/lib.sh" TDM_BINARY_DIR TDM_SOURCE_DIR
set -e
skip_in_sanitizer_build
prefix=$work/prefix

cmake --install "$TDM_BINARY_DIR" --prefix "$prefix" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; exit 1; }
libdir=$(ls -d "$prefix"/lib*/ | head -n1); libdir=${libdir%/}
for f in "$prefix/include/tidemark.h" "$prefix/bin/tidemark" "$libdir/libtidemark.so" \
         "$libdir/libtidemark.a" "$libdir/pkgconfig/tidemark.pc" \
         "$libdir/cmake/tidemark/tidemarkConfig.cmake" "$prefix/include/tidemark_reader.h" \
         "$libdir/libtidemark_reader.so" "$prefix/share/tidemark/python/tidemark_snapshot.py" \
         "$prefix/share/tidemark/python/pytest_tidemark.py"; do
  [ -e "$f" ] || { echo "FAIL: $f was not installed"; exit 1; }
done
# The private interface between the library and the tools stays out.
[ -e "$prefix/include/tidemark_private.h" ] &&
  { echo "FAIL: the private header tidemark_private.h was installed"; exit 1; }

# find_package(tidemark) -> tidemark::tidemark
cmake -S "$TDM_SOURCE_DIR/tests/consumer" -B "$work/cm" -DCMAKE_PREFIX_PATH="$prefix" \
  >"$work/cm.log" 2>&1 || { cat "$work/cm.log"; exit 1; }
cmake --build "$work/cm" >"$work/cmb.log" 2>&1 || { cat "$work/cmb.log"; exit 1; }
LD_LIBRARY_PATH="$libdir" "$work/cm/consumer" "$work/c1.tdm" | grep -q "consumer ok" ||
  { echo "FAIL: find_package consumer did not run"; exit 1; }
[ -s "$work/c1.tdm" ] || { echo "FAIL: consumer wrote no snapshot"; exit 1; }

# pkg-config
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -o "$work/pc" "$TDM_SOURCE_DIR/tests/consumer/consumer.c" $(pkg-config --cflags --libs tidemark)
LD_LIBRARY_PATH="$libdir" "$work/pc" | grep -q "consumer ok" ||
  { echo "FAIL: pkg-config consumer did not run"; exit 1; }

# the installed tool reads what the installed library wrote
"$prefix/bin/tidemark" summary "$work/c1.tdm" >/dev/null ||
  { echo "FAIL: installed tidemark cannot read the consumer's snapshot"; exit 1; }
# and so does the installed Python reader, through the installed library
PYTHONPATH="$prefix/share/tidemark/python" TIDEMARK_READER_LIB="$libdir" TIDEMARK_LIB="$libdir" \
  python3 -c 'import sys, tidemark; s = tidemark.load(sys.argv[1]); assert s.info["event_count"] > 0, s' \
  "$work/c1.tdm" || { echo "FAIL: the installed tidemark.load cannot read the consumer's snapshot"; exit 1; }
finish "install"
