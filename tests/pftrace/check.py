#!/usr/bin/env python3
"""Validates a .pftrace written by `rocprof-attach convert -f pftrace` against its rocpd databases.

Decodes the trace with Perfetto's own generated protos (PyPI `perfetto`), rebuilds every slice
from its begin/end pair per track, and checks that every kernel dispatch, API call / ROCTx range,
sample, memory copy, flow and counter value of the databases (inside the window, when one is
given) appears exactly once, on a track of the right process (and thread, for host events).

usage: check.py TRACE DB [DB...] [--window START END] [--inclusive] [--group-by-queue]
Prints a JSON summary on success; exits 1 with the first mismatches otherwise.
"""
import json
import sqlite3
import sys
from collections import Counter, defaultdict

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

TE = pb.TrackEvent


def fail(msg):
    print("pftrace check FAILED: " + msg, file=sys.stderr)
    sys.exit(1)


def parse_args(argv):
    trace, dbs, window, inclusive, gbq = None, [], None, False, False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--window":
            window = (int(argv[i + 1]), int(argv[i + 2]))
            i += 3
            continue
        if a == "--inclusive":
            inclusive = True
        elif a == "--group-by-queue":
            gbq = True
        elif trace is None:
            trace = a
        else:
            dbs.append(a)
        i += 1
    return trace, dbs, window, inclusive, gbq


def keep(window, inclusive, s, e):
    if window is None:
        return True
    lo, hi = window
    return (e >= lo and s <= hi) if inclusive else (s >= lo and e <= hi)


def decode(path):
    trace = pb.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    tracks = {}
    interned = defaultdict(dict)  # seq -> iid -> str (names, categories, arg names, strings)
    events = []
    for p in trace.packet:
        seq = p.trusted_packet_sequence_id
        if p.sequence_flags & 1:
            interned[seq] = {}
        if p.HasField("interned_data"):
            d = p.interned_data
            for group in (d.event_names, d.event_categories, d.debug_annotation_names):
                for x in group:
                    if x.iid in interned[seq]:
                        fail(f"iid {x.iid} interned twice on sequence {seq}")
                    interned[seq][x.iid] = x.name
            for x in d.debug_annotation_string_values:
                interned[seq][x.iid] = x.str.decode()
        if p.HasField("track_descriptor"):
            t = p.track_descriptor
            if t.uuid in tracks and tracks[t.uuid] != t:
                fail(f"track {t.uuid} described twice, differently")
            tracks[t.uuid] = t
        if p.HasField("track_event"):
            e = p.track_event
            names = interned[seq]
            name = names[e.name_iid] if e.HasField("name_iid") else (e.name or None)
            args = {}
            for a in e.debug_annotations:
                an = names[a.name_iid] if a.HasField("name_iid") else a.name
                kind = a.WhichOneof("value")
                v = getattr(a, kind)
                if kind == "string_value_iid":
                    v = names[v]
                args[an] = v
            cv = None
            if e.HasField("counter_value"):
                cv = float(e.counter_value)
            elif e.HasField("double_counter_value"):
                cv = e.double_counter_value
            cats = [names[c] for c in e.category_iids]
            events.append((p.timestamp, e.track_uuid, e.type, name, args, list(e.flow_ids), cv, cats))
    return tracks, events


def build(tracks, events):
    proc_of = {}  # track uuid -> pid
    thread_of = {}  # track uuid -> (pid, tid)
    for u, t in tracks.items():
        if t.HasField("process"):
            proc_of[u] = t.process.pid
    for u, t in tracks.items():
        if t.HasField("thread"):
            thread_of[u] = (t.thread.pid, t.thread.tid)
            proc_of[u] = t.thread.pid
        elif t.HasField("parent_uuid"):
            if t.parent_uuid not in proc_of:
                fail(f"track {t.name!r} has an unknown parent {t.parent_uuid}")
            proc_of[u] = proc_of[t.parent_uuid]
    slices, instants, counters = [], [], []
    per_track = defaultdict(list)
    for ev in events:
        per_track[ev[1]].append(ev)
    for u, evs in per_track.items():
        if u not in tracks:
            fail(f"event on undescribed track {u}")
        evs.sort(key=lambda e: e[0])  # stable: file order breaks ties
        stack = []
        for ts, _, typ, name, args, flows, cv, cats in evs:
            if typ == TE.TYPE_SLICE_BEGIN:
                stack.append((ts, name, args, flows, cats))
            elif typ == TE.TYPE_SLICE_END:
                if not stack:
                    fail(f"slice end without begin on track {tracks[u].name!r} at {ts}")
                b = stack.pop()
                slices.append({"track": u, "start": b[0], "end": ts, "name": b[1], "args": b[2],
                               "flows": b[3], "cats": b[4]})
            elif typ == TE.TYPE_INSTANT:
                instants.append({"track": u, "ts": ts, "name": name, "args": args, "cats": cats})
            elif typ == TE.TYPE_COUNTER:
                counters.append({"track": u, "ts": ts, "value": cv})
        if stack:
            fail(f"{len(stack)} slices never end on track {tracks[u].name!r}")
    return proc_of, thread_of, slices, instants, counters


