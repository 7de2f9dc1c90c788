//! The manual pages and the completion scripts: a page for every subcommand with all its options,
//! no reference to a page that does not exist, examples kept as preformatted blocks; completions
//! of every subcommand's options, of process ids after `-p`/`--pid`/`--attach` and of the format
//! names after `-f`.

use crate::prereq;

use rocprof_attach::cli::args::command;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_rocprof-attach");

/// Standard output of a successful run.
fn ok(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).output().expect("run");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// How roff writes `text` (clap_mangen escapes every `-`).
fn roff(text: &str) -> String {
    text.replace('-', "\\-")
}

/// The subcommands with a page (all but `help`).
fn subcommands() -> Vec<clap::Command> {
    let mut cmd = command();
    cmd.build();
    cmd.get_subcommands()
        .filter(|s| s.get_name() != "help")
        .cloned()
        .collect()
}

#[test]
fn every_subcommand_has_a_page_with_all_its_options() {
    let top = ok(&["man"]);
    let subs = subcommands();
    for name in ["top", "convert", "summary", "query", "completions"] {
        assert!(subs.iter().any(|s| s.get_name() == name), "{name}");
    }
    for sub in &subs {
        let name = sub.get_name();
        let page = ok(&["man", name]);
        assert!(
            page.contains(&format!(".TH rocprof-attach-{name} 1")),
            "{name}: {page}"
        );
        let mut options = 0;
        for a in sub.get_arguments().filter(|a| !a.is_hide_set()) {
            if let Some(l) = a.get_long() {
                assert!(page.contains(&roff(&format!("--{l}"))), "man {name}: --{l}");
                options += 1;
            }
            if let Some(c) = a.get_short() {
                assert!(
                    page.contains(&format!("\\fB\\-{c}\\fR")),
                    "man {name}: -{c}"
                );
            }
        }
        assert!(options > 0, "{name}");
        // The top page names it.
        assert!(
            top.contains(&format!("{}(1)", roff(&format!("rocprof-attach-{name}")))),
            "{name}"
        );
    }
    // And names no other page: every rocprof-attach-X(1) is a page `man X` prints.
    let refs = regex::Regex::new(r"rocprof\\-attach\\-([a-z\\-]+)\(1\)").unwrap();
    let mut n = 0;
    for page in std::iter::once(top.clone()).chain(subs.iter().map(|s| ok(&["man", s.get_name()])))
    {
        for c in refs.captures_iter(&page) {
            let name = c[1].replace("\\-", "-");
            assert!(
                subs.iter().any(|s| s.get_name() == name),
                "rocprof-attach-{name}(1) is referenced but `man {name}` does not exist"
            );
            n += 1;
        }
    }
    assert_eq!(n, subs.len(), "one reference per subcommand");
    // The convert page: its options, its spellings.
    let convert = ok(&["man", "convert"]);
    for o in [
        "--input",
        "--output-format",
        "--output-directory",
        "--output-file",
        "--stats",
    ] {
        assert!(convert.contains(&roff(o)), "{o}");
    }
    assert!(!convert.contains(&roff("--output-path")), "hidden alias");
    // A page that does not exist is a usage error naming those that do.
    let out = Command::new(BIN).args(["man", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("convert") && err.contains("`rocprof-attach man --help`"),
        "{err}"
    );
}

/// Every example line is inside a `.nf`/`.fi` (or `.EX`/`.EE`) block, so groff keeps its columns;
/// rendered, the columns are still there.
#[test]
fn examples_are_preformatted() {
    let mut pages = vec![(String::new(), ok(&["man"]))];
    for s in subcommands() {
        let name = s.get_name().to_string();
        let page = ok(&["man", &name]);
        pages.push((name, page));
    }
    for (name, page) in &pages {
        let mut pre = false;
        let mut examples = 0;
        let mut section = "";
        for line in page.lines() {
            match line {
                ".nf" | ".EX" => pre = true,
                ".fi" | ".EE" => pre = false,
                _ => {}
            }
            if let Some(s) = line.strip_prefix(".SH ") {
                section = if s.starts_with("EXAMPLE") {
                    "EXAMPLES"
                } else {
                    ""
                };
                assert!(!pre, "man {name}: a section inside a .nf block");
            }
            if section == "EXAMPLES" && !line.starts_with('.') {
                assert!(pre, "man {name}: example not preformatted: {line}");
                assert!(line.starts_with("rocprof\\-attach ") || line.starts_with("ROCPROF_"));
                examples += 1;
            }
        }
        assert!(!pre, "man {name}: .nf without .fi");
        if name != "query" {
            assert!(examples > 0, "man {name}: no examples");
        }
    }
    // Rendered, a column of the convert examples is where the help puts it.
    if prereq::programs(&["groff"], "groff-base") {
        for (name, page) in &pages {
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("page.1");
            std::fs::write(&file, page).unwrap();
            let out = Command::new("groff")
                .args(["-man", "-Tascii", "-ww", "-rLL=200n"])
                .arg(&file)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success() && stderr.is_empty(),
                "man {name}: {stderr}"
            );
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            if name == "convert" {
                assert!(
                    text.contains(
                        "rocprof-attach convert -i results.db                      CSV files in ./rocpd-output-data"
                    ),
                    "{text}"
                );
            }
        }
    }
}

