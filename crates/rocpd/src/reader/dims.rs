//! The small dimension tables of one source, loaded into memory once: strings, agents (with
//! their `Agent_Id` labels), kernel symbols, counters, code objects, the process and its node.

use std::collections::HashMap;

use super::rows::{int, opt, text};
use super::{AgentIndex, Source};
use crate::error::Result;

/// An agent, with its `Agent_Id` label precomputed.
#[derive(Debug, Clone, Default)]
pub struct AgentInfo {
    /// Absolute index.
    pub absolute_index: i64,
    /// Logical index.
    pub logical_index: i64,
    /// Index within its type.
    pub type_index: i64,
    /// `CPU` / `GPU`.
    pub agent_type: String,
    /// Agent name.
    pub name: String,
    /// Model name (the row's column).
    pub model_name: String,
    /// Vendor name (the row's column).
    pub vendor_name: String,
    /// Product name (the row's column).
    pub product_name: String,
    /// rocprofiler agent handle (from the stored agent JSON; the row id if absent).
    pub handle: u64,
    /// The stored agent JSON.
    pub extdata: String,
    /// Label for CSV cells, e.g. `Agent 1`.
    pub label: String,
}

/// A kernel symbol as the converters need it.
#[derive(Debug, Clone, Default)]
pub struct SymbolInfo {
    /// Code object id.
    pub code_object_id: i64,
    /// Raw name.
    pub kernel_name: String,
    /// Formatted name.
    pub display_name: String,
    /// Static LDS bytes.
    pub group_segment_size: i64,
    /// Static scratch bytes.
    pub private_segment_size: i64,
    /// SGPRs.
    pub sgpr_count: i64,
    /// Architected VGPRs.
    pub arch_vgpr_count: i64,
    /// Accumulation VGPRs.
    pub accum_vgpr_count: i64,
    /// Other columns as stored.
    pub kernel_object: i64,
    /// Kernel argument segment size.
    pub kernarg_segment_size: i64,
    /// Kernel argument alignment.
    pub kernarg_segment_alignment: i64,
}

/// A counter description.
#[derive(Debug, Clone, Default)]
pub struct PmcInfo {
    /// Counter name.
    pub name: String,
    /// Agent id.
    pub agent_id: i64,
    /// Description.
    pub description: String,
    /// Block.
    pub block: String,
    /// Expression.
    pub expression: String,
    /// Constant counter.
    pub is_constant: bool,
    /// Derived counter.
    pub is_derived: bool,
}

/// The process row and its node.
#[derive(Debug, Clone, Default)]
pub struct ProcessInfo {
    /// pid.
    pub pid: i64,
    /// ppid.
    pub ppid: i64,
    /// Profiler init timestamp.
    pub init: i64,
    /// Profiler fini timestamp.
    pub fini: i64,
    /// Command line.
    pub command: String,
    /// Tool configuration JSON.
    pub extdata: String,
    /// Node columns: id, hash, machine_id, system_name, hostname, release, version, hardware_name, domain_name.
    pub node: Vec<(String, NodeValue)>,
}

/// A node column value.
#[derive(Debug, Clone)]
pub enum NodeValue {
    /// Integer column.
    Int(i64),
    /// Text column.
    Text(String),
}

/// The in-memory dimension tables of one source.
#[derive(Debug, Default)]
pub struct Dims {
    /// String table.
    pub strings: IdMap<i64, String>,
    /// Agents by id.
    pub agents: IdMap<i64, AgentInfo>,
    /// Kernel symbols by id.
    pub symbols: IdMap<i64, SymbolInfo>,
    /// Counters by id, plus their ids in ascending order.
    pub pmcs: Vec<(i64, PmcInfo)>,
    /// Code objects: id, agent id, uri, load base/size/delta.
    pub code_objects: Vec<(i64, i64, String, i64, i64, i64)>,
    /// The process.
    pub process: ProcessInfo,
}

impl Dims {
    /// The string for `id`, or `""`.
    pub fn string(&self, id: Option<i64>) -> &str {
        id.and_then(|i| self.strings.get(&i))
            .map(String::as_str)
            .unwrap_or("")
    }

    /// The agent label for `id`, or `""` when there is no agent.
    pub fn agent_label(&self, id: Option<i64>) -> &str {
        id.and_then(|i| self.agents.get(&i))
            .map(|a| a.label.as_str())
            .unwrap_or("")
    }