def main():
    trace, dbs, window, inclusive, gbq = parse_args(sys.argv[1:])
    tracks, events = decode(trace)
    proc_of, thread_of, slices, instants, counters = build(tracks, events)
    errors = []

    def check(cond, msg):
        if not cond and len(errors) < 20:
            errors.append(msg)

    # Index the trace.
    api = defaultdict(list)  # (pid, tid, corr) -> slices on thread tracks
    kern = defaultdict(list)  # (pid, dispatch_id) -> slices
    copies = defaultdict(list)  # (pid, copy_id) -> slices
    for s in slices:
        a, pid = s["args"], proc_of[s["track"]]
        if "dispatch_id" in a:
            kern[(pid, a["dispatch_id"])].append(s)
        elif "copy_id" in a:
            copies[(pid, a["copy_id"])].append(s)
        else:
            if s["track"] not in thread_of:
                fail(f"API slice {s['name']} not on a thread track")
            pid, tid = thread_of[s["track"]]
            api[(pid, tid, a.get("corr_id"))].append(s)
    inst = defaultdict(list)
    for i in instants:
        pid, tid = thread_of[i["track"]]
        inst[(pid, tid, i["args"].get("corr_id"))].append(i)
    counts = Counter()
    expect_flows = 0
    seen_pids = set()
    for path in dbs:
        db = sqlite3.connect(path)
        q = lambda sql: db.execute(sql).fetchall()
        for (guid,) in q("SELECT DISTINCT guid FROM rocpd_info_process"):
            (pid,) = q(f"SELECT pid FROM rocpd_info_process WHERE guid = '{guid}'")[0]
            seen_pids.add(pid)
            api_stack = {}
            for rid, tid, st, en, name, stack, msg in q(
                f"SELECT R.id, R.tid, R.start, R.end, S.string, COALESCE(E.stack_id, R.id), "
                f"json_extract(E.extdata, '$.message') FROM rocpd_region R LEFT JOIN rocpd_event E ON "
                f"E.id = R.event_id AND E.guid = R.guid LEFT JOIN rocpd_string S ON S.id = R.name_id AND "
                f"S.guid = R.guid WHERE R.guid = '{guid}'"
            ):
                if not keep(window, inclusive, st, en):
                    check(not api.get((pid, tid, stack)), f"API call {rid} outside the window was written")
                    continue
                found = api.get((pid, tid, stack), [])
                check(len(found) == 1, f"API call {name} (corr {stack}, tid {tid}) found {len(found)} times")
                if found:
                    check(found[0]["name"] == (msg or name), f"API call {stack}: name {found[0]['name']!r}")
                    api_stack[stack] = found[0]
                counts["api"] += 1
            for sid, tid, ts, name, stack, msg in q(
                f"SELECT S.id, T.tid, S.timestamp, N.string, COALESCE(E.stack_id, S.id), "
                f"json_extract(E.extdata, '$.message') FROM rocpd_sample S JOIN rocpd_track T ON T.id = S.track_id "
                f"AND T.guid = S.guid LEFT JOIN rocpd_event E ON E.id = S.event_id AND E.guid = S.guid "
                f"LEFT JOIN rocpd_string N ON N.id = T.name_id AND N.guid = T.guid WHERE S.guid = '{guid}'"
            ):
                if not keep(window, inclusive, ts, ts):
                    continue
                found = inst.get((pid, tid, stack), [])
                check(len(found) == 1, f"sample {sid} found {len(found)} times")
                if found:
                    check(found[0]["name"] == (msg or name), f"sample {sid}: name {found[0]['name']!r}")
                counts["instants"] += 1
            for did, st, en, name, stack in q(
                f"SELECT K.id, K.start, K.end, COALESCE(NULLIF(Y.display_name, ''), Y.kernel_name), E.stack_id "
                f"FROM rocpd_kernel_dispatch K LEFT JOIN rocpd_event E ON E.id = K.event_id AND E.guid = K.guid "
                f"LEFT JOIN rocpd_info_kernel_symbol Y ON Y.id = K.kernel_id AND Y.guid = K.guid "
                f"WHERE K.guid = '{guid}'"
            ):
                found = kern.get((pid, did), [])
                if not keep(window, inclusive, st, en):
                    check(not found, f"kernel {did} outside the window was written")
                    continue
                check(len(found) == 1, f"kernel dispatch {did} of pid {pid} found {len(found)} times")
                counts["kernels"] += 1
                if not found:
                    continue
                k = found[0]
                check(k["name"] == name, f"kernel {did}: name {k['name']!r} != {name!r}")
                check("kernel_dispatch" in k["cats"], f"kernel {did}: categories {k['cats']}")
                tname = tracks[k["track"]].name
                check(tname.startswith("COMPUTE" if gbq else "STREAM"), f"kernel {did} on track {tname!r}")
                if stack and stack in api_stack:
                    fl = set(k["flows"]) & set(api_stack[stack]["flows"])
                    check(len(fl) == 1, f"kernel {did}: no flow from its API call {stack}")
                    expect_flows += 1
                for pname, v in q(
                    f"SELECT P.name, SUM(PE.value) FROM rocpd_pmc_event PE JOIN rocpd_info_pmc P ON P.id = PE.pmc_id "
                    f"AND P.guid = PE.guid JOIN rocpd_kernel_dispatch K ON K.event_id = PE.event_id AND "
                    f"K.guid = PE.guid WHERE K.id = {did} AND K.guid = '{guid}' GROUP BY PE.pmc_id"
                ):
                    check(abs(k["args"].get(pname, -1e300) - v) < 1e-9, f"kernel {did}: {pname} arg")
                    pts = [c for c in counters if proc_of[c["track"]] == pid and c["ts"] == st
                           and tracks[c["track"]].name.endswith("PMC " + pname)]
                    check(len(pts) == 1 and abs(pts[0]["value"] - v) < 1e-9,
                          f"kernel {did}: PMC {pname} counter points {pts}")
                    counts["pmc"] += 1
            for cid, st, en, stack, dst in q(
                f"SELECT M.id, M.start, M.end, E.stack_id, M.dst_agent_id FROM rocpd_memory_copy M LEFT JOIN "
                f"rocpd_event E ON E.id = M.event_id AND E.guid = M.guid WHERE M.guid = '{guid}'"
            ):
                found = copies.get((pid, cid), [])
                if not keep(window, inclusive, st, en):
                    check(not found, f"copy {cid} outside the window was written")
                    continue
                check(len(found) == 1, f"copy {cid} found {len(found)} times")
                counts["copies"] += 1
                if found and stack and stack in api_stack:
                    fl = set(found[0]["flows"]) & set(api_stack[stack]["flows"])
                    check(len(fl) == 1, f"copy {cid}: no flow from its API call")
                    expect_flows += 1
            (n_alloc,) = q(
                f"SELECT COUNT(*) FROM rocpd_memory_allocate WHERE guid = '{guid}'"
                + ("" if window is None else
                   (f" AND end >= {window[0]} AND start <= {window[1]}" if inclusive
                    else f" AND start >= {window[0]} AND end <= {window[1]}"))
            )[0]
            pts = [c for c in counters if proc_of[c["track"]] == pid and
                   any(w in tracks[c["track"]].name for w in ("ALLOCATED", "FREED", "SCRATCH"))]
            check(len(pts) == n_alloc, f"pid {pid}: {len(pts)} allocation counter points for {n_alloc} rows")
            counts["allocations"] += n_alloc
    check(set(proc_of[u] for u in tracks if tracks[u].HasField("process")) == seen_pids,
          "process tracks do not match the databases' processes")
    extra_k = sum(len(v) for v in kern.values()) - counts["kernels"]
    check(extra_k == 0, f"{extra_k} kernel slices not in the databases")
    extra_a = sum(len(v) for v in api.values()) - counts["api"]
    check(extra_a == 0, f"{extra_a} API slices not in the databases")
    counts["flows"] = expect_flows
    if errors:
        fail("; ".join(errors))
    print(json.dumps(dict(counts), sort_keys=True))


if __name__ == "__main__":
    main()
