//! Finding libraries and symbols in real processes, and the /proc readers they rely on.

use rocprof_engine::elf::{self, RemoteLibrary};
use rocprof_engine::procfs;
use rocprof_engine::Error;
use rocprof_testkit::lookup::{
    configure_lib, copy_into, register_lib, start_forking_target, start_target,
};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

const REGISTER: &str = "librocprofiler-register.so";
const ATTACH: &str = "rocprofiler_register_attach";

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn versioned_soname_lookup_matches_dlsym() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lib = copy_into(
        &register_lib(1, &[]),
        dir.path(),
        "librocprofiler-register.so.0.5.0",
    );
    let (target, addr) = start_target(&[s(&lib)], &[]);
    let remote = RemoteLibrary::locate(target.pid(), REGISTER).expect("locate");
    assert_eq!(remote.path, s(&lib));
    assert!(!remote.deleted);
    assert_eq!(Some(remote.symbol(ATTACH).expect("symbol")), addr);
    assert!(remote.symbol("rocprofiler_register_detach").is_ok());
    assert!(remote.build_id().is_some_and(|id| !id.is_empty()));
    // The versioned soname and the full path are accepted as names too.
    let by_soname =
        RemoteLibrary::locate(target.pid(), "librocprofiler-register.so.0").expect("soname");
    assert_eq!(by_soname.bias, remote.bias);
    let by_path = RemoteLibrary::locate(target.pid(), s(&lib)).expect("full path");
    assert_eq!(by_path.bias, remote.bias);
}

#[test]
fn full_path_name_must_match_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lib = copy_into(
        &register_lib(1, &[]),
        dir.path(),
        "librocprofiler-register.so.0.5.0",
    );
    let (target, _) = start_target(&[s(&lib)], &[]);
    let err = RemoteLibrary::locate(
        target.pid(),
        "/nonexistent/librocprofiler-register.so.0.5.0",
    )
    .unwrap_err();
    assert!(matches!(err, Error::Symbol(_)), "{err}");
}

#[test]
fn non_function_and_hidden_symbols_are_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lib = copy_into(
        &register_lib(1, &[]),
        dir.path(),
        "librocprofiler-register.so.0.5.0",
    );
    let (target, _) = start_target(&[s(&lib)], &[]);
    let remote = RemoteLibrary::locate(target.pid(), REGISTER).expect("locate");
    for name in [
        "rocprofiler_register_data",
        "rocprofiler_register_hidden",
        "no_such_function",
    ] {
        let err = remote.symbol(name).unwrap_err();
        assert!(matches!(err, Error::Symbol(_)), "{name}: {err}");
        assert!(err.to_string().contains(name), "{err}");
    }
}

#[test]
fn deleted_and_replaced_library_resolves_the_mapped_copy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lib = copy_into(
        &register_lib(1, &[]),
        dir.path(),
        "librocprofiler-register.so.0.5.0",
    );
    let (target, addr) = start_target(&[s(&lib)], &[]);
    std::fs::remove_file(&lib).expect("delete");
    copy_into(
        &register_lib(2, &[]),
        dir.path(),
        "librocprofiler-register.so.0.5.0",
    );

    let maps = procfs::maps(target.pid()).expect("maps");
    let mapped: Vec<_> = maps
        .iter()
        .filter(|m| m.path.as_deref() == Some(s(&lib)))
        .collect();
    assert!(!mapped.is_empty(), "library not in maps");
    assert!(
        mapped.iter().all(|m| m.deleted),
        "maps should say (deleted): {mapped:?}"
    );
    assert_ne!(
        mapped[0].inode,
        std::fs::metadata(&lib).expect("stat").ino()
    );

    let remote = RemoteLibrary::locate(target.pid(), REGISTER).expect("locate deleted copy");
    assert!(remote.deleted);
    assert_eq!(Some(remote.symbol(ATTACH).expect("symbol")), addr);
    // The replacement on disk really is a different build.
    assert_ne!(elf::build_id(&lib).expect("build id"), remote.build_id());
}

