//! The hand-written CUPTI record prefixes against the real CUDA 13 headers: a small C program
//! prints `offsetof` and `sizeof` of every field the tool reads, compared with the Rust
//! structs. The headers come from `tests/prereq/cupti_headers.sh` (into
//! `target/cupti-headers`); the test is skipped with a note only if they cannot be fetched.

use std::mem::{offset_of, size_of_val};
use std::path::{Path, PathBuf};
use std::process::Command;

use rocprof_cuda_tool::records::*;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn headers() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("CUPTI_HEADERS") {
        return Some(PathBuf::from(d));
    }
    let dest = root().join("target/cupti-headers");
    if !dest.join("cupti.h").exists() {
        let ok = Command::new("sh")
            .arg(root().join("tests/prereq/cupti_headers.sh"))
            .arg(&dest)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return None;
        }
    }
    dest.join("cupti.h").exists().then_some(dest)
}

/// `(C type, field path as C writes it, rust offset, rust size)`.
fn expected() -> Vec<(&'static str, &'static str, usize, usize)> {
    let k = Kernel {
        kind: 0,
        cache_config: 0,
        shared_memory_config: 0,
        registers_per_thread: 0,
        partitioned_global_cache_requested: 0,
        partitioned_global_cache_executed: 0,
        start: 0,
        end: 0,
        completed: 0,
        device_id: 0,
        context_id: 0,
        stream_id: 0,
        grid_x: 0,
        grid_y: 0,
        grid_z: 0,
        block_x: 0,
        block_y: 0,
        block_z: 0,
        static_shared_memory: 0,
        dynamic_shared_memory: 0,
        local_memory_per_thread: 0,
        local_memory_total: 0,
        correlation_id: 0,
        grid_id: 0,
        name: std::ptr::null(),
    };
    macro_rules! f {
        ($v:ident, $t:ty, $c:literal, $r:ident) => {
            ($c, stringify!($r), offset_of!($t, $r), size_of_val(&$v.$r))
        };
    }
    let mut v = vec![
        f!(k, Kernel, "CUpti_ActivityKernel13", kind),
        f!(k, Kernel, "CUpti_ActivityKernel13", registers_per_thread),
        f!(k, Kernel, "CUpti_ActivityKernel13", start),
        f!(k, Kernel, "CUpti_ActivityKernel13", end),
        f!(k, Kernel, "CUpti_ActivityKernel13", device_id),
        f!(k, Kernel, "CUpti_ActivityKernel13", context_id),
        f!(k, Kernel, "CUpti_ActivityKernel13", stream_id),
        f!(k, Kernel, "CUpti_ActivityKernel13", grid_x),
        f!(k, Kernel, "CUpti_ActivityKernel13", grid_y),
        f!(k, Kernel, "CUpti_ActivityKernel13", grid_z),
        f!(k, Kernel, "CUpti_ActivityKernel13", block_x),
        f!(k, Kernel, "CUpti_ActivityKernel13", block_y),
        f!(k, Kernel, "CUpti_ActivityKernel13", block_z),
        f!(k, Kernel, "CUpti_ActivityKernel13", static_shared_memory),
        f!(k, Kernel, "CUpti_ActivityKernel13", dynamic_shared_memory),
        f!(k, Kernel, "CUpti_ActivityKernel13", local_memory_per_thread),
        f!(k, Kernel, "CUpti_ActivityKernel13", correlation_id),
        f!(k, Kernel, "CUpti_ActivityKernel13", name),
    ];
    let m = Memcpy {
        kind: 0,
        copy_kind: 0,
        src_kind: 0,
        dst_kind: 0,
        flags: 0,
        bytes: 0,
        start: 0,
        end: 0,
        device_id: 0,
        context_id: 0,
        stream_id: 0,
        correlation_id: 0,
        runtime_correlation_id: 0,
    };
    for e in [
        f!(m, Memcpy, "CUpti_ActivityMemcpy7", kind),
        f!(m, Memcpy, "CUpti_ActivityMemcpy7", copy_kind),
        f!(m, Memcpy, "CUpti_ActivityMemcpy7", bytes),
        f!(m, Memcpy, "CUpti_ActivityMemcpy7", start),
        f!(m, Memcpy, "CUpti_ActivityMemcpy7", end),
        f!(m, Memcpy, "CUpti_ActivityMemcpy7", device_id),
        f!(m, Memcpy, "CUpti_ActivityMemcpy7", stream_id),
        f!(m, Memcpy, "CUpti_ActivityMemcpy7", correlation_id),
        f!(m, Memcpy, "CUpti_ActivityMemcpy7", runtime_correlation_id),
    ] {
        v.push(e);
    }
    let s = Memset {
        kind: 0,
        value: 0,
        bytes: 0,
        start: 0,
        end: 0,
        device_id: 0,
        context_id: 0,
        stream_id: 0,
        correlation_id: 0,
        flags: 0,
        memory_kind: 0,
    };
    for e in [
        f!(s, Memset, "CUpti_ActivityMemset5", kind),
        f!(s, Memset, "CUpti_ActivityMemset5", bytes),
        f!(s, Memset, "CUpti_ActivityMemset5", start),
        f!(s, Memset, "CUpti_ActivityMemset5", end),
        f!(s, Memset, "CUpti_ActivityMemset5", device_id),
        f!(s, Memset, "CUpti_ActivityMemset5", stream_id),
        f!(s, Memset, "CUpti_ActivityMemset5", correlation_id),
    ] {
        v.push(e);
    }
    let a = Api {
        kind: 0,
        cbid: 0,
        start: 0,
        end: 0,
        process_id: 0,
        thread_id: 0,
        correlation_id: 0,
        return_value: 0,
    };
    for e in [
        f!(a, Api, "CUpti_ActivityAPI", kind),
        f!(a, Api, "CUpti_ActivityAPI", cbid),
        f!(a, Api, "CUpti_ActivityAPI", start),
        f!(a, Api, "CUpti_ActivityAPI", end),
        f!(a, Api, "CUpti_ActivityAPI", thread_id),
        f!(a, Api, "CUpti_ActivityAPI", correlation_id),
    ] {
        v.push(e);
    }
    v.push(("CUpti_ActivityAPI", "sizeof", 0, std::mem::size_of::<Api>()));
    let y = Memory {
        kind: 0,
        memory_operation_type: 0,
        memory_kind: 0,
        correlation_id: 0,
        address: 0,
        bytes: 0,
        timestamp: 0,
        pc: 0,
        process_id: 0,
        device_id: 0,
        context_id: 0,
        stream_id: 0,
    };
    for e in [
        f!(y, Memory, "CUpti_ActivityMemory4", kind),
        f!(y, Memory, "CUpti_ActivityMemory4", memory_operation_type),
        f!(y, Memory, "CUpti_ActivityMemory4", correlation_id),
        f!(y, Memory, "CUpti_ActivityMemory4", address),
        f!(y, Memory, "CUpti_ActivityMemory4", bytes),
        f!(y, Memory, "CUpti_ActivityMemory4", timestamp),
        f!(y, Memory, "CUpti_ActivityMemory4", device_id),
        f!(y, Memory, "CUpti_ActivityMemory4", stream_id),
    ] {
        v.push(e);
    }
    let k = Marker {
        kind: 0,
        flags: 0,
        timestamp: 0,
        id: 0,
        object_kind: 0,
        object_process_id: 0,
        object_thread_id: 0,
        object_stream_id: 0,
        pad: 0,
        name: std::ptr::null(),
        domain: std::ptr::null(),
    };
    for e in [
        f!(k, Marker, "CUpti_ActivityMarker2", kind),
        f!(k, Marker, "CUpti_ActivityMarker2", flags),
        f!(k, Marker, "CUpti_ActivityMarker2", timestamp),
        f!(k, Marker, "CUpti_ActivityMarker2", id),
        f!(k, Marker, "CUpti_ActivityMarker2", object_kind),
        f!(k, Marker, "CUpti_ActivityMarker2", object_thread_id),
        f!(k, Marker, "CUpti_ActivityMarker2", name),
        f!(k, Marker, "CUpti_ActivityMarker2", domain),
    ] {
        v.push(e);
    }
    v.push((
        "CUpti_ActivityMarker2",
        "sizeof",
        0,
        std::mem::size_of::<Marker>(),
    ));
    v
}

