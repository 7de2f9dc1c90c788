//! rocpd → rocprofv3's JSON layout (`<name>_results.json`), streamed.
//!
//! One object per process under `"rocprofiler-sdk-tool"`, compact like RapidJSON's writer. Records
//! are streamed in one pass per table into unlinked spool files (one per `buffer_records` key),
//! then the document is assembled in rocprofv3's key order; memory use does not depend on the
//! number of rows. `kind`/`operation` integers index the `strings.buffer_records` table written in
//! the same document (rocpd does not store rocprofiler's enum values).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};

use super::csv::kernel_name;
use super::domain::Domain;
use super::numfmt::{push_i64, push_u64};
use super::output::{OutFile, OutputSet};
use super::reader::{Dims, NodeValue, Source};
use super::ConvertOptions;
use crate::{Error, Result};

/// Appends `s` as a JSON string.
pub fn push_str(buf: &mut Vec<u8>, s: &str) {
    buf.push(b'"');
    for &b in s.as_bytes() {
        match b {
            b'"' => buf.extend_from_slice(b"\\\""),
            b'\\' => buf.extend_from_slice(b"\\\\"),
            b'\n' => buf.extend_from_slice(b"\\n"),
            b'\r' => buf.extend_from_slice(b"\\r"),
            b'\t' => buf.extend_from_slice(b"\\t"),
            0..=0x1f => buf.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            _ => buf.push(b),
        }
    }
    buf.push(b'"');
}

/// Appends a double the way RapidJSON prints it (`16384.0`, `0.5`); non-finite values as `null`.
pub fn push_f64(buf: &mut Vec<u8>, v: f64) {
    if !v.is_finite() {
        buf.extend_from_slice(b"null");
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        buf.extend_from_slice(format!("{v:.1}").as_bytes());
    } else {
        buf.extend_from_slice(format!("{v}").as_bytes());
    }
}

/// A tiny compact-JSON builder over a byte buffer.
#[derive(Default)]
struct J {
    b: Vec<u8>,
    comma: Vec<bool>,
}

impl J {
    fn sep(&mut self) {
        if let Some(c) = self.comma.last_mut() {
            if *c {
                self.b.push(b',');
            }
            *c = true;
        }
    }
    fn open(&mut self, c: u8) -> &mut Self {
        self.sep();
        self.b.push(c);
        self.comma.push(false);
        self
    }
    fn close(&mut self, c: u8) -> &mut Self {
        self.comma.pop();
        self.b.push(c);
        self
    }
    fn obj(&mut self) -> &mut Self {
        self.open(b'{')
    }
    fn end_obj(&mut self) -> &mut Self {
        self.close(b'}')
    }
    fn end_arr(&mut self) -> &mut Self {
        self.close(b']')
    }
    fn i(&mut self, k: &str, v: i64) -> &mut Self {
        self.sep();
        push_str(&mut self.b, k);
        self.b.push(b':');
        push_i64(&mut self.b, v);
        self
    }
    fn u(&mut self, k: &str, v: u64) -> &mut Self {
        self.sep();
        push_str(&mut self.b, k);
        self.b.push(b':');
        push_u64(&mut self.b, v);
        self
    }
    fn s(&mut self, k: &str, v: &str) -> &mut Self {
        self.sep();
        push_str(&mut self.b, k);
        self.b.push(b':');
        push_str(&mut self.b, v);
        self
    }
    fn f(&mut self, k: &str, v: f64) -> &mut Self {
        self.sep();
        push_str(&mut self.b, k);
        self.b.push(b':');
        push_f64(&mut self.b, v);
        self
    }
    fn b(&mut self, k: &str, v: bool) -> &mut Self {
        self.sep();
        push_str(&mut self.b, k);
        self.b.push(b':');
        self.b.extend_from_slice(if v { b"true" } else { b"false" });
        self
    }
    /// Opens `"k":{`.
    fn ko(&mut self, k: &str) -> &mut Self {
        self.sep();
        push_str(&mut self.b, k);
        self.b.extend_from_slice(b":{");
        self.comma.push(false);
        self
    }
    /// Opens `"k":[`.
    fn ka(&mut self, k: &str) -> &mut Self {
        self.sep();
        push_str(&mut self.b, k);
        self.b.extend_from_slice(b":[");
        self.comma.push(false);
        self
    }
    /// `"k":{"handle":v}`.
    fn handle(&mut self, k: &str, v: u64) -> &mut Self {
        self.ko(k).u("handle", v).end_obj()
    }
    /// `"k":<raw json>`.
    fn raw(&mut self, k: &str, json: &str) -> &mut Self {
        self.sep();
        push_str(&mut self.b, k);
        self.b.push(b':');
        self.b.extend_from_slice(json.as_bytes());
        self
    }
    /// A raw JSON array element.
    fn raw_elem(&mut self, json: &str) -> &mut Self {
        self.sep();
        self.b.extend_from_slice(json.as_bytes());
        self
    }
    fn str_elem(&mut self, v: &str) -> &mut Self {
        self.sep();
        push_str(&mut self.b, v);
        self
    }
    fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.b)
    }
}

