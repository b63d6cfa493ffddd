#!/usr/bin/env bash
# The cold comparison (bench/py/cold.py, disk target) on another machine's drive, from a
# folder made by bench/cold-bundle.sh, with nothing installed there but python3: it prints
# the drive's queue limits, finds a folder on a real drive that takes O_DIRECT, writes the
# two files, runs dio_align on them, fio alone at depths 32 and 128, then cold.py on 64 KiB
# and 1 MiB records at batch 16, 1 and 256. As root: BUNDLE/cold-machine.sh
# Environment: OUT (where the log and JSON go, default /tmp/out), PAIRS (default 6), BUDGET
# (seconds for everything, default 330: a cold.py still running then is killed, and its JSON
# is not written; the log keeps what it printed), CANDIDATES (folders to try).
# --settle 0: the 6 cases take about 2 minutes on a fast drive, and 6+ minutes
# with the wait; on a VM with free page reporting the order of the pairs rotates instead.
set -uo pipefail  # the exit below (no drive folder) passes through the tee
R=$(cd "$(dirname "$0")" && pwd)
export PATH="$R/bin:$PATH" LD_LIBRARY_PATH="$R/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
PAIRS=${PAIRS:-6}
BUDGET=${BUDGET:-330}   # seconds from the start: no cold.py run begins past it
t0=$(date +%s)
log() { echo "[$(( $(date +%s) - t0 ))s] $*"; }

{
log "== machine"
uname -r; nproc; grep -m1 "model name" /proc/cpuinfo; free -g | head -2
cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null
[ -d /sys/module/page_reporting ] && echo "free page reporting: yes" || echo "free page reporting: no"
lsblk -o NAME,SIZE,ROTA,TYPE,MODEL,TRAN,MOUNTPOINTS 2>/dev/null || cat /proc/partitions
for b in /sys/block/*; do
	n=${b##*/}; case $n in loop*|ram*) continue;; esac
	echo "$n: model=$(cat $b/device/model 2>/dev/null | xargs) dma_alignment=$(cat $b/queue/dma_alignment 2>/dev/null)" \
		"lbs=$(cat $b/queue/logical_block_size) pbs=$(cat $b/queue/physical_block_size)" \
		"max_sectors_kb=$(cat $b/queue/max_sectors_kb) nr_requests=$(cat $b/queue/nr_requests)" \
		"rotational=$(cat $b/queue/rotational) sched=$(cat $b/queue/scheduler 2>/dev/null)" \
		"max_segments=$(cat $b/queue/max_segments 2>/dev/null)"
	# a virtio disk without indirect descriptors spends a ring entry per segment (docs/tuning.md,
	# "Huge-page read arenas"): feature bit 28
	v=$(readlink -f $b/device 2>/dev/null)
	if [ -r "$v/features" ]; then f=$(cat "$v/features"); echo "$n: virtio indirect descriptors=${f:28:1}"; fi
done
fio --version; grist --help >/dev/null 2>&1; echo "grist runs: $?"

log "== a folder on a real drive that takes O_DIRECT"
D=
for c in ${CANDIDATES:-/var/tmp /root /tmp $PWD}; do
	mkdir -p "$c/grist-cold" 2>/dev/null || continue
	fs=$(stat -f -c %T "$c/grist-cold"); avail=$(df -Pk "$c/grist-cold" | awk 'NR==2{print $4}')
	if dd if=/dev/zero of="$c/grist-cold/probe" bs=1M count=4 oflag=direct status=none 2>/dev/null; then ok=yes; else ok=no; fi
	rm -f "$c/grist-cold/probe"
	echo "$c: fs=$fs avail_kib=$avail o_direct=$ok; $(df -P "$c" | awk 'NR==2{print $1}')"
	if [ -z "$D" ] && [ "$ok" = yes ] && [ "$fs" != tmpfs ] && [ "$avail" -gt 4000000 ]; then D="$c/grist-cold"; fi
done
[ -n "$D" ] || { echo "no O_DIRECT-capable disk folder found"; exit 1; }
echo "using $D"; mount | grep -E " $(df -P "$D" | awk 'NR==2{print $6}') " | head -2

log "== data files (cold.py --prepare: its own names, written once)"
mapfile -t files < <(python3 "$R/cold.py" --prepare --grist-bench "$R/bin/grist-bench" --dir "$D" --records 64k,1m)
[ ${#files[@]} -eq 2 ] || { echo "cold.py --prepare failed"; exit 1; }
ls -l "${files[@]}"
sync

log "== dio_align (can a record's values land in place on this drive?)"
for f in "${files[@]}"; do dio_align "$f" 2>&1 | tail -n 12; done

log "== the drive alone: fio randread, O_DIRECT, io_uring, 64k aligned, 3 s each"
f64=${files[0]}
for qd in 32 128; do
	echo 3 > /proc/sys/vm/drop_caches
	fio --name=probe --readonly --filename="$f64" --ioengine=io_uring --direct=1 --rw=randread --bs=64k \
		--iodepth=$qd --runtime=3 --time_based --norandommap --randrepeat=0 --output-format=json \
		| python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]["read"]; print("qd %s: %.2f GB/s, %.0f IOPS, clat mean %.0f us" % (sys.argv[1], j["bw_bytes"]/1e9, j["iops"], j["clat_ns"]["mean"]/1e3))' $qd
done

log "== cold.py, disk target, $PAIRS pairs, settle 0"
left() { echo $(( BUDGET - ($(date +%s) - t0) )); }
for spec in "64k 16,1,256" "1m 16,1,256"; do
	set -- $spec
	l=$(left); [ "$l" -gt 30 ] || { log "out of time before $1"; break; }
	timeout "$l" python3 -u "$R/cold.py" --grist "$R/bin/grist" --grist-bench "$R/bin/grist-bench" --dir "$D" \
		--records "$1" --batch-sizes "$2" --targets disk --pairs "$PAIRS" --settle 0 --json "$OUT/cold-$1.json"
	log "cold.py $1 exit $?"
done
log "done"
} 2>&1 | tee "$OUT/log.txt"
