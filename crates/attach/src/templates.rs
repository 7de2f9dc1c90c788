//! The tool's output path templates (`-d`/`-o`, output-formats.md section 6), expanded the way
//! rocprofv3's tool expands them in the target (`output_key.cpp`, `format_path.cpp`): `%key%` and
//! `{key}`, the short `%h %p %j %r %s`, `%env{NAME}%` and `$env{NAME}` (also `ENV`), repeated
//! until the text stops changing.
//!
//! A key whose value cannot be known from outside the target (`%launch_time%`, `%psize%`, the
//! host name in another UTS namespace, ...) becomes a wildcard that matches one path component's
//! worth of text (no `/`), so the output snapshot looks at exactly what the templates can name,
//! never at a whole file system.

use rocprof_engine::procfs;
use std::path::{Path, PathBuf};

/// Variables holding the MPI rank, in the order rocprofv3 consults them for `%rank%`.
pub const RANK_VARIABLES: [&str; 6] = [
    "SLURM_PROCID",
    "MPI_RANK",
    "MPI_LOCALRANKID",
    "MPI_RANKID",
    "MV2_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_RANK",
];

/// What the keys of one process expand to; None where it cannot be known from here.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// The PID the process sees for itself.
    pub pid: Option<i32>,
    /// Its parent, in its own PID namespace.
    pub ppid: Option<i32>,
    /// Its process group.
    pub pgid: Option<i32>,
    /// Its session.
    pub psid: Option<i32>,
    /// Its working directory as it sees it.
    pub cwd: Option<String>,
    /// Its host name (when it shares our UTS namespace).
    pub hostname: Option<String>,
    /// Its command line.
    pub argv: Vec<String>,
    /// Its environment (at the time the tool expands the templates): the first pair of a name
    /// is the one in effect, so what the attach sends comes before the target's own variables.
    pub env: Vec<(String, String)>,
}

impl Facts {
    /// Read the facts of process `pid` from `/proc`; `environ` and `own_pid` when the caller
    /// already has them (the preflight's), `sent` the pairs the attach sets in the target.
    pub fn of(
        pid: i32,
        environ: Option<&[(String, String)]>,
        own_pid: Option<i32>,
        sent: &[(String, String)],
    ) -> Facts {
        let status = procfs::status(pid).ok();
        let nested = status.as_ref().is_none_or(|s| s.ns_pid.len() > 1);
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
        // Fields after the command name (which may hold spaces): state ppid pgrp session ...
        let field = |i: usize| -> Option<i32> {
            let s = stat.as_deref()?;
            s[s.rfind(')')? + 1..]
                .split_whitespace()
                .nth(i)?
                .parse()
                .ok()
        };
        // What the attach sends, then the target's own variables: [`Facts::var`] takes the first
        // pair of a name, so a variable sent hides the target's (as the register's `setenv`
        // replaces it), with no set of the sent names built to leave the target's out.
        let mut env: Vec<(String, String)> = sent.to_vec();
        match environ {
            Some(e) => env.extend_from_slice(e),
            None => env.extend(procfs::environ(pid).unwrap_or_default()),
        }
        Facts {
            pid: own_pid.or_else(|| status.as_ref().and_then(|s| s.ns_pid.last().copied())),
            ppid: if nested { None } else { field(1) },
            pgid: if nested { None } else { field(2) },
            psid: if nested { None } else { field(3) },
            cwd: cwd_of(pid),
            hostname: hostname_of(pid),
            argv: procfs::cmdline(pid).unwrap_or_default(),
            env,
        }
    }

