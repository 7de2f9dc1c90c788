#!/usr/bin/env python3
"""Regenerates crates/rocpd/src/pftrace/protos/perfetto_trace_subset.proto.

The subset is taken from Perfetto's own trace protos as shipped (compiled) in the PyPI package
`perfetto` (`perfetto.protos.perfetto.trace.perfetto_trace_pb2`): the messages and fields the
converter writes, with Perfetto's names, numbers, types and oneofs unchanged, so the file is
wire-compatible with the full definitions. Run with a Python that has `perfetto` and `protobuf`:

    python3 -m venv /tmp/pf && /tmp/pf/bin/pip install perfetto protobuf
    /tmp/pf/bin/python tests/scripts/perfetto-protos.py > crates/rocpd/src/pftrace/protos/perfetto_trace_subset.proto
"""

from google.protobuf import descriptor_pb2 as d
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
from importlib.metadata import version as pkg_version

# message -> (fields kept, nested enums kept)
KEEP = {
    "Trace": (["packet"], []),
    "TracePacket": (
        ["timestamp", "track_event", "track_descriptor", "trusted_packet_sequence_id",
         "interned_data", "sequence_flags"],
        ["SequenceFlags"],
    ),
    "TrackDescriptor": (
        ["uuid", "parent_uuid", "name", "description", "process", "thread", "counter",
         "child_ordering", "sibling_order_rank"],
        ["ChildTracksOrdering"],
    ),
    "ProcessDescriptor": (["pid", "cmdline", "process_name", "start_timestamp_ns"], []),
    "ThreadDescriptor": (["pid", "tid", "thread_name"], []),
    "CounterDescriptor": (["unit", "unit_name", "unit_multiplier", "is_incremental"], ["Unit"]),
    "TrackEvent": (
        ["category_iids", "categories", "name_iid", "name", "type", "track_uuid",
         "counter_value", "double_counter_value", "flow_ids", "terminating_flow_ids",
         "debug_annotations"],
        ["Type"],
    ),
    "DebugAnnotation": (
        ["name_iid", "name", "bool_value", "uint_value", "int_value", "double_value",
         "string_value", "string_value_iid"],
        [],
    ),
    "InternedData": (
        ["event_categories", "event_names", "debug_annotation_names",
         "debug_annotation_string_values"],
        [],
    ),
    "EventCategory": (["iid", "name"], []),
    "EventName": (["iid", "name"], []),
    "DebugAnnotationName": (["iid", "name"], []),
    "InternedString": (["iid", "str"], []),
}

T = d.FieldDescriptorProto
SCALAR = {
    T.TYPE_UINT64: "uint64", T.TYPE_INT64: "int64", T.TYPE_UINT32: "uint32",
    T.TYPE_INT32: "int32", T.TYPE_BOOL: "bool", T.TYPE_STRING: "string",
    T.TYPE_BYTES: "bytes", T.TYPE_DOUBLE: "double", T.TYPE_FIXED64: "fixed64",
}


def type_name(f):
    if f.type in SCALAR:
        return SCALAR[f.type]
    return f.type_name.removeprefix(".perfetto.protos.")


def main():
    fd = d.FileDescriptorProto()
    pb.DESCRIPTOR.CopyToProto(fd)
    msgs = {m.name: m for m in fd.message_type}
    out = []
    w = out.append
    w(HEADER.format(version=pkg_version("perfetto")).rstrip() + "\n")
    w('syntax = "proto2";\n\npackage perfetto.protos;\n')
    for name, (fields, enums) in KEEP.items():
        m = msgs[name]
        w(f"\nmessage {name} {{")
        for e in m.enum_type:
            if e.name in enums:
                w(f"  enum {e.name} {{")
                for v in e.value:
                    w(f"    {v.name} = {v.number};")
                w("  }")
        by_oneof = {}
        for f in m.field:
            if f.name not in fields:
                continue
            if f.HasField("oneof_index"):
                by_oneof.setdefault(m.oneof_decl[f.oneof_index].name, []).append(f)
        done = set()
        for f in m.field:
            if f.name not in fields:
                continue
            if f.HasField("oneof_index"):
                oneof = m.oneof_decl[f.oneof_index].name
                if oneof in done:
                    continue
                done.add(oneof)
                w(f"  oneof {oneof} {{")
                for g in by_oneof[oneof]:
                    w(f"    {type_name(g)} {g.name} = {g.number};")
                w("  }")
                continue
            label = "repeated" if f.label == T.LABEL_REPEATED else "optional"
            packed = " [packed = true]" if f.options.packed else ""
            w(f"  {label} {type_name(f)} {f.name} = {f.number}{packed};")
        w("}")
    print("\n".join(out))


HEADER = """\
// Copyright (C) 2017-2026 The Android Open Source Project
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//      http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.
//
// A subset of Perfetto's protos/perfetto/trace/perfetto_trace.proto (messages Trace,
// TracePacket, TrackDescriptor, ProcessDescriptor, ThreadDescriptor, CounterDescriptor,
// TrackEvent, DebugAnnotation, InternedData and the interned-string messages), with only the
// fields rocprof-attach writes. Names, field numbers, types and oneofs are Perfetto's, so the
// messages are wire-compatible with the full definitions. Generated by
// tests/scripts/perfetto-protos.py from the descriptor of the PyPI package perfetto {version}.
"""

if __name__ == "__main__":
    main()
