//! The fuzz targets' properties (`tests/fuzz/checks.rs`) on every committed corpus and regression
//! input (`tests/fuzz/corpus/<target>/`, `tests/fuzz/regressions/<target>/`), plus one named test
//! per bug the fuzzers found. The fuzzing itself runs with cargo-fuzz (docs/reliability.md).

#[allow(dead_code)]
#[path = "fuzz/checks.rs"]
mod checks;

use rocprof_attach::engine::elf;
use rocprof_attach::engine::procfs::Mapping;
use std::path::Path;

/// Runs `check` on every input of `target`; returns how many there were.
fn replay(target: &str, check: fn(&[u8])) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz");
    let mut n = 0;
    for kind in ["corpus", "regressions"] {
        let Ok(dir) = std::fs::read_dir(root.join(kind).join(target)) else {
            continue;
        };
        let mut paths: Vec<_> = dir.map(|e| e.expect("corpus entry").path()).collect();
        paths.sort();
        for path in paths {
            let data = std::fs::read(&path).expect("read corpus input");
            let outcome = std::panic::catch_unwind(|| check(&data));
            assert!(
                outcome.is_ok(),
                "{} fails {target}'s checks",
                path.display()
            );
            n += 1;
        }
    }
    n
}

#[test]
fn proc_maps_corpus() {
    assert!(replay("proc_maps", checks::proc_maps) > 0);
}

#[test]
fn proc_status_corpus() {
    assert!(replay("proc_status", checks::proc_status) > 0);
}

#[test]
fn proc_children_corpus() {
    assert!(replay("proc_children", checks::proc_children) > 0);
}

#[test]
fn envbuf_corpus() {
    assert!(replay("envbuf", checks::envbuf) > 0);
}

#[test]
fn elf_symbol_corpus() {
    assert!(replay("elf_symbol", checks::elf_symbol) > 0);
}

#[test]
fn rocpd_reader_corpus() {
    assert!(replay("rocpd_reader", checks::rocpd_reader) > 0);
}

/// A little-endian ELF64 x86-64 shared object: header, then `phdrs` (type, flags, offset,
/// vaddr, filesz) at offset 64, then `tail` at offset 64 + 56 * phdrs.len().
fn elf_image(phdrs: &[(u32, u32, u64, u64, u64)], tail: &[u8]) -> Vec<u8> {
    let mut d = Vec::new();
    d.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    d.extend_from_slice(&3u16.to_le_bytes()); // ET_DYN
    d.extend_from_slice(&62u16.to_le_bytes()); // EM_X86_64
    d.extend_from_slice(&1u32.to_le_bytes());
    d.extend_from_slice(&0u64.to_le_bytes()); // e_entry
    d.extend_from_slice(&64u64.to_le_bytes()); // e_phoff
    d.extend_from_slice(&0u64.to_le_bytes()); // e_shoff: no section headers
    d.extend_from_slice(&0u32.to_le_bytes());
    for v in [64u16, 56, phdrs.len() as u16, 64, 0, 0] {
        d.extend_from_slice(&v.to_le_bytes());
    }
    for &(ty, flags, offset, vaddr, filesz) in phdrs {
        d.extend_from_slice(&ty.to_le_bytes());
        d.extend_from_slice(&flags.to_le_bytes());
        for v in [offset, vaddr, vaddr, filesz, filesz, 0x1000] {
            d.extend_from_slice(&v.to_le_bytes());
        }
    }
    d.extend_from_slice(tail);
    d
}

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const RX: u32 = 5;

/// Found by elf_symbol (from a seed with 300 PT_LOAD segments): the load bias search tried every
/// (mapping, segment) pair and checked each against every pair again, O(n^4): minutes for a
/// 20 kB file. Now the segments are capped and the search is linear.
#[test]
fn many_load_segments_are_refused_without_a_quadratic_search() {
    let loads: Vec<_> = (0..300u64)
        .map(|i| (PT_LOAD, RX, 0, i * 0x1000, 0x1000))
        .collect();
    let image = elf_image(&loads, &[]);
    let maps = checks::load_mappings(&image);
    assert_eq!(maps.len(), 300);
    let err = elf::image_load_bias(&image, &maps).unwrap_err();
    assert!(err.contains("300 PT_LOAD segments"), "{err}");
    checks::elf_symbol(&image);

    // The most a real object could need still resolves, to the one consistent bias.
    let loads: Vec<_> = (0..elf::MAX_LOADS as u64)
        .map(|i| (PT_LOAD, RX, i * 0x1000, i * 0x1000, 0x1000))
        .collect();
    let image = elf_image(&loads, &[]);
    let maps = checks::load_mappings(&image);
    assert_eq!(elf::image_load_bias(&image, &maps), Ok(maps[0].start));
    let wrong: Vec<Mapping> = maps.iter().skip(1).cloned().collect();
    assert!(elf::image_load_bias(&image, &wrong).is_err());
}

