//! What a user builds and installs stays small and starts fast (issue 12), checked without
//! building a release here: the release profile carries no DWARF (what `cargo build --release`
//! and `cargo install` give is about 8 MiB, at most 10 MiB; the size itself is measured with the
//! command in docs/performance.md, "Installed size"), and the binary is linked at a fixed address
//! unless `ROCPROF_ATTACH_PIE=1` (docs/performance.md, "Start-up").

/// The lines of `section` (e.g. `[profile.release]`) of the manifest, without comments.
fn section<'a>(manifest: &'a str, name: &str) -> Vec<&'a str> {
    manifest
        .lines()
        .skip_while(|l| l.trim() != name)
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with('['))
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .collect()
}

fn value<'a>(lines: &[&'a str], key: &str) -> Option<&'a str> {
    lines.iter().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"'))
    })
}

#[test]
fn the_release_profile_ships_no_debug_info_but_keeps_symbols() {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .expect("read Cargo.toml");
    let release = section(&manifest, "[profile.release]");
    assert!(
        !release.is_empty(),
        "Cargo.toml has a [profile.release] section"
    );
    // Full or line-table DWARF of the crate and its dependencies (with the bundled SQLite) made
    // the installed binary 29 to 46 MiB.
    assert!(
        matches!(
            value(&release, "debug"),
            None | Some("false" | "0" | "none")
        ),
        "[profile.release] must not add debug info: {release:?}"
    );
    // The standard library's own DWARF goes too; the symbol table stays, so backtraces name
    // every function.
    assert_eq!(
        value(&release, "strip"),
        Some("debuginfo"),
        "[profile.release] strips debug info and keeps symbols: {release:?}"
    );
}

#[test]
fn the_binary_is_linked_at_a_fixed_address_unless_a_pie_is_asked_for() {
    let bin = std::fs::read(env!("CARGO_BIN_EXE_rocprof-attach")).expect("read the binary");
    // e_type at offset 16 of the ELF header: 2 = ET_EXEC (fixed address), 3 = ET_DYN (PIE).
    let e_type = u16::from_le_bytes([bin[16], bin[17]]);
    // A static build (+crt-static) stays a static PIE.
    let pie_asked =
        option_env!("ROCPROF_ATTACH_PIE") == Some("1") || cfg!(target_feature = "crt-static");
    assert_eq!(
        e_type,
        if pie_asked { 3 } else { 2 },
        "src/capi/build.rs links rocprof-attach with -no-pie unless ROCPROF_ATTACH_PIE=1"
    );
}

/// The shared libraries `bin` asks the dynamic loader for (`DT_NEEDED`).
fn needed(bin: &[u8]) -> Vec<String> {
    use object::read::elf::{Dyn, FileHeader};
    let header = object::elf::FileHeader64::<object::Endianness>::parse(bin).expect("ELF header");
    let endian = header.endian().expect("endianness");
    let sections = header.sections(endian, bin).expect("section table");
    let Some((entries, index)) = sections.dynamic(endian, bin).expect("dynamic section") else {
        return Vec::new();
    };
    let strings = sections
        .strings(endian, bin, index)
        .expect("dynamic strings");
    entries
        .iter()
        .filter(|d| d.tag32(endian) == Some(object::elf::DT_NEEDED))
        .filter_map(|d| d.string(endian, strings).ok())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

#[test]
fn the_binary_carries_its_unwinder_instead_of_loading_libgcc_s() {
    let bin = std::fs::read(env!("CARGO_BIN_EXE_rocprof-attach")).expect("read the binary");
    let needed = needed(&bin);
    assert!(
        needed.iter().any(|n| n.starts_with("libc.so")) || cfg!(target_feature = "crt-static"),
        "{needed:?}"
    );
    // src/capi/build.rs points `-lgcc_s` at GCC's static unwinder when the compiler has it.
    let has_eh = std::process::Command::new("cc")
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .is_ok_and(|o| {
            std::path::Path::new(String::from_utf8_lossy(&o.stdout).trim()).is_absolute()
        });
    if has_eh && option_env!("ROCPROF_ATTACH_SHARED_LIBGCC") != Some("1") {
        assert!(
            !needed.iter().any(|n| n.starts_with("libgcc_s")),
            "the binary still loads libgcc_s: {needed:?}"
        );
    }
}
