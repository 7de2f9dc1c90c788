//! The agent JSON of `rocpd_info_agent.extdata`, complete: every field rocprofiler-sdk writes for
//! an agent (its `rocprofiler_agent_v0_t` as the SDK serialises it), so that ROCm's own C++ rocpd
//! readers, which decode each agent back into that struct before writing CSV, Perfetto or OTF2,
//! find every key they ask for (a missing one fails the whole conversion with `JSON Parsing
//! failed - provided NVP (<key>) not found`).
//!
//! [`complete`] adds what a writer does not know, with a neutral value of the right shape (0,
//! `""`, an object of zeros, an empty list), and keeps what it does know. The field list and its
//! meaning are in docs/output.md, "Agents".

use serde_json::{json, Map, Value};

/// Bit fields of a device's capability word, as the SDK names them (each 0 when unknown).
pub const CAPABILITY_BITS: [&str; 23] = [
    "HotPluggable",
    "HSAMMUPresent",
    "SharedWithGraphics",
    "QueueSizePowerOfTwo",
    "QueueSize32bit",
    "QueueIdleEvent",
    "VALimit",
    "WatchPointsSupported",
    "WatchPointsTotalBits",
    "DoorbellType",
    "AQLQueueDoubleMap",
    "DebugTrapSupported",
    "WaveLaunchTrapOverrideSupported",
    "WaveLaunchModeSupported",
    "PreciseMemoryOperationsSupported",
    "DEPRECATED_SRAM_EDCSupport",
    "Mem_EDCSupport",
    "RASEventNotify",
    "ASICRevision",
    "SRAM_EDCSupport",
    "SVMAPISupported",
    "CoherentHostAccess",
    "DebugSupportedFirmware",
];

/// The shape of a field's neutral value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// An integer (0).
    Int,
    /// A string (`""`).
    Text,
    /// `{"handle": 0}`.
    Handle,
    /// `{"x": 0, "y": 0, "z": 0}`.
    Dim3,
    /// The firmware version word: `{"uCode", "Major", "Minor", "Stepping"}`.
    EngineId,
    /// The SDMA firmware version: `{"uCodeSDMA", "uCodeRes"}`.
    EngineVersion,
    /// The capability word ([`CAPABILITY_BITS`]).
    Capability,
    /// Which runtimes see the agent: `{"hsa", "hip", "rccl", "rocdecode"}`.
    Visibility,
    /// `{"value": 0}`.
    Uuid,
    /// A list (`[]`).
    List,
}

/// Every key of an agent, in the SDK's order, with its shape.
pub const FIELDS: [(&str, Shape); 60] = [
    ("size", Shape::Int),
    ("id", Shape::Handle),
    ("type", Shape::Int),
    ("cpu_cores_count", Shape::Int),
    ("simd_count", Shape::Int),
    ("mem_banks_count", Shape::Int),
    ("caches_count", Shape::Int),
    ("io_links_count", Shape::Int),
    ("cpu_core_id_base", Shape::Int),
    ("simd_id_base", Shape::Int),
    ("max_waves_per_simd", Shape::Int),
    ("lds_size_in_kb", Shape::Int),
    ("gds_size_in_kb", Shape::Int),
    ("num_gws", Shape::Int),
    ("wave_front_size", Shape::Int),
    ("num_xcc", Shape::Int),
    ("cu_count", Shape::Int),
    ("array_count", Shape::Int),
    ("num_shader_banks", Shape::Int),
    ("simd_arrays_per_engine", Shape::Int),
    ("cu_per_simd_array", Shape::Int),
    ("simd_per_cu", Shape::Int),
    ("max_slots_scratch_cu", Shape::Int),
    ("gfx_target_version", Shape::Int),
    ("vendor_id", Shape::Int),
    ("device_id", Shape::Int),
    ("location_id", Shape::Int),
    ("domain", Shape::Int),
    ("drm_render_minor", Shape::Int),
    ("num_sdma_engines", Shape::Int),
    ("num_sdma_xgmi_engines", Shape::Int),
    ("num_sdma_queues_per_engine", Shape::Int),
    ("num_cp_queues", Shape::Int),
    ("max_engine_clk_ccompute", Shape::Int),
    ("max_engine_clk_fcompute", Shape::Int),
    ("sdma_fw_version", Shape::EngineVersion),
    ("fw_version", Shape::EngineId),
    ("capability", Shape::Capability),
    ("cu_per_engine", Shape::Int),
    ("max_waves_per_cu", Shape::Int),
    ("family_id", Shape::Int),
    ("workgroup_max_size", Shape::Int),
    ("grid_max_size", Shape::Int),
    ("local_mem_size", Shape::Int),
    ("hive_id", Shape::Int),
    ("gpu_id", Shape::Int),
    ("workgroup_max_dim", Shape::Dim3),
    ("grid_max_dim", Shape::Dim3),
    ("name", Shape::Text),
    ("vendor_name", Shape::Text),
    ("product_name", Shape::Text),
    ("model_name", Shape::Text),
    ("node_id", Shape::Int),
    ("logical_node_id", Shape::Int),
    ("logical_node_type_id", Shape::Int),
    ("runtime_visibility", Shape::Visibility),
    ("uuid", Shape::Uuid),
    ("mem_banks", Shape::List),
    ("caches", Shape::List),
    ("io_links", Shape::List),
];