#[test]
fn two_copies_are_refused_naming_both() {
    let dir = tempfile::tempdir().expect("tempdir");
    let built = register_lib(1, &[]);
    let a = copy_into(
        &built,
        &dir.path().join("a"),
        "librocprofiler-register.so.0.5.0",
    );
    let b = copy_into(
        &built,
        &dir.path().join("b"),
        "librocprofiler-register.so.0",
    );
    let (target, _) = start_target(&[s(&a), s(&b)], &[]);
    let err = RemoteLibrary::locate(target.pid(), REGISTER).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Symbol(_)), "{msg}");
    for p in [&a, &b] {
        assert!(msg.contains(s(p)), "{msg}");
        let ino = std::fs::metadata(p).expect("stat").ino();
        assert!(msg.contains(&format!("inode {ino}")), "{msg}");
    }
    assert!(msg.contains("refusing to choose one implicitly"), "{msg}");
}

#[test]
fn missing_symbol_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lib = copy_into(
        &register_lib(1, &["-DNO_ATTACH"]),
        dir.path(),
        "librocprofiler-register.so.0",
    );
    let (target, addr) = start_target(&[s(&lib)], &[]);
    assert_eq!(addr, None);
    let remote = RemoteLibrary::locate(target.pid(), REGISTER).expect("locate");
    let err = remote.symbol(ATTACH).unwrap_err();
    assert!(matches!(err, Error::Symbol(_)), "{err}");
    assert!(err.to_string().contains(ATTACH), "{err}");
}

#[test]
fn library_not_mapped_is_an_error() {
    let (target, _) = start_target(&[], &[]);
    let err = RemoteLibrary::locate(target.pid(), REGISTER).unwrap_err();
    assert!(
        err.to_string()
            .contains("has no librocprofiler-register.so mapped"),
        "{err}"
    );
}

/// Copy of `lib` with the section header table removed (forces the PT_DYNAMIC fallback).
fn without_section_headers(lib: &Path, dir: &Path, name: &str) -> PathBuf {
    let mut bytes = std::fs::read(lib).expect("read lib");
    bytes[0x28..0x30].fill(0); // e_shoff
    bytes[0x3c..0x40].fill(0); // e_shnum, e_shstrndx
    let out = dir.join(name);
    std::fs::write(&out, bytes).expect("write");
    out
}

#[test]
fn dynamic_segment_fallback_with_gnu_and_sysv_hash() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (style, name) in [
        ("-Wl,--hash-style=gnu", "gnu.so"),
        ("-Wl,--hash-style=sysv", "sysv.so"),
    ] {
        let lib = without_section_headers(&register_lib(1, &[style]), dir.path(), name);
        assert!(elf::exports_symbol(&lib, ATTACH).expect("read"), "{style}");
        assert!(
            elf::exports_symbol(&lib, "rocprofiler_register_detach").expect("read"),
            "{style}"
        );
        assert!(
            !elf::exports_symbol(&lib, "rocprofiler_register_data").expect("read"),
            "{style}"
        );
        assert!(
            !elf::exports_symbol(&lib, "rocprofiler_register_hidden").expect("read"),
            "{style}"
        );
    }
}

#[test]
fn dynamic_segment_fallback_in_a_live_process() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lib = without_section_headers(
        &register_lib(1, &[]),
        dir.path(),
        "librocprofiler-register.so.0",
    );
    let (target, addr) = start_target(&[s(&lib)], &[]);
    let remote = RemoteLibrary::locate(target.pid(), REGISTER).expect("locate");
    assert_eq!(Some(remote.symbol(ATTACH).expect("symbol")), addr);
}

/// Counts the bytes a lookup reads.
struct Counting<'a> {
    bytes: &'a [u8],
    read: std::cell::Cell<u64>,
}

impl elf::file::Source for Counting<'_> {
    fn size(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn read_at(&self, offset: u64, len: u64) -> Result<std::borrow::Cow<'_, [u8]>, String> {
        self.read.set(self.read.get() + len);
        self.bytes.read_at(offset, len)
    }
}