/// The kind/operation string table built while streaming.
#[derive(Default)]
struct Kinds {
    list: Vec<(String, Vec<String>)>,
    index: HashMap<String, usize>,
    ops: HashMap<(usize, String), usize>,
}

impl Kinds {
    fn id(&mut self, kind: &str, op: &str) -> (i64, i64) {
        let k = match self.index.get(kind) {
            Some(&k) => k,
            None => {
                self.list.push((kind.to_owned(), Vec::new()));
                self.index.insert(kind.to_owned(), self.list.len() - 1);
                self.list.len() - 1
            }
        };
        let key = (k, op.to_owned());
        let o = match self.ops.get(&key) {
            Some(&o) => o,
            None => {
                self.list[k].1.push(op.to_owned());
                let o = self.list[k].1.len() - 1;
                self.ops.insert(key, o);
                o
            }
        };
        (k as i64, o as i64)
    }
}

/// An unlinked temporary file collecting one JSON array's elements.
struct Spool {
    w: BufWriter<File>,
    count: u64,
}

impl Spool {
    fn push(&mut self, elem: &[u8]) -> std::io::Result<()> {
        if self.count > 0 {
            self.w.write_all(b",")?;
        }
        self.count += 1;
        self.w.write_all(elem)
    }

    fn copy_into(self, out: &mut OutFile) -> Result<()> {
        let mut f = self
            .w
            .into_inner()
            .map_err(|e| Error::io("cannot flush a JSON spool file", e.into_error()))?;
        f.seek(SeekFrom::Start(0))
            .map_err(|e| Error::io("cannot rewind a JSON spool file", e))?;
        std::io::copy(&mut f, out.writer()).map_err(|e| out.error(&e))?;
        Ok(())
    }
}

struct Spools<'o> {
    out: &'o OutputSet,
    map: HashMap<&'static str, Spool>,
}

impl Spools<'_> {
    fn push(&mut self, key: &'static str, elem: &[u8]) -> Result<()> {
        if !self.map.contains_key(key) {
            let f = self.out.scratch()?;
            self.map.insert(
                key,
                Spool {
                    w: BufWriter::with_capacity(256 * 1024, f),
                    count: 0,
                },
            );
        }
        match self.map.get_mut(key) {
            Some(s) => s.push(elem).map_err(|e| {
                super::output::write_error(&std::path::PathBuf::from("JSON spool file"), &e)
            }),
            None => Ok(()),
        }
    }
}

/// (category id, name id) → (domain, kind index, operation index), or None for non-API kinds.
type ApiKindCache = HashMap<(Option<i64>, Option<i64>), Option<(Domain, i64, i64)>>;

/// The name of the JSON output file.
pub fn file_name(name: &str) -> String {
    format!("{name}_results.json")
}

