#!/usr/bin/env bash
# On the GPU machine, from a kit (examples/cuda_kit.sh; copy this file into it): one window of
# the "many" loop, then how long convert -f pftrace and -f csv take on its database, and whether
# its kernels are in start order.
set -u
K=$(cd "$(dirname "$0")" && pwd)
cd /tmp
python3 "$K/train.py" --model many --log /tmp/m.log --seconds 60 > /tmp/m.out 2>&1 &
T=$!
for _ in $(seq 1 200); do grep -q ready /tmp/m.out && break; sleep 0.2; done
P=$(awk '/^ready/{print $2}' /tmp/m.out)
"$K/rocprof-attach" -p "$P" --kernel-trace -d /tmp/pq -o m --attach-duration-msec 10000 2>&1 | tail -2
kill $T; wait $T 2>/dev/null
ls -la /tmp/pq
python3 - <<'PY'
import sqlite3
c = sqlite3.connect("/tmp/pq/m_results.db")
print("kernels", c.execute("select count(*) from rocpd_kernel_dispatch").fetchone())
print("symbols", c.execute("select count(*), max(length(display_name)) from rocpd_info_kernel_symbol").fetchone())
print("out of start order", c.execute("select count(*) from (select start, lag(start) over (order by id) p from rocpd_kernel_dispatch) where start < p").fetchone())
print("streams", c.execute("select count(distinct stream_id), count(distinct queue_id), count(distinct tid) from rocpd_kernel_dispatch").fetchone())
PY
nproc; grep -m1 "model name" /proc/cpuinfo; df -h /tmp | tail -1
for t in 1 16; do
  /usr/bin/time -f "threads=$t: %e s wall %U s user %S s sys %M KB" env ROCPROF_ATTACH_THREADS=$t "$K/rocprof-attach" convert -i /tmp/pq/m_results.db -f pftrace -d /tmp/pq/c$t -o b --force 2>&1 | tail -1
done
/usr/bin/time -f "csv: %e s wall %U s user" "$K/rocprof-attach" convert -i /tmp/pq/m_results.db -f csv -d /tmp/pq/csv -o b --force 2>&1 | tail -1
ls -la /tmp/pq/c1
