//! Every citation of the attach protocol resolves: the source, the tests, the docs and the
//! examples cite `docs/protocol.md section N` (`sections N and M`, `sections N to M`, `section N,
//! step M`, `section 11, item M`), and each such section is a heading of docs/protocol.md and each
//! step or item a numbered entry of that section. Older forms that pointed outside the repository
//! (the spec file of the research notes, `protocol section N`, `protocol N.M`) must not come back,
//! and docs/protocol.md's references to its own sections must resolve too.

use regex::Regex;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Separator between the words of a citation: spaces, line breaks and comment markers, so a
/// citation wrapped across two comment lines still counts.
const SEP: &str = r"[\s/!*#]+";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Sections of docs/protocol.md (from its `##` / `###` headings) with the numbered entries
/// (`1.`, `25b.`) of each section's own text.
struct Protocol {
    sections: BTreeMap<String, BTreeSet<String>>,
}

impl Protocol {
    fn parse(text: &str) -> Protocol {
        let heading = Regex::new(r"^#{2,3} (\d+(?:\.\d+)?)[. ]").unwrap();
        let entry = Regex::new(r"^\s*(\d+b?)\. ").unwrap();
        let mut sections: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut current: Option<String> = None;
        let mut in_code = false;
        for line in text.lines() {
            if line.starts_with("```") {
                in_code = !in_code;
                continue;
            }
            if in_code {
                continue;
            }
            if line.starts_with('#') {
                current = heading.captures(line).map(|c| c[1].to_string());
                if let Some(s) = &current {
                    assert!(
                        sections.insert(s.clone(), BTreeSet::new()).is_none(),
                        "docs/protocol.md has two headings numbered {s}"
                    );
                }
                continue;
            }
            if let (Some(s), Some(c)) = (&current, entry.captures(line)) {
                sections.get_mut(s).unwrap().insert(c[1].to_string());
            }
        }
        Protocol { sections }
    }

    /// Why `section` (and its numbered `entries`) does not resolve, if it does not.
    fn check(&self, section: &str, entries: &[String]) -> Option<String> {
        let Some(numbered) = self.sections.get(section) else {
            return Some(format!("no heading '{section}' in docs/protocol.md"));
        };
        let missing: Vec<&String> = entries.iter().filter(|e| !numbered.contains(*e)).collect();
        (!missing.is_empty()).then(|| {
            format!("docs/protocol.md section {section} has no numbered entry {missing:?}")
        })
    }
}

/// The numbers of a list such as `2, 3 and 9` or `3.1 to 3.4` (a range checks both ends).
fn numbers(list: &str) -> Vec<String> {
    let split = Regex::new(&format!(r",{SEP}|,|{SEP}and{SEP}|{SEP}to{SEP}")).unwrap();
    split
        .split(list)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Citations in `text`: (byte offset, sections, numbered entries).
fn citations(text: &str, prefix: &str) -> Vec<(usize, Vec<String>, Vec<String>)> {
    let num = r"\d+(?:\.\d+)?";
    let joiner = format!(r"(?:,{SEP}?|{SEP}(?:and|to){SEP})");
    let re = Regex::new(&format!(
        r"{prefix}sections?{SEP}({num}(?:{joiner}{num})*)(?:,{SEP}(?:items?|steps?){SEP}(\d+b?(?:(?:,{SEP}?|{SEP}and{SEP})\d+b?)*))?"
    ))
    .unwrap();
    re.captures_iter(text)
        .map(|c| {
            let at = c.get(0).unwrap().start();
            let sections = numbers(&c[1]);
            let entries = c.get(2).map(|m| numbers(m.as_str())).unwrap_or_default();
            (at, sections, entries)
        })
        .collect()
}

fn line_of(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count() + 1
}

/// Text files under the scanned roots (binary files and build outputs are skipped).
fn scanned_files() -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name();
            if matches!(name.to_str(), Some("target" | "corpus" | "__pycache__")) {
                continue;
            }
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let root = root();
    let mut paths = vec![root.join("README.md")];
    for d in ["src", "crates", "tests", "docs", "examples", "python"] {
        walk(&root.join(d), &mut paths);
    }
    paths.sort();
    paths
        .into_iter()
        .filter_map(|p| {
            let text = String::from_utf8(std::fs::read(&p).ok()?).ok()?;
            Some((p.strip_prefix(&root).unwrap().to_path_buf(), text))
        })
        .collect()
}

