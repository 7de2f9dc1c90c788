//! The build script's decision, kept free of I/O so the crate's unit tests can check it
//! (`cargo test -p rocprof-otf2`): whether to build with the OTF2 library and how to link it.
//!
//! `ROCPROF_ATTACH_OTF2=auto` (the default) builds with OTF2 wherever the library is found
//! (`pkg-config otf2`, else `otf2-config`, else the Debian paths) and without it otherwise; `on`
//! (also the `required` feature, which rocprof-attach's `otf2` feature turns on) makes a missing
//! library a build error; `off` never links it. A static build (`-C target-feature=+crt-static`)
//! needs the library's static archive: without one, `auto` builds without OTF2 and says so.

use std::path::{Path, PathBuf};

/// The environment variable that turns OTF2 on, off or back to auto.
pub const MODE_VAR: &str = "ROCPROF_ATTACH_OTF2";

/// What the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// With OTF2 if the library is found.
    Auto,
    /// With OTF2, or a build error naming what is missing.
    On,
    /// Without OTF2.
    Off,
}

/// The mode from `ROCPROF_ATTACH_OTF2` (unset or empty: auto) and the `required` feature (on).
pub fn mode(var: Option<&str>, required: bool) -> Result<Mode, String> {
    let from_var = match var.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("") => None,
        Some("auto") => Some(Mode::Auto),
        Some("on" | "1" | "yes" | "true") => Some(Mode::On),
        Some("off" | "0" | "no" | "false") => Some(Mode::Off),
        Some(other) => {
            return Err(format!(
                "{MODE_VAR}={other:?} is not one of on, off, auto (unset means auto)"
            ))
        }
    };
    match (from_var, required) {
        (Some(Mode::Off), true) => Err(format!(
            "{MODE_VAR}=off contradicts the `otf2` feature (which requires OTF2): drop one of them"
        )),
        (_, true) => Ok(Mode::On),
        (m, false) => Ok(m.unwrap_or(Mode::Auto)),
    }
}

/// The library as a probe found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Which probe found it, with the version where known ("pkg-config otf2 3.0.2").
    pub how: String,
    /// `-L` directories, in order.
    pub search: Vec<PathBuf>,
    /// `-l` libraries, in order; one of them is the OTF2 library itself ([`OTF2_NAMES`]).
    pub libs: Vec<String>,
}

/// The OTF2 library's link names: Debian's and upstream's.
pub const OTF2_NAMES: [&str; 2] = ["open-trace-format2", "otf2"];

/// Libraries the C runtime already provides (the `libc` crate links them statically in a
/// static build), so a static build needs no archive of theirs.
const C_RUNTIME: [&str; 6] = ["c", "m", "pthread", "dl", "rt", "util"];

/// `-L` directories and `-l` names of linker flags (`pkg-config --libs`, `otf2-config --ldflags
/// --libs`); anything else is ignored.
pub fn parse_flags(text: &str) -> (Vec<PathBuf>, Vec<String>) {
    let mut search = Vec::new();
    let mut libs = Vec::new();
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        if let Some(dir) = w.strip_prefix("-L") {
            let dir = if dir.is_empty() {
                words.next().unwrap_or("")
            } else {
                dir
            };
            if !dir.is_empty() && !search.iter().any(|d: &PathBuf| d == Path::new(dir)) {
                search.push(PathBuf::from(dir));
            }
        } else if let Some(lib) = w.strip_prefix("-l") {
            let lib = if lib.is_empty() {
                words.next().unwrap_or("")
            } else {
                lib
            };
            if !lib.is_empty() && !libs.iter().any(|l| l == lib) {
                libs.push(lib.to_owned());
            }
        }
    }
    (search, libs)
}

impl Found {
    /// From a probe's linker flags; `None` when they name no OTF2 library.
    pub fn from_flags(how: String, flags: &str) -> Option<Found> {
        let (search, libs) = parse_flags(flags);
        libs.iter()
            .any(|l| OTF2_NAMES.contains(&l.as_str()))
            .then_some(Found { how, search, libs })
    }
}

/// How one library is linked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// `-l name`, shared or whatever the linker picks.
    Default(String),
    /// The static archive, from this directory.
    Static(String, PathBuf),
}

/// What the build does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Build with OTF2: these search directories and libraries.
    With {
        /// `cargo:rustc-link-search=native=` directories.
        search: Vec<PathBuf>,
        /// `cargo:rustc-link-lib=` libraries, in order.
        libs: Vec<Link>,
        /// One line for the build log and `BUILD_NOTE`.
        note: String,
    },
    /// Build without OTF2; `convert -f otf2` says why (`note`) and how to get it. `warn`: say so
    /// in the build output (cargo:warning), which an explicit `off` does not.
    Without {
        /// Why, in a few words.
        note: String,
        /// Whether to print a cargo:warning.
        warn: bool,
    },
    /// A build error: OTF2 was required and cannot be had.
    Fail(String),
}