    fn var(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The working directory of `pid` as it sees it (its root directory stripped when it has its
/// own, e.g. in a container).
fn cwd_of(pid: i32) -> Option<String> {
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?;
    let root = std::fs::read_link(format!("/proc/{pid}/root")).ok()?;
    let rel = cwd.strip_prefix(&root).ok()?;
    Some(Path::new("/").join(rel).to_string_lossy().into_owned())
}

/// The host name process `pid` sees, when it shares our UTS namespace.
fn hostname_of(pid: i32) -> Option<String> {
    // Ours is read once per run, however many processes are attached.
    static OURS: std::sync::OnceLock<Option<(PathBuf, String)>> = std::sync::OnceLock::new();
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/uts")).ok();
    let (our_ns, hostname) = OURS
        .get_or_init(|| {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
            Some((ns("self")?, host.trim().to_string()))
        })
        .as_ref()?;
    (ns(&pid.to_string())? == *our_ns).then(|| hostname.clone())
}

/// One piece of an expanded template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Known text.
    Text(String),
    /// A key whose value is not known here: any text without `/`.
    Any,
}

/// An expanded template: text and wildcards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern(pub Vec<Piece>);

/// The value of key `key` (without its delimiters), Some(None) for a key known to the tool whose
/// value we cannot know, None for text that is not a key.
fn value(key: &str, f: &Facts) -> Option<Option<String>> {
    let num = |v: Option<i32>| v.map(|n| n.to_string());
    let rank = || {
        RANK_VARIABLES
            .iter()
            .find_map(|v| f.var(v))
            .unwrap_or("0")
            .to_string()
    };
    Some(match key {
        "pid" | "p" => num(f.pid),
        "ppid" => num(f.ppid),
        "pgid" => num(f.pgid),
        "psid" => num(f.psid),
        "hostname" | "h" => f.hostname.clone(),
        "cwd" => f.cwd.clone(),
        "job" | "j" => Some(f.var("SLURM_JOB_ID").unwrap_or("0").to_string()),
        "rank" | "r" => Some(rank()),
        "nid" => match f.var("SLURM_PROCID") {
            Some(v) => Some(v.to_string()),
            None if RANK_VARIABLES.iter().any(|v| f.var(v).is_some()) => Some(rank()),
            None => num(f.pid),
        },
        "tag" => f
            .argv
            .first()
            .map(|a| a.rsplit('/').next().unwrap_or(a).to_string()),
        "size" | "s" | "psize" | "argv" | "argt" | "args" | "launch_date" | "launch_time" => None,
        k if k.starts_with("arg") && k[3..].chars().all(|c| c.is_ascii_digit()) && k.len() > 3 => {
            None
        }
        _ => return None,
    })
}

/// `%env{NAME}%`-style value: leading tabs, spaces and `/` dropped, the others turned into `_`.
fn env_value(f: &Facts, name: &str) -> String {
    f.var(name)
        .unwrap_or("")
        .trim_start_matches(['\t', ' ', '/'])
        .replace(['\t', ' ', '/'], "_")
}

/// Expand every key of `text` once; wildcards become `\0` (never in a path).
fn expand_once(text: &str, f: &Facts) -> String {
    let mut out = String::new();
    let mut rest = text;
    'outer: while let Some(c) = rest.chars().next() {
        // %env{NAME}%, $env{NAME} (also ENV).
        for (open, close) in [
            ("%env{", "}%"),
            ("%ENV{", "}%"),
            ("$env{", "}"),
            ("$ENV{", "}"),
        ] {
            if let Some(after) = rest.strip_prefix(open) {
                if let Some(end) = after.find(close) {
                    let name = &after[..end];
                    if !name.is_empty()
                        && name
                            .chars()
                            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                    {
                        out.push_str(&env_value(f, name));
                        rest = &after[end + close.len()..];
                        continue 'outer;
                    }
                }
            }
        }
        // %key% and {key}.
        for (open, close) in [('%', '%'), ('{', '}')] {
            if c == open {
                if let Some(end) = rest[1..].find(close) {
                    if let Some(v) = value(&rest[1..1 + end], f) {
                        out.push_str(v.as_deref().unwrap_or("\0"));
                        rest = &rest[2 + end..];
                        continue 'outer;
                    }
                }
            }
        }
        // The short forms %h %p %j %r %s.
        if c == '%' {
            if let Some(k @ ('h' | 'p' | 'j' | 'r' | 's')) = rest[1..].chars().next() {
                let v = value(&k.to_string(), f).flatten();
                out.push_str(v.as_deref().unwrap_or("\0"));
                rest = &rest[2..];
                continue;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Expand `template` for the process described by `facts`, repeating until it stops changing.
pub fn expand(template: &str, facts: &Facts) -> Pattern {
    let mut text = template.to_string();
    for _ in 0..8 {
        let next = expand_once(&text, facts);
        if next == text {
            break;
        }
        text = next;
    }
    let mut pieces = Vec::new();
    for (i, part) in text.split('\0').enumerate() {
        if i > 0 {
            pieces.push(Piece::Any);
        }
        if !part.is_empty() {
            pieces.push(Piece::Text(part.to_string()));
        }
    }
    Pattern(pieces)
}

impl Pattern {
    /// The whole text when no key is left unknown.
    pub fn exact(&self) -> Option<String> {
        match &self.0[..] {
            [] => Some(String::new()),
            [Piece::Text(t)] => Some(t.clone()),
            _ => None,
        }
    }

    /// The known directory everything named by the pattern lies under: its text up to the last
    /// `/` before the first wildcard (the pattern names a file prefix, `<dir>/<file>`).
    pub fn base_dir(&self) -> PathBuf {
        let head = match self.0.first() {
            Some(Piece::Text(t)) => t.as_str(),
            _ => "",
        };
        match head.rfind('/') {
            Some(0) | None => PathBuf::from("/"),
            Some(i) => PathBuf::from(&head[..i]),
        }
    }

    /// The pattern as a [`Glob`] matching the paths the tool writes under it: `<prefix>` followed
    /// by the end, `_`, `.` or `/` (or anything when it ends with `/`).
    pub fn regex(&self) -> Glob {
        let open_dir = matches!(self.0.last(), Some(Piece::Text(t)) if t.ends_with('/'));
        Glob {
            pieces: self.0.clone(),
            tail: if open_dir { Tail::Any } else { Tail::Separator },
        }
    }

    /// [`Glob`]s for the path components below [`Pattern::base_dir`], one per component of the
    /// pattern's remaining text, each matching a whole component.
    pub fn components(&self) -> Vec<Glob> {
        let base = self.base_dir().to_string_lossy().into_owned();
        // The pieces as (text or wildcard), the base directory dropped from the front.
        let mut comps: Vec<Vec<Piece>> = vec![Vec::new()];
        let mut skip = match self.0.first() {
            Some(Piece::Text(t)) if t.starts_with(&base) => base.len(),
            _ => 0,
        };
        for p in &self.0 {
            match p {
                Piece::Text(t) => {
                    let t = if skip > 0 {
                        let cut = skip.min(t.len());
                        skip -= cut;
                        &t[cut..]
                    } else {
                        t.as_str()
                    };
                    for (i, part) in t.split('/').enumerate() {
                        if i > 0 {
                            comps.push(Vec::new());
                        }
                        if !part.is_empty() {
                            comps
                                .last_mut()
                                .expect("one")
                                .push(Piece::Text(part.to_string()));
                        }
                    }
                }
                Piece::Any => comps.last_mut().expect("one").push(Piece::Any),
            }
        }
        comps
            .into_iter()
            .filter(|c| !c.is_empty())
            .map(|pieces| Glob {
                pieces,
                tail: Tail::End,
            })
            .collect()
    }
}

/// What may follow the pieces of a [`Glob`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tail {
    /// Nothing: the whole text is matched.
    End,
    /// The end, or `_`, `.` or `/` and then anything (a file prefix: `<prefix>_results.db`).
    Separator,
    /// Anything.
    Any,
}

/// Text and wildcards (each matching any run of characters without `/`) matched from the start
/// of a path, without compiling a regular expression: what the output snapshot compares every
/// name it sees with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    pieces: Vec<Piece>,
    tail: Tail,
}

impl Glob {
    /// Whether `text` matches (from its start).
    pub fn is_match(&self, text: &str) -> bool {
        self.matches_from(0, text)
    }

    fn matches_from(&self, piece: usize, rest: &str) -> bool {
        match self.pieces.get(piece) {
            None => match self.tail {
                Tail::End => rest.is_empty(),
                Tail::Separator => rest.is_empty() || rest.starts_with(['_', '.', '/']),
                Tail::Any => true,
            },
            Some(Piece::Text(t)) => rest
                .strip_prefix(t.as_str())
                .is_some_and(|r| self.matches_from(piece + 1, r)),
            Some(Piece::Any) => {
                // Any run of characters up to the component's end: each place it may end.
                let component = rest.find('/').unwrap_or(rest.len());
                rest[..component]
                    .char_indices()
                    .map(|(i, _)| i)
                    .chain(std::iter::once(component))
                    .any(|i| self.matches_from(piece + 1, &rest[i..]))
            }
        }
    }

    /// The pattern as a regular expression's text (for keys and messages).
    pub fn as_str(&self) -> String {
        let mut re = String::from("^");
        for p in &self.pieces {
            match p {
                Piece::Text(t) => re.push_str(&regex::escape(t)),
                Piece::Any => re.push_str("[^/]*"),
            }
        }
        re.push_str(match self.tail {
            Tail::End => "$",
            Tail::Separator => "(?:$|[_./])",
            Tail::Any => "",
        });
        re
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> Facts {
        Facts {
            pid: Some(42),
            ppid: Some(7),
            pgid: Some(40),
            psid: Some(30),
            cwd: Some("/work/run dir".into()),
            hostname: Some("node1".into()),
            argv: vec!["/bin/app".into(), "-x".into()],
            env: vec![("HOME_DIR".into(), "/home/a b".into())],
        }
    }

    #[test]
    fn keys_expand_as_the_tool_does() {
        let f = facts();
        let e = |t: &str| expand(t, &f).exact();
        assert_eq!(
            e("%cwd%/out/%hostname%/%pid%").unwrap(),
            "/work/run dir/out/node1/42"
        );
        assert_eq!(
            e("{cwd}/{pid}_%ppid%_%pgid%_%psid%").unwrap(),
            "/work/run dir/42_7_40_30"
        );
        assert_eq!(e("/o/%h/%p_%j_%r_%tag%").unwrap(), "/o/node1/42_0_0_app");
        assert_eq!(
            e("/o/%env{HOME_DIR}%/$env{HOME_DIR}").unwrap(),
            "/o/home_a_b/home_a_b"
        );
        assert_eq!(e("/o/%nid%").unwrap(), "/o/42");
        assert_eq!(e("/o/100%").unwrap(), "/o/100%");
        let p = expand("/o/%launch_time%/%pid%", &f);
        assert_eq!(p.exact(), None);
        assert_eq!(p.base_dir(), PathBuf::from("/o"));
        assert!(p.regex().is_match("/o/2026-01-01_10.00/42_results.db"));
        assert!(!p.regex().is_match("/o/x/y/42_results.db"));
        assert!(!p.regex().is_match("/o/x/420_results.db"));
        assert_eq!(p.components().len(), 2);
        assert!(p.components()[0].is_match("2026-01-01_10.00"));
        assert!(!p.components()[0].is_match("a/b"));
        assert!(p.components()[1].is_match("42"));
        assert!(!p.components()[1].is_match("420"));
        assert_eq!(p.regex().as_str(), "^/o/[^/]*/42(?:$|[_./])");
        let open = expand("/o/%launch_time%_x/", &f).regex();
        assert!(open.is_match("/o/t_x/anything/below"));
        assert!(!open.is_match("/o/t_y/anything"));
    }

    #[test]
    fn base_dir_of_known_and_unknown_templates() {
        let f = Facts::default();
        assert_eq!(expand("/a/b/run", &f).base_dir(), PathBuf::from("/a/b"));
        assert_eq!(expand("/a/b/", &f).base_dir(), PathBuf::from("/a/b"));
        assert_eq!(expand("%cwd%/out/x", &f).base_dir(), PathBuf::from("/"));
    }
}