/// Writes `<name>_results.json` for `sources`. Returns the number of records written.
pub fn write(
    sources: &[Source<'_>],
    opts: &ConvertOptions,
    out: &mut OutputSet,
    name: &str,
) -> Result<u64> {
    let mut file = out.create(&file_name(name))?;
    file.write_all(b"{\"rocprofiler-sdk-tool\":[")?;
    let mut rows = 0;
    for (i, src) in sources.iter().enumerate() {
        if i > 0 {
            file.write_all(b",")?;
        }
        rows += process(src, opts, out, &mut file)?;
    }
    file.write_all(b"]}")?;
    file.finish()?;
    Ok(rows)
}

fn corr(j: &mut J, c: &super::model::Correlation) {
    j.ko("correlation_id")
        .i("internal", c.internal)
        .i("external", c.external)
        .i("ancestor", c.ancestor)
        .end_obj();
}

fn process(
    src: &Source<'_>,
    opts: &ConvertOptions,
    out: &OutputSet,
    file: &mut OutFile,
) -> Result<u64> {
    let dims = src.dims(opts.agent_index)?;
    let mut kinds = Kinds::default();
    let mut spools = Spools {
        out,
        map: HashMap::new(),
    };
    let mut j = J::default();
    let mut rows = 0u64;

    src.dispatches(|k| {
        let (kind, op) = kinds.id(
            non_empty(dims.string(k.category_id), "KERNEL_DISPATCH"),
            "KERNEL_DISPATCH_COMPLETE",
        );
        j.obj()
            .i("kind", kind)
            .i("operation", op)
            .i("thread_id", k.tid);
        corr(&mut j, &k.corr);
        j.i("start_timestamp", k.start).i("end_timestamp", k.end);
        dispatch_info(&mut j, &dims, k);
        j.handle("stream_id", k.stream_id as u64).end_obj();
        rows += 1;
        spools.push("kernel_dispatch", &j.take())
    })?;

    let mut cache: ApiKindCache = HashMap::new();
    src.api_calls(|a| {
        let entry = *cache.entry((a.category_id, a.name_id)).or_insert_with(|| {
            let kind = dims.string(a.category_id);
            Domain::of_api_kind(kind).map(|d| {
                let (k, o) = kinds.id(kind, dims.string(a.name_id));
                (d, k, o)
            })
        });
        let Some((domain, kind, op)) = entry else {
            return Ok(());
        };
        if let (Domain::MarkerApi, Some(m)) = (domain, &a.message) {
            j.obj().i("key", a.corr.internal).s("value", m).end_obj();
            spools.push("strings.marker_api", &j.take())?;
        }
        j.obj().i("kind", kind).i("operation", op);
        corr(&mut j, &a.corr);
        j.i("start_timestamp", a.start)
            .i("end_timestamp", a.end)
            .i("thread_id", a.tid)
            .end_obj();
        rows += 1;
        spools.push(domain.json_key(), &j.take())
    })?;

    src.memory_copies(|m| {
        let (kind, op) = kinds.id(
            non_empty(dims.string(m.category_id), "MEMORY_COPY"),
            dims.string(m.name_id),
        );
        j.obj()
            .i("kind", kind)
            .i("operation", op)
            .i("thread_id", m.tid);
        corr(&mut j, &m.corr);
        j.i("start_timestamp", m.start)
            .i("end_timestamp", m.end)
            .handle("dst_agent_id", dims.agent_handle(m.dst_agent_id))
            .handle("src_agent_id", dims.agent_handle(m.src_agent_id))
            .i("bytes", m.size)
            .handle("stream_id", m.stream_id as u64)
            .end_obj();
        rows += 1;
        spools.push("memory_copy", &j.take())
    })?;

    src.memory_allocations(|m| {
        let default_kind = if m.scratch {
            "SCRATCH_MEMORY"
        } else {
            "MEMORY_ALLOCATION"
        };
        let (kind, op) = kinds.id(
            non_empty(dims.string(m.category_id), default_kind),
            m.operation,
        );
        j.obj().i("kind", kind).i("operation", op);
        if m.scratch {
            j.handle("agent_id", dims.agent_handle(m.agent_id))
                .handle("queue_id", m.queue_id as u64)
                .i("thread_id", m.tid)
                .i("start_timestamp", m.start)
                .i("end_timestamp", m.end);
            corr(&mut j, &m.corr);
            j.i("flags", m.flags).i("allocation_size", m.size).end_obj();
            rows += 1;
            spools.push("scratch_memory", &j.take())
        } else {
            j.i("thread_id", m.tid);
            corr(&mut j, &m.corr);
            j.i("start_timestamp", m.start)
                .i("end_timestamp", m.end)
                .handle("agent_id", dims.agent_handle(m.agent_id))
                .s("address", &super::numfmt::hex16(m.address as u64))
                .i("allocation_size", m.size)
                .handle("stream_id", m.stream_id as u64)
                .end_obj();
            rows += 1;
            spools.push("memory_allocation", &j.take())
        }
    })?;

    // Header sections, now that the kind table is known.
    j.obj();
    metadata(&mut j, &dims);
    agents(&mut j, &dims);
    counters(&mut j, &dims);
    j.ko("strings")
        .ka("callback_records")
        .end_arr()
        .ka("buffer_records");
    for (kind, ops) in &kinds.list {
        j.obj().s("kind", kind).ka("operations");
        for o in ops {
            j.str_elem(o);
        }
        j.end_arr().end_obj();
    }
    j.end_arr().ka("marker_api");
    file.write_all(&j.take())?;
    if let Some(s) = spools.map.remove("strings.marker_api") {
        s.copy_into(file)?;
    }
    j.end_arr();
    j.ko("correlation_id").ka("external").end_arr().end_obj();
    j.ko("counters").ka("dimension_ids").end_arr().end_obj();
    j.end_obj();
    code_objects(&mut j, &dims);
    kernel_symbols(&mut j, &dims);
    j.ka("host_functions").end_arr().ka("summary").end_arr();
    j.ko("callback_records").ka("counter_collection");
    file.write_all(&j.take())?;

    // Counter records, grouped per dispatch, streamed straight into the file.
    let mut current: Option<i64> = None;
    let mut first = true;
    let mut flush_open = false;
    let mut prev_stream = 0u64;
    let mut buf = J::default();
    src.counters(|c| {
        let k = &c.dispatch;
        if current != Some(k.id) {
            if flush_open {
                buf.b.extend_from_slice(b"]");
                buf.comma.pop();
                buf.handle("stream_id", prev_stream).end_obj();
            }
            if !first {
                buf.b.push(b',');
            }
            first = false;
            buf.comma = vec![false];
            buf.b.push(b'{');
            buf.i("thread_id", k.tid).ko("dispatch_data");
            buf.ko("correlation_id")
                .i("internal", k.corr.internal)
                .i("external", k.corr.external)
                .end_obj();
            buf.i("start_timestamp", k.start).i("end_timestamp", k.end);
            dispatch_info(&mut buf, &dims, k);
            buf.end_obj().ka("records");
            current = Some(k.id);
            flush_open = true;
            prev_stream = k.stream_id as u64;
        }
        buf.obj()
            .handle("counter_id", c.pmc_id as u64)
            .f("value", c.value)
            .end_obj();
        rows += 1;
        if buf.b.len() > 64 * 1024 {
            file.write_all(&buf.take())?;
        }
        Ok(())
    })?;
    if flush_open {
        buf.b.extend_from_slice(b"]");
        buf.comma.pop();
        buf.handle("stream_id", prev_stream).end_obj();
    }
    file.write_all(&buf.take())?;

    file.write_all(b"]},\"buffer_records\":{")?;
    let keys = [
        "kernel_dispatch",
        "hip_api",
        "hsa_api",
        "marker_api",
        "rccl_api",
        "memory_copy",
        "memory_allocation",
        "scratch_memory",
        "rocdecode_api",
        "rocjpeg_api",
        "pc_sample_host_trap",
        "pc_sample_stochastic",
    ];
    for (i, key) in keys.iter().enumerate() {
        let mut b = Vec::new();
        if i > 0 {
            b.push(b',');
        }
        push_str(&mut b, key);
        b.extend_from_slice(b":[");
        file.write_all(&b)?;
        if let Some(s) = spools.map.remove(key) {
            s.copy_into(file)?;
        }
        file.write_all(b"]")?;
    }
    file.write_all(b"}}")?;
    Ok(rows)
}

fn non_empty<'a>(s: &'a str, default: &'a str) -> &'a str {
    if s.is_empty() {
        default
    } else {
        s
    }
}

fn dispatch_info(j: &mut J, dims: &Dims, k: &super::reader::DispatchRow) {
    j.ko("dispatch_info")
        .handle("agent_id", dims.agent_handle(Some(k.agent_id)))
        .handle("queue_id", k.queue_id as u64)
        .i("kernel_id", k.kernel_id)
        .i("dispatch_id", k.dispatch_id)
        .i("private_segment_size", k.private_segment_size)
        .i("group_segment_size", k.group_segment_size)
        .ko("workgroup_size")
        .i("x", k.workgroup[0])
        .i("y", k.workgroup[1])
        .i("z", k.workgroup[2])
        .end_obj()
        .ko("grid_size")
        .i("x", k.grid[0])
        .i("y", k.grid[1])
        .i("z", k.grid[2])
        .end_obj()
        .end_obj();
}

fn is_json(s: &str) -> bool {
    serde_json::from_str::<serde::de::IgnoredAny>(s).is_ok()
}

fn metadata(j: &mut J, dims: &Dims) {
    let p = &dims.process;
    j.ko("metadata").ko("node");
    for (k, v) in &p.node {
        match v {
            NodeValue::Int(i) => j.i(k, *i),
            NodeValue::Text(t) => j.s(k, t),
        };
    }
    j.end_obj()
        .i("pid", p.pid)
        .i("init_time", p.init)
        .i("fini_time", p.fini)
        .ka("command");
    for a in p.command.split(' ').filter(|a| !a.is_empty()) {
        j.str_elem(a);
    }
    j.end_arr();
    let config = if is_json(&p.extdata) && p.extdata.trim_start().starts_with('{') {
        p.extdata.as_str()
    } else {
        "{}"
    };
    j.raw("config", config).end_obj();
}

fn agents(j: &mut J, dims: &Dims) {
    let mut ids: Vec<&i64> = dims.agents.keys().collect();
    ids.sort();
    j.ka("agents");
    for id in ids {
        let a = &dims.agents[id];
        if a.extdata.len() > 2 && is_json(&a.extdata) {
            j.raw_elem(&a.extdata);
        } else {
            let ty = match a.agent_type.as_str() {
                "CPU" => 1,
                "GPU" => 2,
                _ => 0,
            };
            j.obj()
                .handle("id", a.handle)
                .i("type", ty)
                .s("name", &a.name)
                .i("node_id", a.absolute_index)
                .i("logical_node_id", a.logical_index)
                .i("logical_node_type_id", a.type_index)
                .end_obj();
        }
    }
    j.end_arr();
}

fn counters(j: &mut J, dims: &Dims) {
    j.ka("counters");
    for (id, p) in &dims.pmcs {
        j.obj()
            .handle("agent_id", dims.agent_handle(Some(p.agent_id)))
            .handle("id", *id as u64)
            .b("is_constant", p.is_constant)
            .b("is_derived", p.is_derived)
            .s("name", &p.name)
            .s("description", &p.description)
            .s("block", &p.block)
            .s("expression", &p.expression)
            .ka("dimension_ids")
            .end_arr()
            .end_obj();
    }
    j.end_arr();
}

fn code_objects(j: &mut J, dims: &Dims) {
    j.ka("code_objects");
    for (id, agent, uri, base, size, delta) in &dims.code_objects {
        j.obj()
            .i("code_object_id", *id)
            .handle("agent_id", dims.agent_handle(Some(*agent)))
            .s("uri", uri)
            .i("load_base", *base)
            .i("load_size", *size)
            .i("load_delta", *delta)
            .end_obj();
    }
    j.end_arr();
}

fn kernel_symbols(j: &mut J, dims: &Dims) {
    let mut ids: Vec<&i64> = dims.symbols.keys().collect();
    ids.sort();
    j.ka("kernel_symbols");
    for id in ids {
        let s = &dims.symbols[id];
        let name = kernel_name(dims, *id, None, false);
        j.obj()
            .i("kernel_id", *id)
            .i("code_object_id", s.code_object_id)
            .s("kernel_name", &s.kernel_name)
            .i("kernel_object", s.kernel_object)
            .i("kernarg_segment_size", s.kernarg_segment_size)
            .i("kernarg_segment_alignment", s.kernarg_segment_alignment)
            .i("group_segment_size", s.group_segment_size)
            .i("private_segment_size", s.private_segment_size)
            .i("sgpr_count", s.sgpr_count)
            .i("arch_vgpr_count", s.arch_vgpr_count)
            .i("accum_vgpr_count", s.accum_vgpr_count)
            .s("formatted_kernel_name", name)
            .s("demangled_kernel_name", name)
            .s("truncated_kernel_name", name)
            .end_obj();
    }
    j.end_arr();
}
