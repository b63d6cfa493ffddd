#!/usr/bin/env bash
# Pack what bench/cold-machine.sh needs into one folder, to copy to a machine that has no
# build tools (a GPU host, a drive under test): grist, grist-bench and dio_align from a
# release build, fio, every shared library they load except glibc's own, bench/py/cold.py
# and the run script. Then, there, as root: FOLDER/cold-machine.sh
# Usage: bench/cold-bundle.sh FOLDER [BUILD]   (BUILD: default build/release)
# FIO=path picks the fio binary (default: the one on PATH). Debian's fio loads the Ceph and
# Gluster libraries (hundreds of MB); one built from its source with ./configure
# --disable-rbd --disable-rados --disable-gfapi --disable-http --disable-pmem --disable-libnbd
# --disable-rdma --disable-numa keeps the folder near 25 MB.
set -euo pipefail
out=${1:?usage: bench/cold-bundle.sh FOLDER [BUILD]}
build=${2:-build/release}
src=$(cd "$(dirname "$0")" && pwd)
fio=${FIO:-$(command -v fio || true)}
[ -x "$fio" ] || { echo "cold-bundle: no fio (set FIO=path)" >&2; exit 1; }
bins=("$build/tools/grist" "$build/bench/grist-bench" "$build/bench/dio_align" "$fio")
for b in "${bins[@]}"; do
	[ -x "$b" ] || { echo "cold-bundle: $b is missing (build with: ninja -C $build)" >&2; exit 1; }
done
mkdir -p "$out/bin" "$out/lib"
cp "${bins[@]}" "$out/bin/"
# ldd one binary at a time: a static one (fio's --build-static) fails ldd and has nothing to add
libs=$(for b in "${bins[@]}"; do ldd "$b" 2>/dev/null || true; done)
if grep -q 'not found' <<<"$libs"; then
	echo "cold-bundle: libraries not found here:" >&2
	grep 'not found' <<<"$libs" >&2
	exit 1
fi
# glibc stays the host's: a newer one runs these binaries, and its pieces must match each other
awk '/=> \// {print $3}' <<<"$libs" | sort -u |
	{ grep -vE '/(libc|libm|libmvec|libresolv|libpthread|libdl|librt|ld-linux[^/]*)\.so' || true; } |
	xargs -r -I{} cp -L {} "$out/lib/"
cp "$src/py/cold.py" "$src/cold-machine.sh" "$out/"
chmod +x "$out/cold-machine.sh" "$out/cold.py"
echo "cold-bundle: $out ($(du -sh "$out" | cut -f1)); there, as root: $out/cold-machine.sh"