#[test]
fn a_lookup_reads_only_what_it_needs_of_a_large_library() {
    // The stand-in with 8 MiB of "debug info" after it, as in a RelWithDebInfo build.
    let mut bytes = std::fs::read(register_lib(1, &[])).expect("read lib");
    bytes.extend(std::iter::repeat_n(0xa5u8, 8 << 20));
    for style in ["gnu", "sysv"] {
        let mut bytes = if style == "gnu" {
            bytes.clone()
        } else {
            let mut b = std::fs::read(register_lib(1, &["-Wl,--hash-style=sysv"])).expect("read");
            b.extend(std::iter::repeat_n(0xa5u8, 8 << 20));
            b
        };
        let src = Counting {
            bytes: &bytes,
            read: std::cell::Cell::new(0),
        };
        let info = elf::file::ElfInfo::read(&src).expect("ELF");
        let tags = elf::symbols::dyn_tags(&info, &src).expect("dynamic");
        let attach = elf::symbols::find_function(&info, tags.as_ref(), &src, ATTACH).expect("ok");
        let detach =
            elf::symbols::find_function(&info, tags.as_ref(), &src, "rocprofiler_register_detach")
                .expect("ok");
        let none = elf::symbols::find_function(&info, tags.as_ref(), &src, "no_such_function")
            .expect("ok");
        assert!(
            attach.is_some() && detach.is_some() && none.is_none(),
            "{style}"
        );
        assert!(
            src.read.get() < 16 << 10,
            "{style}: read {} bytes of {}",
            src.read.get(),
            bytes.len()
        );
        // The same answers as the in-memory entry point used by fuzzing.
        assert_eq!(elf::exported_function(&bytes, ATTACH).expect("ok"), attach);
        bytes.truncate(64);
        assert!(
            elf::exported_function(&bytes, ATTACH).is_err(),
            "{style}: truncated"
        );
    }
}

#[test]
fn exports_symbol_and_build_id() {
    let configure = configure_lib();
    assert!(elf::exports_symbol(&configure, "rocprofiler_configure").expect("read"));
    assert!(!elf::exports_symbol(&register_lib(1, &[]), "rocprofiler_configure").expect("read"));
    let dir = tempfile::tempdir().expect("tempdir");
    let text = dir.path().join("not-elf.txt");
    std::fs::write(&text, "hello").expect("write");
    assert!(!elf::exports_symbol(&text, "rocprofiler_configure").expect("read"));
    assert!(elf::exports_symbol(&dir.path().join("missing.so"), "x").is_err());
    let one = elf::build_id(&register_lib(1, &[])).expect("read");
    let two = elf::build_id(&register_lib(2, &[])).expect("read");
    assert!(one.is_some() && two.is_some());
    assert_ne!(one, two);
}

#[test]
fn library_name_matching() {
    let name = "librocprofiler-register.so";
    for p in [
        "/opt/rocm/lib/librocprofiler-register.so",
        "/opt/rocm/lib/librocprofiler-register.so.0",
        "/opt/rocm/lib/librocprofiler-register.so.0.5.0 (deleted)",
    ] {
        assert!(elf::library_matches(p, name), "{p}");
    }
    for p in [
        "/opt/rocm/lib/librocprofiler-register.sox",
        "/opt/rocm/lib/librocprofiler-register-x.so",
    ] {
        assert!(!elf::library_matches(p, name), "{p}");
    }
    assert!(elf::library_matches(
        "/a/librocprofiler-register.so.0",
        "/a/librocprofiler-register.so.0"
    ));
    assert!(!elf::library_matches(
        "/b/librocprofiler-register.so.0",
        "/a/librocprofiler-register.so.0"
    ));
}

#[test]
fn maps_lines_with_deleted_spaces_and_anonymous() {
    let line =
        "7f0000001000-7f0000002000 r-xp 00001000 fd:01 1234567    /tmp/my dir/lib.so (deleted)";
    let m = procfs::parse_maps_line(line).expect("parse");
    assert_eq!(
        (m.start, m.end, m.offset),
        (0x7f00_0000_1000, 0x7f00_0000_2000, 0x1000)
    );
    assert!(m.read && !m.write && m.exec && !m.shared);
    assert_eq!((m.dev_major, m.dev_minor, m.inode), (0xfd, 0x01, 1_234_567));
    assert_eq!(m.path.as_deref(), Some("/tmp/my dir/lib.so"));
    assert!(m.deleted);

    let anon = procfs::parse_maps_line("7ffd1000-7ffd2000 rw-s 00000000 00:00 0").expect("anon");
    assert!(anon.shared && anon.path.is_none() && !anon.deleted && anon.inode == 0);
    let stack = procfs::parse_maps_line("7ffd1000-7ffd2000 rw-p 00000000 00:00 0      [stack]")
        .expect("stack");
    assert_eq!(stack.path.as_deref(), Some("[stack]"));
    let text = format!("{line}\n\ngarbage\n");
    assert!(matches!(
        procfs::parse_maps(&text, Path::new("x")),
        Err(Error::ProcParse { .. })
    ));
}