/// The C field name for a Rust field name.
fn c_field(rust: &str) -> String {
    match rust {
        "registers_per_thread" => "registersPerThread".into(),
        "pc" => "PC".into(),
        "object_thread_id" => "objectId.pt.threadId".into(),
        other => {
            let mut out = String::new();
            let mut up = false;
            for ch in other.chars() {
                if ch == '_' {
                    up = true;
                } else if up {
                    out.extend(ch.to_uppercase());
                    up = false;
                } else {
                    out.push(ch);
                }
            }
            out
        }
    }
}

#[test]
fn records_match_the_cupti_headers() {
    let Some(inc) = headers() else {
        println!("NOTE: CUPTI headers unavailable (tests/prereq/cupti_headers.sh failed); layout test skipped");
        return;
    };
    let exp = expected();
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <cupti.h>\nint main(void){\n",
    );
    for (ty, field, _, _) in &exp {
        if *field == "sizeof" {
            c += &format!("printf(\"{ty} sizeof 0 %zu\\n\", sizeof({ty}));\n");
        } else {
            let cf = c_field(field);
            c += &format!(
                "printf(\"{ty} {field} %zu %zu\\n\", offsetof({ty}, {cf}), sizeof((({ty}*)0)->{cf}));\n"
            );
        }
    }
    c += "return 0;}\n";
    let dir = tempfile_dir();
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&src, c).unwrap();
    let out = Command::new("gcc")
        .arg("-I")
        .arg(&inc)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("gcc runs");
    assert!(
        out.status.success(),
        "gcc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(&exe).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), exp.len());
    for ((ty, field, off, size), line) in exp.iter().zip(lines) {
        let want = format!("{ty} {field} {off} {size}");
        if *field == "sizeof" {
            // The Rust struct is the whole record for these two.
            assert_eq!(line, want, "size of {ty}");
        } else {
            assert_eq!(line, want, "{ty}.{field}");
        }
    }
}

