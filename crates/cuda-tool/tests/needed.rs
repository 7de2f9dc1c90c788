//! The cdylib is loaded into someone else's process: it may need nothing beyond libc, libm,
//! libgcc_s and the dynamic loader (no libotf2 through rocprof-rocpd, no libcupti, no libcuda).

use std::process::Command;

#[test]
fn the_tool_library_needs_only_the_c_runtime() {
    let exe = std::env::current_exe().unwrap();
    let so = exe.parent().unwrap().join("librocprof_cuda_tool.so");
    assert!(so.exists(), "{} not built", so.display());
    let Ok(out) = Command::new("readelf").arg("-dW").arg(&so).output() else {
        println!("NOTE: readelf not found; DT_NEEDED check skipped");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let needed: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split('[').nth(1)?.split(']').next())
        .collect();
    assert!(!needed.is_empty(), "no DT_NEEDED found in: {text}");
    for n in &needed {
        let ok = ["libc.so", "libm.so", "libgcc_s.so", "ld-linux"]
            .iter()
            .any(|p| n.starts_with(p));
        assert!(ok, "{} needs {n} (all: {needed:?})", so.display());
    }
    let syms = Command::new("nm").arg("-D").arg(&so).output();
    if let Ok(s) = syms {
        let t = String::from_utf8_lossy(&s.stdout);
        assert!(
            t.contains(" T rocprof_attach_cuda_start"),
            "entry point not exported"
        );
        assert!(!t.contains("OTF2_"), "OTF2 symbols referenced");
    }
}