/// Found by elf_symbol: a PT_LOAD whose file offset is near 2^64 made the hash-table offset
/// computation overflow (a panic in debug builds, a wrapped offset in release builds). Now such
/// an object has no usable symbol table and the lookup says so.
#[test]
fn hash_table_offsets_past_the_end_are_errors_not_overflows() {
    const DT_NULL: u64 = 0;
    const DT_HASH: u64 = 4;
    const DT_STRTAB: u64 = 5;
    const DT_SYMTAB: u64 = 6;
    const DT_STRSZ: u64 = 10;
    const DT_GNU_HASH: u64 = 0x6fff_fef5;
    for (hash_tag, load_offset, hash_vaddr) in [
        (DT_GNU_HASH, u64::MAX, 0x200),
        (DT_HASH, u64::MAX, 0x10),
        (DT_HASH, u64::MAX - 1, 0),
    ] {
        let dynamic: Vec<u8> = [
            (hash_tag, hash_vaddr),
            (DT_SYMTAB, 0x300),
            (DT_STRTAB, 0x400),
            (DT_STRSZ, 16),
            (DT_NULL, 0u64),
        ]
        .iter()
        .flat_map(|&(tag, val)| [tag.to_le_bytes(), val.to_le_bytes()].concat())
        .collect();
        let dyn_offset = 64 + 2 * 56;
        let image = elf_image(
            &[
                (PT_LOAD, RX, load_offset, 0, 0x1000),
                (PT_DYNAMIC, 4, dyn_offset, 0x800, dynamic.len() as u64),
            ],
            &dynamic,
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("lib.so");
        std::fs::write(&path, &image).expect("write object");
        assert_eq!(
            elf::exports_symbol(&path, "rocprofiler_register_attach").ok(),
            Some(false)
        );
        let maps = checks::load_mappings(&image);
        let err = elf::symbol_address(&image, "lib.so", &maps, "rocprofiler_register_attach")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("past the end") || err.contains("outside every PT_LOAD"),
            "{err}"
        );
        checks::elf_symbol(&image);
    }
}

/// Writes a rocpd database whose values sit at the ends of their ranges: two kernels (one with
/// a static LDS size of i64::MAX), each dispatched five times from i64::MIN to i64::MAX ns with
/// grid and workgroup sizes whose products overflow, and counter values of f64::MAX.
fn extreme_values_db(path: &Path) {
    use rocprof_attach::rocpd::guid::Guid;
    use rocprof_attach::rocpd::model::*;
    use rocprof_attach::rocpd::Writer;

    let mut w = Writer::create(path, &Guid::from_parts(1, 1)).expect("create db");
    w.node(&Node {
        id: 1,
        hash: 1,
        ..Default::default()
    })
    .expect("node");
    w.process(&Process {
        pid: 1,
        ..Default::default()
    })
    .expect("process");
    w.agent(&Agent {
        id: 1,
        agent_type: "GPU".into(),
        ..Default::default()
    })
    .expect("agent");
    w.code_object(&CodeObject {
        id: 1,
        agent_id: 1,
        ..Default::default()
    })
    .expect("code object");
    w.pmc(&Pmc {
        id: 9,
        agent_id: 1,
        name: "SQ_WAVES".into(),
        ..Default::default()
    })
    .expect("pmc");
    for (id, lds) in [(1, 0), (2, i64::MAX)] {
        w.kernel_symbol(&KernelSymbol {
            id,
            code_object_id: 1,
            kernel_name: format!("k{id}"),
            display_name: format!("k{id}"),
            group_segment_size: lds,
            ..Default::default()
        })
        .expect("kernel");
    }
    for i in 1..=10 {
        w.kernel_dispatch(&KernelDispatch {
            dispatch_id: i,
            agent_id: 1,
            kernel_id: 1 + i % 2,
            start: i64::MIN,
            end: i64::MAX,
            workgroup: [i64::MAX, 2, 1],
            grid: [i64::MIN, 2, 1],
            counters: vec![(9, f64::MAX), (9, f64::MAX)],
            ..Default::default()
        })
        .expect("dispatch");
    }
    w.finish().expect("finish");
}