    /// A kernel's name in a trace (Perfetto, OTF2): with `rename`, its ROCTx region's name when
    /// there is one; else the symbol's display name, its raw name, or `<unknown kernel>`.
    pub fn trace_kernel_name(
        &self,
        kernel_id: i64,
        region_name_id: Option<i64>,
        rename: bool,
    ) -> &str {
        let region = if rename {
            self.string(region_name_id)
        } else {
            ""
        };
        if !region.is_empty() {
            return region;
        }
        match self.symbols.get(&kernel_id) {
            Some(s) if s.display_name.is_empty() => &s.kernel_name,
            Some(s) => &s.display_name,
            None => "<unknown kernel>",
        }
    }

    /// The rocprofiler handle of an agent id.
    pub fn agent_handle(&self, id: Option<i64>) -> u64 {
        match id {
            Some(i) => self.agents.get(&i).map(|a| a.handle).unwrap_or(i as u64),
            None => 0,
        }
    }
}

impl Source<'_> {
    /// Loads the dimension tables.
    pub fn dims(&self, agent_index: AgentIndex) -> Result<Dims> {
        let mut d = Dims::default();
        self.load_strings(&mut d)?;
        self.load_agents(&mut d, agent_index)?;
        self.load_symbols(&mut d)?;
        self.load_pmcs(&mut d)?;
        self.load_code_objects(&mut d)?;
        self.load_process(&mut d)?;
        self.load_node(&mut d)?;
        Ok(d)
    }

    /// The string table.
    fn load_strings(&self, d: &mut Dims) -> Result<()> {
        let e = self.err();
        if let Some(t) = self.table("rocpd_string") {
            self.each(&format!("SELECT id, string FROM {t}"), |r| {
                d.strings
                    .insert(int(r, 0).map_err(&e)?, text(r, 1).map_err(&e)?);
                Ok(())
            })?;
        }
        Ok(())
    }

    /// The agents, labelled as `agent_index` says.
    fn load_agents(&self, d: &mut Dims, agent_index: AgentIndex) -> Result<()> {
        let e = self.err();
        if let Some(t) = self.table("rocpd_info_agent") {
            self.each(
                &format!("SELECT id, absolute_index, logical_index, type_index, type, name, extdata, model_name, vendor_name, product_name FROM {t} ORDER BY id"),
                |r| {
                    let id = int(r, 0).map_err(&e)?;
                    let mut a = AgentInfo {
                        absolute_index: opt(r, 1).map_err(&e)?.unwrap_or(id),
                        logical_index: int(r, 2).map_err(&e)?,
                        type_index: int(r, 3).map_err(&e)?,
                        agent_type: text(r, 4).map_err(&e)?,
                        name: text(r, 5).map_err(&e)?,
                        handle: id as u64,
                        extdata: text(r, 6).map_err(&e)?,
                        model_name: text(r, 7).map_err(&e)?,
                        vendor_name: text(r, 8).map_err(&e)?,
                        product_name: text(r, 9).map_err(&e)?,
                        label: String::new(),
                    };
                    if let Ok(v) = serde_json::from_str::<serde_json::Value>(&a.extdata) {
                        if let Some(h) = v.pointer("/id/handle").and_then(|h| h.as_u64()) {
                            a.handle = h;
                        }
                    }
                    a.label = match agent_index {
                        AgentIndex::Relative => format!("Agent {}", a.logical_index),
                        AgentIndex::Absolute => format!("Agent {}", a.absolute_index),
                        AgentIndex::TypeRelative => format!("{} {}", a.agent_type, a.type_index),
                    };
                    d.agents.insert(id, a);
                    Ok(())
                },
            )?;
        }
        Ok(())
    }

    /// The kernel symbols.
    fn load_symbols(&self, d: &mut Dims) -> Result<()> {
        let e = self.err();
        if let Some(t) = self.table("rocpd_info_kernel_symbol") {
            self.each(
                &format!(
                    "SELECT id, code_object_id, kernel_name, display_name, group_segment_size, private_segment_size, \
                     sgpr_count, arch_vgpr_count, accum_vgpr_count, kernel_object, kernarg_segment_size, \
                     kernarg_segment_alignment FROM {t}"
                ),
                |r| {
                    let s = SymbolInfo {
                        code_object_id: int(r, 1).map_err(&e)?,
                        kernel_name: text(r, 2).map_err(&e)?,
                        display_name: text(r, 3).map_err(&e)?,
                        group_segment_size: int(r, 4).map_err(&e)?,
                        private_segment_size: int(r, 5).map_err(&e)?,
                        sgpr_count: int(r, 6).map_err(&e)?,
                        arch_vgpr_count: int(r, 7).map_err(&e)?,
                        accum_vgpr_count: int(r, 8).map_err(&e)?,
                        kernel_object: int(r, 9).map_err(&e)?,
                        kernarg_segment_size: int(r, 10).map_err(&e)?,
                        kernarg_segment_alignment: int(r, 11).map_err(&e)?,
                    };
                    d.symbols.insert(int(r, 0).map_err(&e)?, s);
                    Ok(())
                },
            )?;
        }
        Ok(())
    }

    /// The counters, in id order.
    fn load_pmcs(&self, d: &mut Dims) -> Result<()> {
        let e = self.err();
        if let Some(t) = self.table("rocpd_info_pmc") {
            self.each(
                &format!("SELECT id, name, agent_id, description, block, expression, is_constant, is_derived FROM {t} ORDER BY id"),
                |r| {
                    let p = PmcInfo {
                        name: text(r, 1).map_err(&e)?,
                        agent_id: int(r, 2).map_err(&e)?,
                        description: text(r, 3).map_err(&e)?,
                        block: text(r, 4).map_err(&e)?,
                        expression: text(r, 5).map_err(&e)?,
                        is_constant: int(r, 6).map_err(&e)? != 0,
                        is_derived: int(r, 7).map_err(&e)? != 0,
                    };
                    d.pmcs.push((int(r, 0).map_err(&e)?, p));
                    Ok(())
                },
            )?;
        }
        Ok(())
    }

    /// The code objects, in id order.
    fn load_code_objects(&self, d: &mut Dims) -> Result<()> {
        let e = self.err();
        if let Some(t) = self.table("rocpd_info_code_object") {
            self.each(&format!("SELECT id, agent_id, uri, load_base, load_size, load_delta FROM {t} ORDER BY id"), |r| {
                d.code_objects.push((
                    int(r, 0).map_err(&e)?,
                    int(r, 1).map_err(&e)?,
                    text(r, 2).map_err(&e)?,
                    int(r, 3).map_err(&e)?,
                    int(r, 4).map_err(&e)?,
                    int(r, 5).map_err(&e)?,
                ));
                Ok(())
            })?;
        }
        Ok(())
    }

    /// The process row.
    fn load_process(&self, d: &mut Dims) -> Result<()> {
        let e = self.err();
        if let Some(t) = self.table("rocpd_info_process") {
            self.each(
                &format!("SELECT pid, ppid, init, fini, command, extdata, nid FROM {t} LIMIT 1"),
                |r| {
                    d.process = ProcessInfo {
                        pid: int(r, 0).map_err(&e)?,
                        ppid: int(r, 1).map_err(&e)?,
                        init: int(r, 2).map_err(&e)?,
                        fini: int(r, 3).map_err(&e)?,
                        command: text(r, 4).map_err(&e)?,
                        extdata: text(r, 5).map_err(&e)?,
                        node: Vec::new(),
                    };
                    Ok(())
                },
            )?;
        }
        Ok(())
    }

    /// The node row (after the process: its columns go to `d.process.node`).
    fn load_node(&self, d: &mut Dims) -> Result<()> {
        let e = self.err();
        if let Some(t) = self.table("rocpd_info_node") {
            self.each(
                &format!(
                    "SELECT id, hash, machine_id, system_name, hostname, release, version, hardware_name, domain_name FROM {t} LIMIT 1"
                ),
                |r| {
                    let names = ["id", "hash", "machine_id", "system_name", "hostname", "release", "version", "hardware_name", "domain_name"];
                    for (i, n) in names.iter().enumerate() {
                        let v = if i < 2 { NodeValue::Int(int(r, i).map_err(&e)?) } else { NodeValue::Text(text(r, i).map_err(&e)?) };
                        d.process.node.push(((*n).to_owned(), v));
                    }
                    Ok(())
                },
            )?;
        }
        Ok(())
    }
}

/// A fast hasher for integer ids (multiplicative, like rustc's FxHash); ids are not
/// attacker-chosen keys, so SipHash's DoS resistance buys nothing on the per-row lookups.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_i64(&mut self, v: i64) {
        self.write_u64(v as u64);
    }
    fn write_u8(&mut self, v: u8) {
        self.write_u64(u64::from(v));
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn write_isize(&mut self, v: isize) {
        self.write_u64(v as u64);
    }
}

/// A map keyed by database ids.
pub type IdMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<IdHasher>>;