/// The neutral value of `shape`.
pub fn neutral(shape: Shape) -> Value {
    let zeros = |keys: &[&str]| {
        Value::Object(
            keys.iter()
                .map(|k| (k.to_string(), Value::from(0)))
                .collect(),
        )
    };
    match shape {
        Shape::Int => json!(0),
        Shape::Text => json!(""),
        Shape::Handle => json!({"handle": 0}),
        Shape::Dim3 => zeros(&["x", "y", "z"]),
        Shape::EngineId => zeros(&["uCode", "Major", "Minor", "Stepping"]),
        Shape::EngineVersion => zeros(&["uCodeSDMA", "uCodeRes"]),
        Shape::Capability => zeros(&CAPABILITY_BITS),
        Shape::Visibility => zeros(&["hsa", "hip", "rccl", "rocdecode"]),
        Shape::Uuid => json!({"value": 0}),
        Shape::List => json!([]),
    }
}

/// Whether `v` has the shape `shape` (an object of the right kind, with its keys).
fn fits(v: &Value, shape: Shape) -> bool {
    match (shape, v) {
        (Shape::Int, Value::Number(_)) | (Shape::Text, Value::String(_)) => true,
        (Shape::List, Value::Array(_)) => true,
        (Shape::Int | Shape::Text | Shape::List, _) => false,
        (_, Value::Object(o)) => match neutral(shape) {
            Value::Object(want) => want.keys().all(|k| o.contains_key(k)),
            _ => false,
        },
        _ => false,
    }
}

/// What a row of `rocpd_info_agent` already says, used where the JSON lacks it.
#[derive(Debug, Clone, Default)]
pub struct RowFacts<'a> {
    /// The agent's id (absolute index): `id.handle` and `node_id`.
    pub id: i64,
    /// `"CPU"` or `"GPU"`: `type` (1 or 2).
    pub agent_type: &'a str,
    /// `logical_node_id`.
    pub logical_index: i64,
    /// `logical_node_type_id`.
    pub type_index: i64,
    /// The names.
    pub name: &'a str,
    /// Model name.
    pub model_name: &'a str,
    /// Vendor name.
    pub vendor_name: &'a str,
    /// Product name.
    pub product_name: &'a str,
}

/// The agent JSON `extdata` with every key of [`FIELDS`]: keys present with the right shape are
/// kept (so are keys the SDK does not know), a key missing or of another shape gets the row's
/// fact where there is one, else its neutral value. Text that is not a JSON object is treated as
/// `{}`.
pub fn complete(extdata: &str, row: &RowFacts) -> String {
    let mut obj: Map<String, Value> = match serde_json::from_str(extdata) {
        Ok(Value::Object(o)) => o,
        _ => Map::new(),
    };
    let fact = |key: &str| -> Option<Value> {
        let text = |s: &str| (!s.is_empty()).then(|| json!(s));
        match key {
            "id" => Some(json!({"handle": row.id})),
            "type" => match row.agent_type {
                "CPU" => Some(json!(1)),
                "GPU" => Some(json!(2)),
                _ => None,
            },
            "node_id" => Some(json!(row.id)),
            "logical_node_id" => Some(json!(row.logical_index)),
            "logical_node_type_id" => Some(json!(row.type_index)),
            "name" => text(row.name),
            "model_name" => text(row.model_name),
            "vendor_name" => text(row.vendor_name),
            "product_name" => text(row.product_name),
            _ => None,
        }
    };
    for (key, shape) in FIELDS {
        if obj.get(key).is_some_and(|v| fits(v, shape)) {
            continue;
        }
        let value = fact(key).unwrap_or_else(|| neutral(shape));
        obj.insert(key.to_string(), value);
    }
    Value::Object(obj).to_string()
}

/// The keys of [`FIELDS`] that `extdata` lacks or has in another shape (empty when complete).
pub fn missing(extdata: &str) -> Vec<&'static str> {
    let v: Value = serde_json::from_str(extdata).unwrap_or(Value::Null);
    FIELDS
        .iter()
        .filter(|(k, shape)| !v.get(*k).is_some_and(|x| fits(x, *shape)))
        .map(|(k, _)| *k)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_agent_gets_every_key_with_the_row_facts() {
        let row = RowFacts {
            id: 3,
            agent_type: "GPU",
            logical_index: 2,
            type_index: 1,
            name: "sm_90",
            ..RowFacts::default()
        };
        let text = complete("{}", &row);
        assert!(missing(&text).is_empty(), "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["id"]["handle"], 3);
        assert_eq!(v["type"], 2);
        assert_eq!(v["node_id"], 3);
        assert_eq!(v["logical_node_type_id"], 1);
        assert_eq!(v["name"], "sm_90");
        assert_eq!(v["vendor_name"], "");
        assert_eq!(v["capability"]["DebugSupportedFirmware"], 0);
        assert_eq!(v["mem_banks"], json!([]));
        assert_eq!(v.as_object().unwrap().len(), FIELDS.len());
    }

    #[test]
    fn known_values_and_extra_keys_are_kept_and_wrong_shapes_replaced() {
        let text = complete(
            r#"{"cu_count":132,"uuid":"GPU-1234","cuda_uuid":"GPU-1234","workgroup_max_dim":{"x":1024,"y":1024,"z":64}}"#,
            &RowFacts::default(),
        );
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["cu_count"], 132);
        assert_eq!(v["cuda_uuid"], "GPU-1234");
        assert_eq!(v["uuid"], json!({"value": 0}));
        assert_eq!(v["workgroup_max_dim"]["z"], 64);
        assert_eq!(missing(r#"{"cu_count":1}"#).len(), FIELDS.len() - 1);
    }
}