/// Found with an extreme-values seed of rocpd_reader (tests/fuzz/regressions/rocpd_reader/):
/// calls lasting i64::MAX ns overflowed the summary's u128 sum of squares and its u64 totals, an
/// LDS size of i64::MAX overflowed `LDS_Block_Size`, and huge grid and workgroup sizes overflowed
/// their products in the counter CSV (panics in debug builds, wrapped numbers in release
/// builds). Durations and sizes now saturate.
#[test]
fn extreme_durations_and_sizes_do_not_overflow() {
    use rocprof_attach::format::OutputFormat;
    use rocprof_attach::rocpd::reader::Input;
    use rocprof_attach::rocpd::summary::Summary;
    use rocprof_attach::rocpd::{convert_with, ConvertOptions};

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("extreme_results.db");
    extreme_values_db(&path);
    let input = Input::open(&path).expect("open");
    let sources = input.sources().expect("sources");
    let summary = Summary::collect(&sources, &ConvertOptions::default()).expect("summary");
    let text = summary.render(10, 160);
    assert!(text.contains("k1") && text.contains("k2"), "{text}");
    drop(input);
    let out = dir.path().join("out");
    std::fs::create_dir(&out).expect("out dir");
    let opts = ConvertOptions {
        stats: true,
        ..ConvertOptions::default()
    };
    let formats = [OutputFormat::Csv, OutputFormat::Json];
    let report =
        convert_with(std::slice::from_ref(&path), &formats, &out, "x", &opts).expect("convert");
    assert!(report.csv_rows > 0 && report.json_rows > 0, "{report:?}");
    let kernels = std::fs::read_to_string(out.join("x_kernel_trace.csv")).expect("kernel trace");
    assert!(
        kernels.contains(&(i64::MAX & !511).to_string()),
        "{kernels}"
    );
    let counters = std::fs::read_to_string(out.join("x_counter_collection.csv")).expect("counters");
    assert!(counters.contains(&i64::MAX.to_string()), "{counters}");
    checks::rocpd_reader(&std::fs::read(&path).expect("read db"));
}

/// Found by elf_symbol in CI (a crossover of two corpus objects): a `.dynsym` section whose linked
/// string table starts near 2^64 made the name offset overflow in the section-header lookup (a
/// panic in debug builds). Every offset the lookups compute is now saturating, so such a table
/// reads as truncated and the symbol is simply not found.
/// Input: tests/fuzz/regressions/elf_symbol/strtab_offset_overflow.so.
#[test]
fn string_table_offsets_near_2e64_are_not_found_not_overflows() {
    // One PT_LOAD, no PT_DYNAMIC (so the lookup scans `.dynsym`), then the symbol table at 120:
    // the null symbol and a global function named at string offset 1.
    let mut tail = vec![0u8; 24];
    tail.extend_from_slice(&1u32.to_le_bytes()); // st_name
    tail.extend_from_slice(&[0x12, 0]); // STB_GLOBAL | STT_FUNC, STV_DEFAULT
    tail.extend_from_slice(&1u16.to_le_bytes()); // st_shndx
    tail.extend_from_slice(&0x100u64.to_le_bytes()); // st_value
    tail.extend_from_slice(&0u64.to_le_bytes()); // st_size
    let shoff = 64 + 56 + tail.len() as u64;
    let section = |ty: u32, offset: u64, size: u64, link: u32| {
        let mut s = Vec::new();
        s.extend_from_slice(&0u32.to_le_bytes());
        s.extend_from_slice(&ty.to_le_bytes());
        for v in [2u64, 0, offset, size] {
            s.extend_from_slice(&v.to_le_bytes());
        }
        s.extend_from_slice(&link.to_le_bytes());
        s.extend_from_slice(&1u32.to_le_bytes());
        for v in [8u64, 24] {
            s.extend_from_slice(&v.to_le_bytes());
        }
        s
    };
    tail.extend_from_slice(&[0u8; 64]);
    tail.extend_from_slice(&section(11, 120, 48, 2)); // SHT_DYNSYM, strings in section 2
    tail.extend_from_slice(&section(3, u64::MAX, 1 << 32, 0)); // SHT_STRTAB at 2^64 - 1
    let mut image = elf_image(&[(PT_LOAD, RX, 0, 0, 0x1000)], &tail);
    image[40..48].copy_from_slice(&shoff.to_le_bytes()); // e_shoff
    image[60..62].copy_from_slice(&3u16.to_le_bytes()); // e_shnum
    assert_eq!(
        elf::exported_function(&image, "rocprofiler_register_attach"),
        Ok(None)
    );
    checks::elf_symbol(&image);
}
