#!/usr/bin/env bash
# Run in the same image after build-in-cell.sh: copies the shared libraries the installed
# programs load that are not glibc, libstdc++ or libgcc_s (OpenBLAS and its Fortran runtime,
# SQLite) into /out/libs/lib, and records where each came from (carried.txt) and its Debian
# package and version (versions.txt).
set -euo pipefail
P=/out/prefix
rm -rf /out/libs && mkdir -p /out/libs/lib
: > /out/ldd.txt
for f in $(find $P/bin $P/libexec -type f -perm -u+x); do
  echo "== $f" >> /out/ldd.txt
  ldd "$f" >> /out/ldd.txt 2>&1 || true
done
# The libraries the binaries load that are not the C/C++ runtime (glibc, libstdc++, libgcc_s)
# nor the vdso: what a bare Ubuntu 24.04 may lack.
grep "=> /" /out/ldd.txt | awk '{print $1, $3}' | sort -u > /out/needed.txt
while read -r name path; do
  case "$name" in
    linux-vdso*|ld-linux*|libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libstdc++.so.*|libgcc_s.so.*) continue;;
  esac
  cp -L "$path" "/out/libs/lib/$name"
  echo "$name $path" >> /out/libs/carried.txt
done < /out/needed.txt
# openblas's own dependencies, resolved from the copy (libgfortran, libquadmath)
for l in /out/libs/lib/*; do ldd "$l"; done | grep "=> /" | awk '{print $1, $3}' | sort -u | while read -r name path; do
  case "$name" in
    linux-vdso*|ld-linux*|libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libstdc++.so.*|libgcc_s.so.*) continue;;
  esac
  [ -e "/out/libs/lib/$name" ] || { cp -L "$path" "/out/libs/lib/$name"; echo "$name $path" >> /out/libs/carried.txt; }
done
dpkg -S $(cut -d' ' -f2 /out/libs/carried.txt | xargs -n1 readlink -f) 2>/dev/null | sort -u > /out/libs/packages.txt || true
for p in $(cut -d: -f1 /out/libs/packages.txt | sort -u); do dpkg-query -W -f '${Package} ${Version}\n' $p; done >> /out/libs/versions.txt || true
cat /out/libs/carried.txt
