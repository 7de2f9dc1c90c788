//! The per-process sections around the records: metadata, agents, counters, code objects and
//! kernel symbols, built from the dimension tables.

use super::builder::J;
use crate::csv::kernel_name;
use crate::reader::{Dims, NodeValue};

fn is_json(s: &str) -> bool {
    serde_json::from_str::<serde::de::IgnoredAny>(s).is_ok()
}

pub(super) fn metadata(j: &mut J, dims: &Dims) {
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

pub(super) fn agents(j: &mut J, dims: &Dims) {
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

pub(super) fn counters(j: &mut J, dims: &Dims) {
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

pub(super) fn code_objects(j: &mut J, dims: &Dims) {
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

pub(super) fn kernel_symbols(j: &mut J, dims: &Dims) {
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