/// What to install, for the messages.
pub const INSTALL_HINT: &str =
    "install it (Debian/Ubuntu: apt-get install libopen-trace-format2-dev; \
     elsewhere OTF2 3.x from https://www.vi-hps.org/projects/score-p, so that `pkg-config otf2` or \
     `otf2-config` finds it)";

/// The decision. `found`: the probe's result, or what was tried when nothing was found.
/// `static_archive(dir, name)`: whether `dir/lib<name>.a` exists (an archive is linked wherever
/// there is one, and a static build needs one; `default_dirs` are searched after the probe's `-L`
/// directories).
pub fn decide(
    mode: Mode,
    crt_static: bool,
    found: Result<&Found, &str>,
    default_dirs: &[PathBuf],
    static_archive: &dyn Fn(&Path, &str) -> bool,
) -> Decision {
    if mode == Mode::Off {
        return Decision::Without {
            note: format!("turned off with {MODE_VAR}=off"),
            warn: false,
        };
    }
    let found = match found {
        Ok(f) => f,
        Err(tried) => {
            let what = format!("the OTF2 library was not found ({tried})");
            return match mode {
                Mode::On => Decision::Fail(format!(
                    "OTF2 is required ({MODE_VAR}=on or the `otf2` feature) but {what}: {INSTALL_HINT}, \
                     or build without it ({MODE_VAR}=off)"
                )),
                _ => Decision::Without {
                    note: what,
                    warn: true,
                },
            };
        }
    };
    let dirs: Vec<&PathBuf> = found.search.iter().chain(default_dirs).collect();
    if !crt_static {
        // The archive where there is one: the shared library would be loaded and relocated at
        // every start of rocprof-attach and of its agent (about 130,000 instructions and ten
        // system calls each, for a writer only `-f otf2` uses), and the binary would need it
        // installed to run at all.
        let archive = |lib: &String| dirs.iter().find(|d| static_archive(d, lib)).copied();
        let libs: Vec<Link> = found
            .libs
            .iter()
            .map(|lib| match archive(lib) {
                Some(dir) => Link::Static(lib.clone(), dir.clone()),
                None => Link::Default(lib.clone()),
            })
            .collect();
        let mut search = found.search.clone();
        for l in &libs {
            if let Link::Static(_, dir) = l {
                if !search.contains(dir) {
                    search.push(dir.clone());
                }
            }
        }
        let linked = if libs.iter().all(|l| matches!(l, Link::Static(..))) {
            ", linked statically"
        } else {
            ""
        };
        return Decision::With {
            search,
            libs,
            note: format!("OTF2 found with {}{linked}", found.how),
        };
    }
    let mut libs = Vec::new();
    let mut search: Vec<PathBuf> = Vec::new();
    for lib in &found.libs {
        if let Some(dir) = dirs.iter().find(|d| static_archive(d, lib)) {
            if !search.contains(dir) {
                search.push((*dir).clone());
            }
            libs.push(Link::Static(lib.clone(), (*dir).clone()));
        } else if C_RUNTIME.contains(&lib.as_str()) {
            // The libc crate links these itself in a static build.
        } else {
            let where_ = dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ");
            let what = format!(
                "a static build (crt-static) needs lib{lib}.a and none is in {where_} \
                 (OTF2 found with {})",
                found.how
            );
            return match mode {
                Mode::On => Decision::Fail(format!(
                    "OTF2 is required ({MODE_VAR}=on or the `otf2` feature) but {what}: build OTF2 \
                     with static libraries, or build without it ({MODE_VAR}=off)"
                )),
                _ => Decision::Without {
                    note: what,
                    warn: true,
                },
            };
        }
    }
    Decision::With {
        search,
        libs,
        note: format!("OTF2 found with {}, linked statically", found.how),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn debian() -> Found {
        Found::from_flags("pkg-config otf2 3.0.2".into(), "-lopen-trace-format2 \n").unwrap()
    }

    fn no_archive(_: &Path, _: &str) -> bool {
        false
    }

    #[test]
    fn the_mode_comes_from_the_variable_and_the_feature() {
        assert_eq!(mode(None, false), Ok(Mode::Auto));
        assert_eq!(mode(Some(""), false), Ok(Mode::Auto));
        assert_eq!(mode(Some("auto"), false), Ok(Mode::Auto));
        assert_eq!(mode(Some("ON"), false), Ok(Mode::On));
        assert_eq!(mode(Some("1"), false), Ok(Mode::On));
        assert_eq!(mode(Some("off"), false), Ok(Mode::Off));
        assert_eq!(mode(Some("0"), false), Ok(Mode::Off));
        assert_eq!(mode(None, true), Ok(Mode::On));
        assert_eq!(mode(Some("auto"), true), Ok(Mode::On));
        assert!(mode(Some("off"), true).unwrap_err().contains("contradicts"));
        let bad = mode(Some("maybe"), false).unwrap_err();
        assert!(
            bad.contains("ROCPROF_ATTACH_OTF2") && bad.contains("on, off, auto"),
            "{bad}"
        );
    }

    #[test]
    fn flags_of_pkg_config_and_otf2_config_are_parsed() {
        let (search, libs) =
            parse_flags("-L/opt/otf2/lib -L /usr/lib -lotf2 -l m -Wl,-rpath,/x -lotf2");
        assert_eq!(
            search,
            [PathBuf::from("/opt/otf2/lib"), PathBuf::from("/usr/lib")]
        );
        assert_eq!(libs, ["otf2", "m"]);
        assert_eq!(debian().libs, ["open-trace-format2"]);
        let upstream =
            Found::from_flags("otf2-config".into(), "-L/opt/otf2/lib -lotf2 -lm").unwrap();
        assert_eq!(upstream.libs, ["otf2", "m"]);
        assert_eq!(Found::from_flags("pkg-config".into(), "-lfoo"), None);
        assert_eq!(Found::from_flags("pkg-config".into(), ""), None);
    }

    #[test]
    fn off_never_links_and_does_not_warn() {
        let d = decide(Mode::Off, false, Ok(&debian()), &[], &no_archive);
        assert_eq!(
            d,
            Decision::Without {
                note: "turned off with ROCPROF_ATTACH_OTF2=off".into(),
                warn: false
            }
        );
    }

    #[test]
    fn auto_links_what_it_finds_and_otherwise_builds_without_with_a_warning() {
        let d = decide(Mode::Auto, false, Ok(&debian()), &[], &no_archive);
        assert_eq!(
            d,
            Decision::With {
                search: vec![],
                libs: vec![Link::Default("open-trace-format2".into())],
                note: "OTF2 found with pkg-config otf2 3.0.2".into(),
            }
        );
        match decide(
            Mode::Auto,
            false,
            Err("no pkg-config otf2"),
            &[],
            &no_archive,
        ) {
            Decision::Without { note, warn } => {
                assert!(warn);
                assert!(note.contains("not found (no pkg-config otf2)"), "{note}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_dynamic_build_links_the_archive_where_there_is_one() {
        let lib = PathBuf::from("/usr/lib/x86_64-linux-gnu");
        let has = |d: &Path, n: &str| {
            d == Path::new("/usr/lib/x86_64-linux-gnu") && n == "open-trace-format2"
        };
        assert_eq!(
            decide(
                Mode::Auto,
                false,
                Ok(&debian()),
                std::slice::from_ref(&lib),
                &has
            ),
            Decision::With {
                search: vec![lib.clone()],
                libs: vec![Link::Static("open-trace-format2".into(), lib)],
                note: "OTF2 found with pkg-config otf2 3.0.2, linked statically".into(),
            }
        );
    }

    #[test]
    fn on_makes_a_missing_library_a_build_error_naming_the_package() {
        match decide(Mode::On, false, Err("no pkg-config otf2"), &[], &no_archive) {
            Decision::Fail(e) => {
                assert!(
                    e.contains("apt-get install libopen-trace-format2-dev"),
                    "{e}"
                );
                assert!(e.contains("no pkg-config otf2"), "{e}");
                assert!(e.contains("ROCPROF_ATTACH_OTF2=off"), "{e}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_static_build_links_the_archive_or_goes_without_it() {
        let lib = PathBuf::from("/usr/lib/x86_64-linux-gnu");
        let upstream = Found::from_flags("otf2-config".into(), "-lotf2 -lm").unwrap();
        let has = |d: &Path, n: &str| d == Path::new("/usr/lib/x86_64-linux-gnu") && n == "otf2";
        assert_eq!(
            decide(
                Mode::Auto,
                true,
                Ok(&upstream),
                std::slice::from_ref(&lib),
                &has
            ),
            Decision::With {
                search: vec![lib.clone()],
                libs: vec![Link::Static("otf2".into(), lib.clone())],
                note: "OTF2 found with otf2-config, linked statically".into(),
            }
        );
        match decide(
            Mode::Auto,
            true,
            Ok(&debian()),
            std::slice::from_ref(&lib),
            &no_archive,
        ) {
            Decision::Without { note, warn } => {
                assert!(warn);
                assert!(
                    note.contains("crt-static") && note.contains("libopen-trace-format2.a"),
                    "{note}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            decide(Mode::On, true, Ok(&debian()), &[lib], &no_archive),
            Decision::Fail(e) if e.contains("libopen-trace-format2.a")
        ));
    }
}
