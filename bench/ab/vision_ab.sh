#!/bin/sh
# vision_ab.sh BASE_COMMIT JOBS [N] [ROUNDS] [resize|passes]: BASE_COMMIT's vision transform
# (with "resize", its resize alone; with "passes", each resize pass alone) against this
# tree's build/release, in one process (vision_ab.c says how). JOBS: the jobs.bin that
# bench/py/vision_pipeline.py --keep DIR leaves in DIR. Works while BASE_COMMIT's vision.c and
# vision_resize*.c call the rest of the library as this tree's do (its vision_internal.h and
# features_internal.h are taken with them, so the two sides' internal structs may differ;
# its vision_png.c too, as struct gv_png changed in session 37).
set -eu
base=$1 jobs=$2 n=${3:-400} rounds=${4:-7} mode=${5:-transform}
root=$(git rev-parse --show-toplevel)
b=$root/build/release
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/features"
for f in vision.c vision_resize.c vision_resize_avx2.c vision_png.c vision_internal.h features_internal.h; do
	git -C "$root" show "$base:src/features/$f" >"$tmp/src/features/$f"
done
ren="-Dgv_resize_with=old_resize_with -Dgv_resize=old_resize -Dgv_resize_window=old_resize_window
-Dgv_resize_rows=old_resize_rows -Dgv_resize_rows_with=old_resize_rows_with -Dgv_hpass_rgb_avx2=old_hpass
-Dgv_vrow_avx2=old_vrow -Dgv_have_avx2=old_have_avx2 -Dgv_have_fma=old_have_fma
-Dgv_emit_row_f32_avx2=old_emit -Dgv_emit_row_f32_fma=old_emit_fma -Dgv_emit_f32_fma_exact=old_fma_exact
-Dgv_reverse_rgb=old_reverse -Dgv_hlayout_make_avx2=old_hlayout_make -Dgv_hlayout_free=old_hlayout_free -Dgv_apply=old_apply -Dgrist_vision_apply=old_vision_apply
-Dgv_png_open=old_png_open -Dgv_png_close=old_png_close -Dgv_png_read_region=old_png_read_region
-Dgv_png_begin_region=old_png_begin_region -Dgv_png_pull=old_png_pull
-Dgrist_vision_out_bytes=old_vision_out_bytes -Dgv_out_bytes=old_out_bytes -Dgv_out_plan_make=old_out_plan_make -Dgv_resize_rows_src=old_resize_rows_src -Dgf_transform_image=old_transform_image"
flags="-std=c11 -O3 -D_GNU_SOURCE -DNDEBUG -I$tmp/src -I$root/include -I$root/src -I$b"
# shellcheck disable=SC2086
cc $flags $ren -c "$tmp/src/features/vision.c" -o "$tmp/v.o"
# shellcheck disable=SC2086
cc $flags $ren -c "$tmp/src/features/vision_resize.c" -o "$tmp/r.o"
# shellcheck disable=SC2086
cc $flags $ren -mavx2 -c "$tmp/src/features/vision_resize_avx2.c" -o "$tmp/a.o"
# shellcheck disable=SC2086
cc $flags $ren -c "$tmp/src/features/vision_png.c" -o "$tmp/p.o"
cc -O2 -D_GNU_SOURCE -I"$root/include" -I"$root/src" -I"$b" "$root/bench/ab/vision_ab.c" "$tmp/v.o" "$tmp/r.o" \
	"$tmp/a.o" "$tmp/p.o" "$b/src/libgrist.a" -o "$tmp/vision_ab" -ljpeg -lspng -lxxhash -lpng -lm -lpthread -lz
"$tmp/vision_ab" "$jobs" "$n" "$rounds" "$mode"
