//! `agent_info.csv`, as rocprofv3 writes it beside its CSV traces: one row per agent, 53 columns,
//! agents sorted by node id (`../shared/spec/output-formats.md`, section 2.3).
//!
//! The values come from the agent JSON that rocpd keeps in `rocpd_info_agent.extdata` (the
//! fields of `rocprofiler_agent_v0_t`, keyed by the lower-case column name); the row's own
//! columns fill in the names and indices when the JSON lacks them, and any other missing value
//! is 0 (a database written by another tool may carry `extdata = '{}'`).

use crate::numfmt::Line;
use crate::reader::AgentInfo;
use serde_json::Value;

/// The file name suffix: `<name>_agent_info.csv`.
pub const FILE_SUFFIX: &str = "agent_info";

/// The 53 columns in order; each is an integer taken from the agent JSON unless named in
/// `cell`.
pub const COLUMNS: [&str; 53] = [
    "Node_Id",
    "Logical_Node_Id",
    "Agent_Type",
    "Cpu_Cores_Count",
    "Simd_Count",
    "Cpu_Core_Id_Base",
    "Simd_Id_Base",
    "Max_Waves_Per_Simd",
    "Lds_Size_In_Kb",
    "Gds_Size_In_Kb",
    "Num_Gws",
    "Wave_Front_Size",
    "Num_Xcc",
    "Cu_Count",
    "Array_Count",
    "Num_Shader_Banks",
    "Simd_Arrays_Per_Engine",
    "Cu_Per_Simd_Array",
    "Simd_Per_Cu",
    "Max_Slots_Scratch_Cu",
    "Gfx_Target_Version",
    "Vendor_Id",
    "Device_Id",
    "Location_Id",
    "Domain",
    "Drm_Render_Minor",
    "Num_Sdma_Engines",
    "Num_Sdma_Xgmi_Engines",
    "Num_Sdma_Queues_Per_Engine",
    "Num_Cp_Queues",
    "Max_Engine_Clk_Ccompute",
    "Max_Engine_Clk_Fcompute",
    "Sdma_Fw_Version",
    "Fw_Version",
    "Capability",
    "Cu_Per_Engine",
    "Max_Waves_Per_Cu",
    "Family_Id",
    "Workgroup_Max_Size",
    "Grid_Max_Size",
    "Local_Mem_Size",
    "Hive_Id",
    "Gpu_Id",
    "Workgroup_Max_Dim_X",
    "Workgroup_Max_Dim_Y",
    "Workgroup_Max_Dim_Z",
    "Grid_Max_Dim_X",
    "Grid_Max_Dim_Y",
    "Grid_Max_Dim_Z",
    "Name",
    "Vendor_Name",
    "Product_Name",
    "Model_Name",
];

/// The header line (every name quoted, as rocprofv3's encoder writes strings).
pub fn header() -> Vec<u8> {
    let mut line = Line::default();
    line.start();
    for c in COLUMNS {
        line.s(c);
    }
    line.end().to_vec()
}

/// The rows of `agents`, sorted by node id.
pub fn rows<'a>(agents: impl IntoIterator<Item = &'a AgentInfo>) -> Vec<Vec<u8>> {
    let mut parsed: Vec<(i64, &AgentInfo, Value)> = agents
        .into_iter()
        .map(|a| {
            let v = serde_json::from_str(&a.extdata).unwrap_or(Value::Null);
            let node = int_at(&v, "node_id").unwrap_or(a.absolute_index);
            (node, a, v)
        })
        .collect();
    parsed.sort_by_key(|(node, a, _)| (*node, a.absolute_index));
    let mut line = Line::default();
    parsed
        .iter()
        .map(|(node, a, v)| {
            line.start();
            for c in COLUMNS {
                cell(&mut line, c, *node, a, v);
            }
            line.end().to_vec()
        })
        .collect()
}

/// One cell of column `c`.
fn cell(line: &mut Line, c: &str, node: i64, a: &AgentInfo, v: &Value) {
    let key = c.to_ascii_lowercase();
    match c {
        "Node_Id" => line.i(node),
        "Logical_Node_Id" => line.i(int_at(v, &key).unwrap_or(a.logical_index)),
        "Agent_Type" => line.s(match a.agent_type.as_str() {
            t @ ("CPU" | "GPU") => t,
            _ => "UNK",
        }),
        "Name" => line.s(str_at(v, &key).unwrap_or(&a.name)),
        "Vendor_Name" => line.s(str_at(v, &key).unwrap_or(&a.vendor_name)),
        "Product_Name" => line.s(str_at(v, &key).unwrap_or(&a.product_name)),
        "Model_Name" => line.s(str_at(v, &key).unwrap_or(&a.model_name)),
        _ => {
            // `Workgroup_Max_Dim_X` is `workgroup_max_dim.x` in the agent JSON.
            let dim = ["_x", "_y", "_z"]
                .iter()
                .find(|s| key.ends_with(*s))
                .and_then(|s| {
                    let base = &key[..key.len() - 2];
                    v.get(base).and_then(|d| int_of(d.get(&s[1..])?))
                });
            line.i(dim.or_else(|| int_at(v, &key)).unwrap_or(0))
        }
    };
}

/// An integer field; a bitfield union (`fw_version`, `capability`) is its raw `Value`.
fn int_at(v: &Value, key: &str) -> Option<i64> {
    int_of(v.get(key)?)
}

fn int_of(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| n.as_u64().map(|u| u as i64)),
        Value::Bool(b) => Some(*b as i64),
        Value::Object(o) => o.get("Value").or_else(|| o.get("value")).and_then(int_of),
        _ => None,
    }
}

fn str_at<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key)?.as_str().filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(extdata: &str) -> AgentInfo {
        AgentInfo {
            absolute_index: 3,
            logical_index: 1,
            agent_type: "GPU".into(),
            name: "gfx942".into(),
            product_name: "row product".into(),
            extdata: extdata.into(),
            ..AgentInfo::default()
        }
    }

    #[test]
    fn fields_come_from_the_agent_json_then_the_row() {
        let a = agent(
            r#"{"node_id":2,"cu_count":304,"fw_version":{"Value":77},"workgroup_max_dim":{"x":1024,"y":512,"z":256},"vendor_name":"AMD"}"#,
        );
        let b = agent("{}");
        let rows = rows([&a, &b]);
        let text: Vec<String> = rows
            .iter()
            .map(|r| String::from_utf8(r.clone()).unwrap())
            .collect();
        // Sorted by node id: the agent without JSON falls back to its absolute index (3).
        assert!(text[0].starts_with("2,1,\"GPU\",0,"), "{}", text[0]);
        assert!(text[1].starts_with("3,1,\"GPU\",0,"), "{}", text[1]);
        let cells: Vec<&str> = text[0].trim_end().split(',').collect();
        assert_eq!(cells.len(), 53);
        let at = |c: &str| cells[COLUMNS.iter().position(|x| *x == c).unwrap()];
        assert_eq!(at("Cu_Count"), "304");
        assert_eq!(at("Fw_Version"), "77");
        assert_eq!(at("Workgroup_Max_Dim_Y"), "512");
        assert_eq!(at("Vendor_Name"), "\"AMD\"");
        assert_eq!(at("Product_Name"), "\"row product\"");
        assert_eq!(at("Name"), "\"gfx942\"");
        assert_eq!(header().iter().filter(|&&b| b == b',').count(), 52);
    }
}