#[test]
fn protocol_citations_resolve() {
    let protocol_text =
        std::fs::read_to_string(root().join("docs/protocol.md")).expect("docs/protocol.md exists");
    let protocol = Protocol::parse(&protocol_text);
    assert!(
        protocol.sections.len() > 30,
        "docs/protocol.md: only {} numbered headings found",
        protocol.sections.len()
    );
    // The weaknesses the code cites by item number are all there.
    let items = &protocol.sections["11"];
    for i in (1..=26).map(|i| i.to_string()).chain(["25b".to_string()]) {
        assert!(
            items.contains(&i),
            "docs/protocol.md section 11 lacks item {i}"
        );
    }

    let cite = format!(r"docs/protocol\.md(?:\]\([^)]*\))?{SEP}");
    let spec_name = concat!("attach-", "protocol.md");
    let stale = [
        Regex::new(r"(?i)\bprotocol[\s,(:]+(?:§\s*|sections?\s+)?\d").unwrap(),
        Regex::new(r"(?i)\bsections?\s+\d+(?:\.\d+)?\s+of\s+the\s+protocol").unwrap(),
    ];
    let dotted = Regex::new(r"\bsections?\s+\d+\.\d+").unwrap();

    let mut problems = Vec::new();
    let mut resolved = 0;
    let files = scanned_files();
    assert!(files.len() > 100, "only {} files scanned", files.len());
    for (path, text) in &files {
        let shown = path.display();
        if text.contains(spec_name) {
            problems.push(format!(
                "{shown}: names {spec_name}, which is not in the repository (cite docs/protocol.md)"
            ));
        }
        let is_protocol = path == Path::new("docs/protocol.md");
        for (at, sections, entries) in citations(text, &cite) {
            for s in &sections {
                let why = protocol.check(s, if sections.len() == 1 { &entries } else { &[] });
                match why {
                    Some(why) => problems.push(format!("{shown}:{}: {why}", line_of(text, at))),
                    None => resolved += 1,
                }
            }
        }
        if is_protocol {
            // Its references to its own sections and items.
            for (at, sections, entries) in citations(text, r"\b") {
                for s in &sections {
                    let e = if sections.len() == 1 {
                        &entries[..]
                    } else {
                        &[]
                    };
                    if let Some(why) = protocol.check(s, e) {
                        problems.push(format!("{shown}:{}: {why}", line_of(text, at)));
                    }
                }
            }
            continue;
        }
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let context = format!("{}\n{line}", if i > 0 { lines[i - 1] } else { "" });
            if stale.iter().any(|re| re.is_match(line)) {
                problems.push(format!(
                    "{shown}:{}: cites the protocol without naming docs/protocol.md: {}",
                    i + 1,
                    line.trim()
                ));
            } else if dotted.is_match(line)
                && !context.contains("protocol.md")
                && !context.contains("output-formats")
            {
                problems.push(format!(
                    "{shown}:{}: a section number without its document (write docs/protocol.md \
                     section N): {}",
                    i + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} unresolved protocol citation(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(
        resolved >= 30,
        "only {resolved} citations of docs/protocol.md found: is the citation pattern still right?"
    );
}

#[test]
fn citation_pattern_reads_every_form() {
    let cite = format!(r"docs/protocol\.md(?:\]\([^)]*\))?{SEP}");
    let forms = [
        ("(docs/protocol.md section 5.10)", vec!["5.10"], vec![]),
        (
            "docs/protocol.md sections 5.4 and 6.4",
            vec!["5.4", "6.4"],
            vec![],
        ),
        (
            "docs/protocol.md sections 2, 3 and 9,",
            vec!["2", "3", "9"],
            vec![],
        ),
        (
            "docs/protocol.md sections 3.1 to 3.4, 9",
            vec!["3.1", "3.4", "9"],
            vec![],
        ),
        (
            "docs/protocol.md section 11, items 16 and 17",
            vec!["11"],
            vec!["16", "17"],
        ),
        (
            "docs/protocol.md section 3.1, step 4: status 8",
            vec!["3.1"],
            vec!["4"],
        ),
        (
            "[docs/protocol.md](protocol.md) section\n5.10).",
            vec!["5.10"],
            vec![],
        ),
        (
            "(docs/protocol.md\n//! section 11, item 9)",
            vec!["11"],
            vec!["9"],
        ),
    ];
    for (text, sections, entries) in forms {
        let found = citations(text, &cite);
        assert_eq!(found.len(), 1, "{text:?}");
        assert_eq!(found[0].1, sections, "{text:?}");
        assert_eq!(found[0].2, entries, "{text:?}");
    }
}