#[test]
fn completions_complete_pids_formats_and_subcommand_options() {
    let bash = ok(&["completions", "bash"]);
    let zsh = ok(&["completions", "zsh"]);
    let fish = ok(&["completions", "fish"]);
    for script in [&bash, &zsh, &fish] {
        assert!(!script.contains("__ROCPROF_ATTACH_PIDS__"));
    }
    // zsh: _pids after each spelling of -p; the format names after each -f.
    for spec in ["'*-p+[", "'*--pid=[", "'*--attach=["] {
        let line = zsh.lines().find(|l| l.starts_with(spec)).expect(spec);
        assert!(line.ends_with(":_sequence _pids' \\"), "{line}");
    }
    assert!(
        zsh.contains(":FORMAT:(csv json pftrace otf2 rocpd)' \\"),
        "{zsh}"
    );
    for sub in ["convert", "summary", "query"] {
        assert!(zsh.lines().any(|l| l.trim() == format!("({sub})")), "{sub}");
    }
    // The session's, convert's, summary's and query's.
    assert_eq!(
        zsh.matches("'--output-format=[").count() + zsh.matches("'*--output-format=[").count(),
        4
    );
    assert!(zsh.contains("'--output-directory=["));
    // fish: __fish_complete_pids for -p/--pid/--attach; the formats of the session and convert.
    let pid = fish
        .lines()
        .find(|l| l.contains(" -s p -l pid -l attach "))
        .expect("fish -p");
    assert!(
        pid.ends_with(r#"-r -f -a "(__fish_complete_pids)""#),
        "{pid}"
    );
    let f = fish
        .lines()
        .find(|l| {
            l.contains("__fish_rocprof_attach_needs_command")
                && l.contains(" -s f -l output-format ")
        })
        .expect("fish -f");
    for v in ["csv", "json", "pftrace", "otf2", "rocpd"] {
        assert!(f.contains(v), "{f}");
    }
    assert!(
        fish.contains("__fish_rocprof_attach_using_subcommand convert\" -s d -l output-directory")
    );

    // bash: run the completion function as bash would.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rocprof-attach.bash");
    std::fs::write(&file, &bash).unwrap();
    let complete = |words: &[&str]| -> Vec<String> {
        let cword = words.len() - 1;
        let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        let script = format!(
            "source '{}'; COMP_WORDS=({}); COMP_CWORD={cword}; \
             _rocprof__attach rocprof-attach '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            file.display(),
            quoted.join(" "),
            words[cword],
            words[cword - 1],
        );
        let out = Command::new("bash").arg("-c").arg(script).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    };
    let me = std::process::id().to_string();
    for opt in ["-p", "--pid", "--attach"] {
        let got = complete(&["rocprof-attach", opt, ""]);
        assert!(got.contains(&me), "{opt}: {got:?}");
    }
    let got = complete(&["rocprof-attach", "top", "-p", ""]);
    assert!(got.contains(&me), "top -p: {got:?}");
    // After a comma, the next pid of the list.
    let got = complete(&["rocprof-attach", "-p", "1,"]);
    assert!(got.contains(&format!("1,{me}")), "{got:?}");
    assert_eq!(
        complete(&["rocprof-attach", "-f", ""]),
        ["csv", "json", "pftrace", "otf2", "rocpd"]
    );
    assert_eq!(
        complete(&["rocprof-attach", "convert", "-f", ""]),
        ["csv", "json", "pftrace", "otf2"]
    );
    assert_eq!(
        complete(&["rocprof-attach", "summary", "--output-format", ""]),
        ["console", "csv", "json", "md", "html"]
    );
    let convert = complete(&["rocprof-attach", "convert", "--"]);
    for o in [
        "--input",
        "--output-format",
        "--output-directory",
        "--output-file",
        "--stats",
    ] {
        assert!(convert.iter().any(|c| c == o), "{o}: {convert:?}");
    }
    assert_eq!(
        complete(&["rocprof-attach", "man", ""]),
        [
            "-h",
            "--help",
            "top",
            "convert",
            "summary",
            "query",
            "install-library",
            "completions",
            "man"
        ]
    );
}

/// Every subcommand spells the output directory `-d/--output-directory` and the format
/// `-f/--output-format`, as the session does.
#[test]
fn one_spelling_in_every_subcommand() {
    let mut top = command();
    top.build();
    let mut cmds = vec![top.clone()];
    cmds.extend(top.get_subcommands().cloned());
    let mut seen = 0;
    for cmd in &cmds {
        for a in cmd.get_arguments() {
            let Some(long) = a.get_long() else { continue };
            let names: Vec<&str> = std::iter::once(long)
                .chain(a.get_all_aliases().unwrap_or_default())
                .collect();
            let is = |any: &[&str]| names.iter().any(|n| any.contains(n));
            if is(&["output-directory", "output-path", "output-dir"]) {
                assert_eq!(
                    (a.get_short(), long),
                    (Some('d'), "output-directory"),
                    "{}",
                    cmd.get_name()
                );
                seen += 1;
            }
            if is(&["output-format", "format"]) {
                assert_eq!(
                    (a.get_short(), long),
                    (Some('f'), "output-format"),
                    "{}",
                    cmd.get_name()
                );
                seen += 1;
            }
        }
    }
    // session -d -f, top -d, convert -d -f, summary -d -f, query -f
    assert_eq!(seen, 8);
}
