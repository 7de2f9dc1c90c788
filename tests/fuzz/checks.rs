//! What each fuzz target checks, shared by the fuzz targets (`fuzz_targets/*.rs`) and the normal
//! test suite (`tests/fuzz_corpus.rs` replays every committed corpus and regression input through
//! these functions). Each function takes arbitrary bytes; a property that does not hold panics.

use object::elf::{FileHeader64, PF_R, PF_W, PF_X, PT_LOAD};
use object::read::elf::{FileHeader as _, ProgramHeader as _};
use object::LittleEndian as LE;
use rocprof_attach::attach::envbuf::{self, EnvList};
use rocprof_attach::engine::elf;
use rocprof_attach::engine::procfs::{self, Mapping, Status};
use rocprof_attach::format::OutputFormat;
use rocprof_attach::rocpd::reader::{self, AgentIndex, Input};
use rocprof_attach::rocpd::summary::Summary;
use rocprof_attach::rocpd::{convert_with, ConvertOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fresh path for scratch files of this call (tmpfs when there is one).
fn scratch(what: &str) -> PathBuf {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    base.join(format!(
        "rocprof-attach-fuzz-{what}-{}-{seq}",
        std::process::id()
    ))
}

/// A mapping as the kernel prints it (`show_map_vma`), path and " (deleted)" included.
fn kernel_maps_line(m: &Mapping) -> String {
    let flag = |on: bool, c: char| if on { c } else { '-' };
    let mut line = format!(
        "{:x}-{:x} {}{}{}{} {:08x} {:02x}:{:02x} {}",
        m.start,
        m.end,
        flag(m.read, 'r'),
        flag(m.write, 'w'),
        flag(m.exec, 'x'),
        if m.shared { 's' } else { 'p' },
        m.offset,
        m.dev_major,
        m.dev_minor,
        m.inode
    );
    if let Some(path) = &m.path {
        line.push_str("                          ");
        line.push_str(path);
        if m.deleted {
            line.push_str(" (deleted)");
        }
    }
    line
}

/// `/proc/PID/maps`: never panics on any text, and every line it accepts, written back the way
/// the kernel writes it, parses to the same mapping.
pub fn proc_maps(data: &[u8]) {
    // The readers decode /proc text lossily.
    let text = String::from_utf8_lossy(data);
    if let Ok(maps) = procfs::parse_maps(&text, Path::new("/proc/1/maps")) {
        for m in &maps {
            let again = procfs::parse_maps_line(&kernel_maps_line(m));
            assert_eq!(
                again.as_ref(),
                Some(m),
                "{m:?} does not survive a round trip"
            );
        }
        // What the ELF layer does with a maps snapshot before it reads anything.
        for name in [
            "librocprofiler-register.so",
            "/opt/rocm/lib/librocprofiler-register.so.0",
        ] {
            for group in elf::candidate_objects(&maps, name) {
                assert!(group.iter().all(|m| m.file_id() == group[0].file_id()));
            }
        }
    }
    for line in text.lines() {
        let _ = procfs::parse_maps_line(line);
    }
}

fn kernel_status_text(st: &Status) -> String {
    fn join<T: ToString>(v: &[T]) -> String {
        v.iter().map(T::to_string).collect::<Vec<_>>().join("\t")
    }
    let mut text = format!(
        "Name:\t{}\nState:\t{}\nTgid:\t{}\nPPid:\t{}\nTracerPid:\t{}\nUid:\t{}\nGid:\t{}\nGroups:\t{}\nNSpid:\t{}\n",
        st.name,
        st.state,
        st.tgid,
        st.ppid,
        st.tracer_pid,
        join(&st.uid),
        join(&st.gid),
        join(&st.groups),
        join(&st.ns_pid)
    );
    if st.has_mm {
        text.push_str("VmSize:\t    2436 kB\n");
    }
    text
}

/// `/proc/PID/status` (fields, handled-signal masks) and the `stat` line (fields, comm and state):
/// never panic on any text, and a status it accepts, written back as the kernel writes it, parses
/// to the same value.
pub fn proc_status(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let path = Path::new("/proc/1/status");
    if let Ok(st) = procfs::parse_status(&text, path) {
        assert_ne!(st.state, '\0');
        let again = procfs::parse_status(&kernel_status_text(&st), path)
            .unwrap_or_else(|e| panic!("{st:?} does not survive a round trip: {e}"));
        assert_eq!(again, st);
    }
    let _ = procfs::parse_handled_signals(&text);
    // The stat line: the comm may hold spaces and parentheses; the fields follow the last ')'.
    if let Some(fields) = procfs::stat_fields_after_comm(&text) {
        assert!(fields.iter().all(|f| !f.is_empty()));
    }
    if let Ok((comm, state)) = procfs::parse_comm_state(&text, Path::new("/proc/1/task/1/stat")) {
        assert!(!state.is_whitespace());
        let fields = procfs::stat_fields_after_comm(&text).expect("a ')' was found");
        assert!(fields[0].starts_with(state));
        assert!(text.contains(&format!("({comm})")));
    }
}

/// `/proc/PID/task/TID/children`: never panics on any text, and a list it accepts, written back
/// as the kernel writes it ("PID PID "), parses to the same list.
pub fn proc_children(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let path = Path::new("/proc/1/task/1/children");
    if let Ok(kids) = procfs::parse_children(&text, path) {
        let written: String = kids.iter().map(|k| format!("{k} ")).collect();
        assert_eq!(procfs::parse_children(&written, path).ok(), Some(kids));
    }
}

/// (name, value) pairs drawn from bytes: per pair a prefix choice (none, `ROCP`, `ROCPROF_`,
/// `ROCPROFILER_`) and two length-prefixed strings (NUL and `=` included).
fn env_pairs(mut rest: &[u8]) -> Vec<(String, String)> {
    fn take(rest: &mut &[u8]) -> String {
        let Some((&len, tail)) = rest.split_first() else {
            return String::new();
        };
        let (s, tail) = tail.split_at(usize::from(len).min(tail.len()));
        *rest = tail;
        String::from_utf8_lossy(s).into_owned()
    }
    let mut out = Vec::new();
    while let Some((&kind, tail)) = rest.split_first() {
        rest = tail;
        let prefix = ["", "ROCP", "ROCPROF_", "ROCPROFILER_"][usize::from(kind % 4)];
        let name = format!("{prefix}{}", take(&mut rest));
        out.push((name, take(&mut rest)));
    }
    out
}

/// The environment buffer: decoding any bytes never panics, and a buffer that decodes to entries
/// we would send encodes back to the same bytes; decoding what we encode gives exactly the list
/// we meant to send (the encodable `ROCP*` entries, in order), for lists drawn from the bytes.
pub fn envbuf(data: &[u8]) {
    if let Ok(decoded) = envbuf::decode(data) {
        let env = EnvList::from_pairs(decoded.iter().map(|(n, v)| (n, v)));
        let sendable = decoded
            .iter()
            .all(|(n, v)| envbuf::is_forwarded(n) && envbuf::is_encodable(n, v));
        if sendable && env.len() == decoded.len() {
            assert_eq!(envbuf::encode(&env), data, "re-encoding {decoded:?}");
        }
    }
    let env = EnvList::from_pairs(env_pairs(data));
    let want: Vec<(String, String)> = env
        .forwarded()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    let buf = envbuf::encode(&env);
    let got = envbuf::decode(&buf).unwrap_or_else(|e| panic!("decoding our own {buf:?}: {e}"));
    assert_eq!(got, want);
}

const PAGE: u64 = 4096;
/// Where the fuzzed object is "loaded".
const BIAS: u64 = 0x7f12_3400_0000;

/// The mappings a loader would create for an object's file-backed PT_LOAD segments (at most
/// 1024), or none when its program headers cannot be read.
pub fn load_mappings(data: &[u8]) -> Vec<Mapping> {
    let Ok(header) = FileHeader64::<LE>::parse(data) else {
        return Vec::new();
    };
    let Ok(phdrs) = header.program_headers(LE, data) else {
        return Vec::new();
    };
    phdrs
        .iter()
        .filter(|ph| ph.p_type(LE) == PT_LOAD && ph.p_filesz(LE) > 0)
        .take(1024)
        .map(|ph| {
            let vaddr = ph.p_vaddr(LE);
            let flags = ph.p_flags(LE);
            let end = vaddr.wrapping_add(ph.p_memsz(LE)).wrapping_add(PAGE - 1) & !(PAGE - 1);
            Mapping {
                start: BIAS.wrapping_add(vaddr & !(PAGE - 1)),
                end: BIAS.wrapping_add(end),
                read: flags & PF_R != 0,
                write: flags & PF_W != 0,
                exec: flags & PF_X != 0,
                shared: false,
                offset: ph.p_offset(LE) & !(PAGE - 1),
                dev_major: 8,
                dev_minor: 1,
                inode: 4242,
                path: Some("/opt/rocm/lib/librocprofiler-register.so.0".into()),
                deleted: false,
            }
        })
        .collect()
}

/// ELF symbol lookup on any bytes: what `RemoteLibrary::locate` and `symbol` compute from the
/// object and its mappings (header checks, load bias, `.dynsym` or the PT_DYNAMIC tables and their
/// hash tables), what preflight computes from a file (`exports_symbol`, `build_id`, reading
/// only what they need, which must agree with the lookup in memory), and Build ID notes. Never
/// panics; the caller's time and memory limits catch loops and allocations without bound.
pub fn elf_symbol(data: &[u8]) {
    let maps = load_mappings(data);
    for symbol in ["rocprofiler_register_attach", "rocprofiler_register_detach"] {
        if let Ok(addr) = elf::symbol_address(data, "fuzz.so", &maps, symbol) {
            assert!(maps.iter().any(|m| m.exec && m.contains(addr)));
        }
    }
    let _ = elf::image_load_bias(data, &maps);
    let _ = elf::gnu_build_ids(data);
    let path = scratch("elf");
    if std::fs::write(&path, data).is_ok() {
        // The file reader reads only the parts it needs; it must find what the in-memory one finds.
        for symbol in ["rocprofiler_configure", "rocprofiler_register_attach"] {
            let in_memory = matches!(elf::exported_function(data, symbol), Ok(Some(_)));
            let in_file = elf::exports_symbol(&path, symbol).unwrap_or(false);
            assert_eq!(
                in_file, in_memory,
                "{symbol}: file and memory lookups disagree"
            );
        }
        let _ = elf::build_id(&path);
    }
    let _ = std::fs::remove_file(&path);
}

fn read_everything(input: &Input) -> rocprof_attach::rocpd::Result<()> {
    for source in input.sources()? {
        for index in [
            AgentIndex::Relative,
            AgentIndex::Absolute,
            AgentIndex::TypeRelative,
        ] {
            let dims = source.dims(index)?;
            let _ = dims.agent_label(Some(1));
        }
        source.dispatches(|_| Ok(()))?;
        source.api_calls(|_| Ok(()))?;
        source.memory_copies(|_| Ok(()))?;
        source.memory_allocations(|_| Ok(()))?;
        source.counters(|_| Ok(()))?;
    }
    Ok(())
}

/// The rocpd reader and converters on any bytes as a database file: opening (header checks,
/// metadata, schema version), the dimension tables, every row stream, the summary, and the
/// CSV/JSON/stats conversion each return rows or an error, never a panic.
pub fn rocpd_reader(data: &[u8]) {
    let dir = scratch("rocpd");
    if std::fs::create_dir_all(dir.join("out")).is_err() {
        return;
    }
    let db = dir.join("in_results.db");
    if std::fs::write(&db, data).is_ok() {
        if let Ok(input) = Input::open(&db) {
            let _ = read_everything(&input);
            if let Ok(sources) = input.sources() {
                if let Ok(summary) = Summary::collect(&sources, &ConvertOptions::default()) {
                    let _ = summary.render(10, 160);
                }
            }
            drop(input);
            let paths = [db.clone()];
            let _ = reader::open_all(&paths);
            let opts = ConvertOptions {
                stats: true,
                ..ConvertOptions::default()
            };
            let formats = [OutputFormat::Csv, OutputFormat::Json];
            // The converters run in threads and turn a panic into an error: under libFuzzer the panic
            // hook aborts first, in the test suite this assertion catches it.
            if let Err(e) = convert_with(&paths, &formats, &dir.join("out"), "out", &opts) {
                assert!(!e.to_string().contains("panicked"), "{e}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
