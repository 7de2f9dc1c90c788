//! `convert -f otf2` through the OTF2 library: the archive is read back with `otf2-print`
//! (Debian otf2-tools) and its locations, regions and Enter/Leave counts compared with the
//! database. OTF2 is built in wherever the library is installed (no feature flag); in a build
//! without it, `-f otf2` is a one-line error naming the fix.

use crate::rocpd_common;

#[cfg(have_otf2)]
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use rocpd_common::*;

/// `otf2-print` of an archive: (ENTER count per region name, LEAVE count, location names).
fn read_back(
    anchor: &Path,
) -> (
    std::collections::BTreeMap<String, usize>,
    usize,
    Vec<String>,
) {
    let out = Command::new("otf2-print")
        .arg(anchor)
        .output()
        .expect("otf2-print (Debian otf2-tools; installed by scripts/ci-deps.sh)");
    assert!(
        out.status.success(),
        "otf2-print failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut enters = std::collections::BTreeMap::new();
    let mut leaves = 0;
    for l in text.lines() {
        if l.starts_with("ENTER") || l.starts_with("LEAVE") {
            let name = l
                .split("Region: \"")
                .nth(1)
                .and_then(|r| r.rfind("\" <").map(|i| &r[..i]))
                .unwrap_or_else(|| panic!("no region in {l}"))
                .to_owned();
            if l.starts_with("ENTER") {
                *enters.entry(name).or_insert(0) += 1;
            } else {
                leaves += 1;
            }
        }
    }
    let defs = Command::new("otf2-print")
        .args(["-G"])
        .arg(anchor)
        .output()
        .expect("otf2-print -G");
    let defs = String::from_utf8_lossy(&defs.stdout).into_owned();
    let locations = defs
        .lines()
        .filter(|l| l.starts_with("LOCATION "))
        .filter_map(|l| l.split("Name: \"").nth(1))
        .filter_map(|r| r.split('"').next())
        .map(str::to_owned)
        .collect();
    (enters, leaves, locations)
}

#[cfg(have_otf2)]
#[test]
fn archive_reads_back_with_the_databases_events() {
    let dir = tempdir();
    let db = full_db(&dir.path().join("a.db"), 4242, 1);
    let out = dir.path().join("out");
    convert(&[&db], &out, &["otf2"], &[]);
    assert_eq!(
        listing(&out),
        vec!["out_results", "out_results.def", "out_results.otf2"]
    );
    let (enters, leaves, locations) = read_back(&out.join("out_results.otf2"));
    let want: BTreeMap<String, usize> = [
        ("hipLaunchKernel", 3),
        ("void add<float>(float*, int)", 2),
        ("mul(float*, int)", 1),
        ("checkpoint \"A\"", 1),
        ("MEMORY_COPY_HOST_TO_DEVICE", 1),
        ("MEMORY_ALLOCATION_ALLOCATE", 1),
        ("MEMORY_ALLOCATION_FREE", 1),
        ("SCRATCH_MEMORY_ALLOC", 1),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(enters, want);
    assert_eq!(leaves, want.values().sum::<usize>());
    for l in [
        "Thread 4242",
        "Compute on GPU Agent-1, Queue 0",
        "Copy to GPU Agent-1",
    ] {
        assert!(locations.iter().any(|x| x == l), "{l} not in {locations:?}");
    }
}

/// A location with more events than one chunk holds is written to its file while it is still
/// open (memory stays at one chunk per location, not the whole location's events), and the
/// archive still reads back whole.
#[cfg(have_otf2)]
#[test]
fn a_long_location_is_flushed_to_its_file_while_open_and_reads_back_whole() {
    use rocprof_otf2::{Archive, GroupType, LocationType, Paradigm, RegionRole, FILE_BUFFER};
    let dir = tempdir();
    let mut archive = Archive::create(dir.path(), "big", FILE_BUFFER).expect("archive");
    let mut w = archive.evt_writer(0).expect("writer");
    // About 10 bytes per event with a new timestamp each: 3 chunks' worth.
    let pairs = 3 * FILE_BUFFER / 20;
    for i in 0..pairs {
        w.enter(10 * i + 1, 0).expect("enter");
        w.leave(10 * i + 5, 0).expect("leave");
    }
    let file = dir.path().join("big").join("0.evt");
    let on_disk = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    assert!(
        on_disk >= FILE_BUFFER,
        "{} holds {on_disk} bytes while the location is open: its chunks stay in memory",
        file.display()
    );
    assert_eq!(
        archive.close_evt_writer(w).expect("close writer"),
        2 * pairs
    );
    archive.finish_events(&[0]).expect("finish events");
    {
        let mut g = archive.global_defs().expect("defs");
        g.clock(0, 10 * pairs + 10).expect("clock");
        for (r, s) in ["root", "machine", "Process 1", "Thread 1", "kernel"]
            .iter()
            .enumerate()
        {
            g.string(r as u32, s).expect("string");
        }
        g.system_tree_node(0, 0, 1, rocprof_otf2::UNDEFINED_SYSTEM_TREE_NODE)
            .expect("node");
        g.location_group(0, 2, GroupType::Process, 0, u32::MAX)
            .expect("group");
        g.location(0, 3, LocationType::CpuThread, 2 * pairs, 0)
            .expect("location");
        g.region(0, 4, RegionRole::Function, Paradigm::User)
            .expect("region");
    }
    archive.close().expect("close");
    let (enters, leaves, locations) = read_back(&dir.path().join("big.otf2"));
    assert_eq!(enters.get("kernel"), Some(&(pairs as usize)));
    assert_eq!(leaves, pairs as usize);
    assert_eq!(locations, ["Thread 1"]);
}

#[cfg(not(have_otf2))]
#[test]
fn without_otf2_in_the_build_it_is_a_clear_error() {
    let dir = tempdir();
    let db = full_db(&dir.path().join("a.db"), 4242, 1);
    let out = run(&[
        "convert",
        "-i",
        db.to_str().unwrap(),
        "-f",
        "otf2",
        "-d",
        dir.path().join("o").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("apt-get install libopen-trace-format2-dev"),
        "{err}"
    );
    assert!(err.contains("ROCPROF_ATTACH_OTF2=on"), "{err}");
    assert!(err.contains(rocprof_otf2::BUILD_NOTE), "{err}");
    assert!(!dir.path().join("o").join("out_results.otf2").exists());
}

/// The message a build without OTF2 gives (compiled in every build, so checked here too): one
/// line with why, the package to install, the upstream source and the rebuild command.
#[test]
fn the_message_of_a_build_without_otf2_says_how_to_get_it() {
    let m = rocprof_attach::rocpd::otf2::missing_message("the OTF2 library was not found (x)");
    assert_eq!(m.lines().count(), 1, "{m}");
    for want in [
        "built without OTF2 support (the OTF2 library was not found (x))",
        "apt-get install libopen-trace-format2-dev",
        "https://www.vi-hps.org/projects/score-p",
        "pkg-config otf2",
        "ROCPROF_ATTACH_OTF2=on cargo install --path .",
        "pip install .",
    ] {
        assert!(m.contains(want), "{want:?} not in {m}");
    }
}

/// Whether the OTF2 library and its headers are installed here, found as the build script looks
/// for them (pkg-config, otf2-config, the Debian paths).
fn otf2_installed() -> bool {
    let ok = |cmd: &str, args: &[&str]| {
        Command::new(cmd)
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    ok("pkg-config", &["--exists", "otf2"])
        || ok("otf2-config", &["--libs"])
        || Path::new("/usr/include/otf2/otf2.h").exists()
}

/// OTF2 is on by default: wherever the library is installed, a build without feature flags (the
/// suite runs without `--features otf2`, as `cargo install --path .` and `pip install .` build)
/// converts to OTF2 with the real binary, and `otf2-print` reads the archive back. Only an
/// explicit ROCPROF_ATTACH_OTF2=off, or a static build without the library's static archive,
/// may leave it out, and the build then says why.
#[test]
fn a_default_build_converts_to_otf2_wherever_the_library_is_installed() {
    if !otf2_installed() {
        eprintln!("skipped: the OTF2 library is not installed here");
        return;
    }
    if !rocprof_otf2::AVAILABLE {
        let note = rocprof_otf2::BUILD_NOTE;
        assert!(
            note.contains("ROCPROF_ATTACH_OTF2=off") || note.contains("crt-static"),
            "the OTF2 library is installed but this build left it out: {note}"
        );
        return;
    }
    assert_eq!(
        cfg!(have_otf2),
        rocprof_otf2::AVAILABLE,
        "rocprof-otf2 has it, so rocprof-attach must"
    );
    let dir = tempdir();
    let db = full_db(&dir.path().join("a.db"), 4242, 1);
    let out = dir.path().join("out");
    convert(&[&db], &out, &["otf2"], &[]);
    let (enters, leaves, locations) = read_back(&out.join("out_results.otf2"));
    assert_eq!(enters.get("hipLaunchKernel"), Some(&3), "{enters:?}");
    assert_eq!(leaves, enters.values().sum::<usize>());
    assert!(
        locations.iter().any(|l| l == "Thread 4242"),
        "{locations:?}"
    );
}