fn tempfile_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("cuda-tool-layout-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The counter APIs' parameter structs against the real headers: each `*_STRUCT_SIZE` (what
/// CUPTI checks `structSize` against) and `sizeof` equal the Rust struct's.
#[test]
fn profiler_params_match_the_cupti_headers() {
    use rocprof_cuda_tool::profiler::*;
    let Some(inc) = headers() else {
        println!("NOTE: CUPTI headers unavailable; profiler layout test skipped");
        return;
    };
    macro_rules! rows {
        ($(($t:ty, $c:literal)),* $(,)?) => {
            vec![$(($c, <$t as Sized_>::struct_size_for(u32::MAX), std::mem::size_of::<$t>())),*]
        };
    }
    let exp: Vec<(&str, usize, usize)> = rows![
        (ProfilerInitialize, "CUpti_Profiler_Initialize_Params"),
        (GetChipName, "CUpti_Device_GetChipName_Params"),
        (
            GetCounterAvailability,
            "CUpti_Profiler_GetCounterAvailability_Params"
        ),
        (HostInitialize, "CUpti_Profiler_Host_Initialize_Params"),
        (HostDeinitialize, "CUpti_Profiler_Host_Deinitialize_Params"),
        (
            HostConfigAddMetrics,
            "CUpti_Profiler_Host_ConfigAddMetrics_Params"
        ),
        (
            HostGetConfigImageSize,
            "CUpti_Profiler_Host_GetConfigImageSize_Params"
        ),
        (
            HostGetConfigImage,
            "CUpti_Profiler_Host_GetConfigImage_Params"
        ),
        (
            HostGetNumOfPasses,
            "CUpti_Profiler_Host_GetNumOfPasses_Params"
        ),
        (
            HostEvaluateToGpuValues,
            "CUpti_Profiler_Host_EvaluateToGpuValues_Params"
        ),
        (
            HostGetBaseMetrics,
            "CUpti_Profiler_Host_GetBaseMetrics_Params"
        ),
        (
            HostGetMetricProperties,
            "CUpti_Profiler_Host_GetMetricProperties_Params"
        ),
        (RpEnable, "CUpti_RangeProfiler_Enable_Params"),
        (RpObject, "CUpti_RangeProfiler_Start_Params"),
        (RpObject, "CUpti_RangeProfiler_Disable_Params"),
        (RpSetConfig, "CUpti_RangeProfiler_SetConfig_Params"),
        (RpStop, "CUpti_RangeProfiler_Stop_Params"),
        (RpDecodeData, "CUpti_RangeProfiler_DecodeData_Params"),
        (
            RpGetCounterDataSize,
            "CUpti_RangeProfiler_GetCounterDataSize_Params"
        ),
        (
            RpCounterDataImageInitialize,
            "CUpti_RangeProfiler_CounterDataImage_Initialize_Params"
        ),
        (
            RpGetCounterDataInfo,
            "CUpti_RangeProfiler_GetCounterDataInfo_Params"
        ),
        (
            RpGetRangeInfo,
            "CUpti_RangeProfiler_CounterData_GetRangeInfo_Params"
        ),
        (PmEnable, "CUpti_PmSampling_Enable_Params"),
        (PmObject, "CUpti_PmSampling_Start_Params"),
        (PmSetConfig, "CUpti_PmSampling_SetConfig_Params"),
        (PmDecodeData, "CUpti_PmSampling_DecodeData_Params"),
        (
            PmGetCounterAvailability,
            "CUpti_PmSampling_GetCounterAvailability_Params"
        ),
        (
            PmGetCounterDataSize,
            "CUpti_PmSampling_GetCounterDataSize_Params"
        ),
        (
            PmCounterDataImageInitialize,
            "CUpti_PmSampling_CounterDataImage_Initialize_Params"
        ),
        (
            PmGetCounterDataInfo,
            "CUpti_PmSampling_GetCounterDataInfo_Params"
        ),
        (
            PmGetSampleInfo,
            "CUpti_PmSampling_CounterData_GetSampleInfo_Params"
        ),
    ];
    let body: String = exp
        .iter()
        .map(|(ty, _, _)| {
            format!("printf(\"{ty} %zu %zu\\n\", (size_t){ty}_STRUCT_SIZE, sizeof({ty}));\n")
        })
        .collect();
    let text = run_counter_c(&inc, "profiler", &body);
    for ((ty, size, sizeof), line) in exp.iter().zip(text.lines()) {
        assert_eq!(line, format!("{ty} {size} {sizeof}"), "{ty}");
    }
    assert_eq!(text.lines().count(), exp.len());
}

/// The structs that grew after CUDA 12.6 are declared only as far as the loaded CUPTI knows
/// them: their size for an older version ends at the older last field (the header's
/// `CUPTI_PROFILER_STRUCT_SIZE(T, field)`), and the newer fields count only from the version
/// that added them. CUDA 13.0's CUPTI refused a 13.1-sized `GetCounterAvailability` struct.
#[test]
fn grown_profiler_params_shrink_for_older_cupti() {
    use rocprof_cuda_tool::profiler::*;
    let Some(inc) = headers() else {
        println!("NOTE: CUPTI headers unavailable; profiler layout test skipped");
        return;
    };
    // (C type, last field for the older CUPTI, version that added the newer field, our sizes
    // just before and from that version).
    let rows: Vec<(&str, &str, u32, usize, usize)> = vec![
        (
            "CUpti_Profiler_GetCounterAvailability_Params",
            "pCounterAvailabilityImage",
            130100,
            GetCounterAvailability::struct_size_for(130001),
            GetCounterAvailability::struct_size_for(130100),
        ),
        (
            "CUpti_Profiler_Host_Initialize_Params",
            "pHostObject",
            130500,
            HostInitialize::struct_size_for(130400),
            HostInitialize::struct_size_for(130500),
        ),
        (
            "CUpti_Profiler_Host_GetMetricProperties_Params",
            "metricType",
            130500,
            HostGetMetricProperties::struct_size_for(130400),
            HostGetMetricProperties::struct_size_for(130500),
        ),
        (
            "CUpti_RangeProfiler_Enable_Params",
            "pRangeProfilerObject",
            130500,
            RpEnable::struct_size_for(130400),
            RpEnable::struct_size_for(130500),
        ),
        (
            "CUpti_PmSampling_SetConfig_Params",
            "triggerMode",
            130000,
            PmSetConfig::struct_size_for(28),
            PmSetConfig::struct_size_for(130000),
        ),
    ];
    let body: String = rows
        .iter()
        .map(|(ty, field, ..)| {
            format!(
                "printf(\"{ty} %zu %zu\\n\", (size_t)CUPTI_PROFILER_STRUCT_SIZE({ty}, {field}), (size_t){ty}_STRUCT_SIZE);\n"
            )
        })
        .collect();
    let text = run_counter_c(&inc, "grown", &body);
    for ((ty, _, since, older, newer), line) in rows.iter().zip(text.lines()) {
        assert_eq!(
            line,
            format!("{ty} {older} {newer}"),
            "{ty} (field added in {since})"
        );
        assert!(older < newer, "{ty}");
    }
    assert_eq!(text.lines().count(), rows.len());
}

/// Compiles and runs a C program that includes the counter API headers and whose `main` is
/// `body`; its standard output.
fn run_counter_c(inc: &Path, name: &str, body: &str) -> String {
    let c = format!(
        "#include <stdio.h>\n#include <stddef.h>\n#include <cupti.h>\n#include <cupti_target.h>\n\
         #include <cupti_profiler_target.h>\n#include <cupti_profiler_host.h>\n\
         #include <cupti_range_profiler.h>\n#include <cupti_pmsampling.h>\nint main(void){{\n{body}return 0;}}\n"
    );
    let dir = tempfile_dir().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe) = (dir.join("p.c"), dir.join("p"));
    std::fs::write(&src, c).unwrap();
    let out = Command::new("gcc")
        .arg("-I")
        .arg(inc)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("gcc runs");
    assert!(
        out.status.success(),
        "gcc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(Command::new(&exe).output().unwrap().stdout).unwrap()
}