#[test]
fn threads_status_and_stat_of_a_live_target() {
    let (target, _) = start_target(&["--listeners", "2"], &[("MY_JOB", "a=b")]);
    let pid = target.pid();
    let tids = procfs::threads_named(pid, "rocp-bg-attach").expect("threads");
    assert_eq!(tids.len(), 2);
    assert!(procfs::tasks(pid).expect("tasks").contains(&pid));
    assert_eq!(procfs::comm(pid, tids[0]).expect("comm"), "rocp-bg-attach");
    let st = procfs::status(pid).expect("status");
    assert_eq!(
        (st.tgid, st.ppid, st.tracer_pid),
        (pid, std::process::id() as i32, 0)
    );
    assert_eq!(st.name, "target");
    assert_eq!(*st.ns_pid.last().expect("nspid"), pid);
    assert!(matches!(
        procfs::task_state(pid, tids[0]).expect("state"),
        'S' | 'R'
    ));
    assert!(procfs::environ(pid)
        .expect("environ")
        .contains(&("MY_JOB".into(), "a=b".into())));
    let args = procfs::cmdline(pid).expect("cmdline");
    assert_eq!(args[1..], ["--listeners".to_string(), "2".to_string()]);
    assert!(!procfs::is_kernel_thread(pid).expect("flags"));
    let entry = procfs::at_entry(pid).expect("entry");
    let maps = procfs::maps(pid).expect("maps");
    assert!(
        maps.iter().any(|m| m.exec && m.contains(entry)),
        "AT_ENTRY {entry:#x} not executable"
    );
}

#[test]
fn children_and_descendants() {
    let (target, child) = start_forking_target(&[], &[]);
    let me = std::process::id() as i32;
    assert!(procfs::children(me)
        .expect("children")
        .contains(&target.pid()));
    assert_eq!(
        procfs::children(target.pid()).expect("children"),
        vec![child]
    );
    let desc = procfs::descendants(me).expect("descendants");
    let (pt, pc) = (
        desc.iter()
            .position(|&p| p == target.pid())
            .expect("target listed"),
        desc.iter()
            .position(|&p| p == child)
            .expect("grandchild listed"),
    );
    assert!(pt < pc, "breadth-first order");
    assert!(!desc.contains(&me), "root excluded");
    assert_eq!(procfs::descendants(child).expect("leaf"), Vec::<i32>::new());
}

#[test]
fn gone_process_and_kernel_thread() {
    let mut child = std::process::Command::new("true").spawn().expect("spawn");
    let pid = child.id() as i32;
    child.wait().expect("wait");
    assert!(matches!(procfs::status(pid), Err(Error::ProcessGone { pid: p }) if p == pid));
    assert!(matches!(procfs::maps(pid), Err(Error::ProcessGone { .. })));
    assert!(matches!(
        procfs::threads_named(pid, "x"),
        Err(Error::ProcessGone { .. })
    ));
    if procfs::status(2).is_ok_and(|s| s.name == "kthreadd") {
        assert!(procfs::is_kernel_thread(2).expect("flags"));
    }
    assert!(!procfs::is_kernel_thread(std::process::id() as i32).expect("flags"));
    assert!(procfs::list_pids()
        .expect("pids")
        .contains(&(std::process::id() as i32)));
}

#[test]
fn stat_comm_with_parens_and_spaces() {
    let fields =
        procfs::stat_fields_after_comm("42 (a) b (c)) S 1 42 42 0 -1 4194560 0").expect("fields");
    assert_eq!(fields[0], "S");
    assert_eq!(fields[6], "4194560");
}

