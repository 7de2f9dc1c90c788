//! rocpd → rocprofv3 JSON layout.

use rocprof_rocpd::format::OutputFormat;
use rocprof_rocpd::ConvertOptions;
use rocprof_testkit::rocpd::*;
use serde_json::Value;

#[test]
fn json_has_rocprofv3_layout_and_records() {
    let tmp = tempdir();
    let db = full_db(&tmp.path().join("a.db"), 100, 4);
    let out = tmp.path().join("out");
    convert_to(
        &[&db],
        &out,
        &[OutputFormat::Json],
        &ConvertOptions::default(),
    );
    let text = read(&out, "out_results.json");
    assert!(
        !text.contains('\n') && !text.contains(": "),
        "compact like RapidJSON's writer"
    );
    let keys = [
        "\"metadata\":",
        "\"agents\":",
        "\"counters\":",
        "\"strings\":",
        "\"code_objects\":",
        "\"kernel_symbols\":",
        "\"host_functions\":",
        "\"summary\":",
        "\"callback_records\":",
        "\"buffer_records\":",
    ];
    let mut at = 0;
    for k in keys {
        at += text[at..]
            .find(k)
            .unwrap_or_else(|| panic!("{k} missing or out of rocprofv3's key order"));
    }
    let v: Value = serde_json::from_str(&text).expect("valid JSON");
    let procs = v["rocprofiler-sdk-tool"].as_array().expect("array");
    assert_eq!(procs.len(), 1);
    let p = &procs[0];
    assert_eq!(p["metadata"]["pid"], 100);
    assert_eq!(
        p["metadata"]["command"],
        serde_json::json!(["./app", "--flag"])
    );
    assert_eq!(p["metadata"]["node"]["hostname"], "testhost");
    assert_eq!(p["agents"].as_array().map(Vec::len), Some(2));
    assert_eq!(p["counters"][0]["name"], "SQ_WAVES");
    assert_eq!(p["kernel_symbols"].as_array().map(Vec::len), Some(2));
    let br = &p["buffer_records"];
    let kd = br["kernel_dispatch"].as_array().expect("dispatches");
    assert_eq!(kd.len(), 3);
    assert_eq!(json_names(p, &kd[0]).0, "KERNEL_DISPATCH");
    assert_eq!(kd[1]["dispatch_info"]["kernel_id"], 11);
    assert_eq!(kd[0]["dispatch_info"]["grid_size"]["x"], 1024);
    let hip = br["hip_api"].as_array().expect("hip");
    assert_eq!(hip.len(), 3);
    assert_eq!(
        json_names(p, &hip[2]),
        ("HIP_RUNTIME_API_EXT", "hipLaunchKernel")
    );
    assert_eq!(hip[2]["correlation_id"]["internal"], 3);
    assert_eq!(br["marker_api"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        p["strings"]["marker_api"],
        serde_json::json!([{"key": 4, "value": "checkpoint \"A\""}])
    );
    assert_eq!(br["memory_copy"][0]["bytes"], 4096);
    assert_eq!(
        json_names(p, &br["memory_copy"][0]).1,
        "MEMORY_COPY_HOST_TO_DEVICE"
    );
    let allocs = br["memory_allocation"].as_array().expect("allocs");
    assert_eq!(allocs.len(), 2);
    assert_eq!(allocs[0]["address"], "0x00007f0000001000");
    assert_eq!(json_names(p, &allocs[1]).1, "MEMORY_ALLOCATION_FREE");
    assert_eq!(br["scratch_memory"][0]["flags"], 2);
    assert_eq!(br["rccl_api"], serde_json::json!([]));
    let cc = p["callback_records"]["counter_collection"]
        .as_array()
        .expect("counters");
    assert_eq!(cc.len(), 3);
    assert_eq!(
        cc[0]["records"],
        serde_json::json!([{"counter_id": {"handle": 9}, "value": 5.0}])
    );
    assert!(
        text.contains("\"value\":5.0"),
        "doubles print like RapidJSON"
    );
    assert_eq!(cc[2]["dispatch_data"]["dispatch_info"]["dispatch_id"], 3);
    assert_eq!(cc[2]["stream_id"]["handle"], 0);
    assert_eq!(
        listing(&out),
        vec!["out_results.json".to_owned()],
        "spool files are gone"
    );
}

#[test]
fn several_databases_give_one_document_in_guid_order() {
    let tmp = tempdir();
    let b = full_db(&tmp.path().join("b.db"), 200, 5);
    let a = full_db(&tmp.path().join("a.db"), 100, 4);
    let out = tmp.path().join("out");
    convert_to(
        &[&b, &a],
        &out,
        &[OutputFormat::Json, OutputFormat::Csv],
        &ConvertOptions::default(),
    );
    let v: Value = serde_json::from_str(&read(&out, "out_results.json")).expect("valid JSON");
    let pids: Vec<i64> = v["rocprofiler-sdk-tool"]
        .as_array()
        .expect("array")
        .iter()
        .map(|p| p["metadata"]["pid"].as_i64().expect("pid"))
        .collect();
    assert_eq!(pids, vec![100, 200]);
    let hip = read(&out, "out_hip_api_trace.csv");
    let pids: Vec<&str> = hip
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(2).expect("pid"))
        .collect();
    assert_eq!(pids, vec!["100", "100", "100", "200", "200", "200"]);
}