fn link(root: &Path, at: &str, to: &str) {
    let p = root.join(at.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::os::unix::fs::symlink(to, p).expect("symlink");
}

fn touch(root: &Path, at: &str) {
    let p = root.join(at.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, b"x").expect("write");
}

#[test]
fn resolve_under_root_stays_inside_root() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    touch(
        root,
        "/opt/rocm-7.0.0/lib/rocprofiler-sdk/librocprofiler-sdk-tool.so.1.0.0",
    );
    link(root, "/opt/rocm", "/opt/rocm-7.0.0");
    link(
        root,
        "/opt/rocm-7.0.0/lib/rocprofiler-sdk/librocprofiler-sdk-tool.so",
        "librocprofiler-sdk-tool.so.1.0.0",
    );
    link(root, "/usr/lib64", "../opt/rocm/lib");
    link(root, "/etc_link", "/etc");
    link(root, "/escape", "../../../../../../opt");
    link(root, "/loop_a", "/loop_b");
    link(root, "/loop_b", "loop_a");
    let r = |p: &str| procfs::resolve_under_root(root, Path::new(p));
    let want =
        PathBuf::from("/opt/rocm-7.0.0/lib/rocprofiler-sdk/librocprofiler-sdk-tool.so.1.0.0");
    assert_eq!(
        r("/opt/rocm/lib/rocprofiler-sdk/librocprofiler-sdk-tool.so").expect("ok"),
        Some(want.clone())
    );
    assert_eq!(
        r("/usr/lib64/rocprofiler-sdk/./librocprofiler-sdk-tool.so").expect("ok"),
        Some(want.clone())
    );
    assert_eq!(
        r("/escape/rocm/lib/rocprofiler-sdk/librocprofiler-sdk-tool.so").expect("ok"),
        Some(want)
    );
    assert_eq!(r("/../../opt").expect("ok"), Some(PathBuf::from("/opt")));
    // /etc exists on the host but not inside this root: the absolute link must not leak out.
    assert_eq!(r("/etc_link/passwd").expect("ok"), None);
    assert_eq!(r("/opt/missing/x").expect("ok"), None);
    assert_eq!(
        r("/opt/rocm-7.0.0/lib/rocprofiler-sdk/librocprofiler-sdk-tool.so.1.0.0/x").expect("ok"),
        None
    );
    let (_, err) = r("/loop_a/x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ELOOP));
}

#[test]
fn resolve_in_our_own_root() {
    let me = std::process::id() as i32;
    let want = std::fs::canonicalize("/bin/sh").expect("canonicalize");
    assert_eq!(
        procfs::resolve_in_root(me, Path::new("/bin/sh")).expect("resolve"),
        Some(want)
    );
    assert_eq!(
        procfs::resolve_in_root(me, Path::new("/no/such/file")).expect("resolve"),
        None
    );
    assert_eq!(
        procfs::in_root(1234, Path::new("/opt/rocm/lib")),
        PathBuf::from("/proc/1234/root/opt/rocm/lib")
    );
}

#[test]
fn path_route_verifies_the_build_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let built = register_lib(1, &[]);
    let lib = copy_into(&built, dir.path(), "librocprofiler-register.so.0.5.0");
    let (target, addr) = start_target(&[s(&lib)], &[]);
    let pid = target.pid();
    // Same inode on disk: no Build ID check needed.
    let same = RemoteLibrary::locate_via_path(pid, REGISTER).expect("same inode");
    assert_eq!(Some(same.symbol(ATTACH).expect("symbol")), addr);
    // Replaced by an identical build (new inode): the Build IDs agree, so the file is used.
    std::fs::remove_file(&lib).expect("delete");
    copy_into(&built, dir.path(), "librocprofiler-register.so.0.5.0");
    let identical = RemoteLibrary::locate_via_path(pid, REGISTER).expect("identical build");
    assert_eq!(Some(identical.symbol(ATTACH).expect("symbol")), addr);
    // Same layout, different Build ID: refused, naming both Build IDs.
    std::fs::remove_file(&lib).expect("delete");
    let other_id = register_lib(
        1,
        &["-Wl,--build-id=0x0123456789abcdef0123456789abcdef01234567"],
    );
    copy_into(&other_id, dir.path(), "librocprofiler-register.so.0.5.0");
    let err = RemoteLibrary::locate_via_path(pid, REGISTER).unwrap_err();
    assert!(
        err.to_string()
            .contains("Build ID in the file is 0123456789abcdef"),
        "{err}"
    );
    // Replaced by a build with another layout: refused too.
    std::fs::remove_file(&lib).expect("delete");
    copy_into(
        &register_lib(2, &[]),
        dir.path(),
        "librocprofiler-register.so.0.5.0",
    );
    let err = RemoteLibrary::locate_via_path(pid, REGISTER).unwrap_err();
    assert!(err.to_string().contains("could not be verified"), "{err}");
    assert!(err.to_string().contains("map_files"), "{err}");
    // Deleted with nothing at the path: only map_files can help.
    std::fs::remove_file(&lib).expect("delete");
    let err = RemoteLibrary::locate_via_path(pid, REGISTER).unwrap_err();
    assert!(err.to_string().contains("deleted"), "{err}");
    assert!(RemoteLibrary::locate(pid, REGISTER).is_ok());
}
