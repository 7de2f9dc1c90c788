//! Functions say one thing each (issue 18): no function of the workspace's sources (`src/` and
//! `crates/*/src/`) is longer than [`LIMIT`] lines, from its `fn` line to its closing brace,
//! unless a `// Long because: ...` comment above it (among its doc comments and attributes) says
//! why. `devtools/long_functions.py` lists the same functions, excused ones included (`--all`).

use std::path::{Path, PathBuf};

/// The most lines a function may have without a reason written beside it.
const LIMIT: usize = 80;

/// The comment that excuses a long function.
const EXCUSE: &str = "// Long because:";

/// `src` with comments, strings and char literals replaced by spaces (newlines kept), so that
/// the braces left are the code's.
fn blank_out(src: &str) -> Vec<u8> {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    while i < b.len() {
        let end = if b[i..].starts_with(b"//") {
            b[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |p| i + p)
        } else if b[i..].starts_with(b"/*") {
            block_comment_end(b, i)
        } else if let Some(end) = raw_string_end(b, i) {
            end
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            (j + 1).min(b.len())
        } else if b[i] == b'\'' {
            char_literal_end(src, i).unwrap_or(i + 1)
        } else {
            i + 1
        };
        if end > i + 1 || b[i] == b'"' {
            for c in &mut out[i..end] {
                if *c != b'\n' {
                    *c = b' ';
                }
            }
        }
        i = end;
    }
    out
}

/// The end of the (nested) block comment that starts at `i`.
fn block_comment_end(b: &[u8], i: usize) -> usize {
    let (mut depth, mut j) = (1, i + 2);
    while j < b.len() && depth > 0 {
        if b[j..].starts_with(b"/*") {
            (depth, j) = (depth + 1, j + 2);
        } else if b[j..].starts_with(b"*/") {
            (depth, j) = (depth - 1, j + 2);
        } else {
            j += 1;
        }
    }
    j
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The end of the raw string (`r"..."`, `r#"..."#`, `br"..."`) that starts at `i`, if one does.
fn raw_string_end(b: &[u8], i: usize) -> Option<usize> {
    if i > 0 && is_ident(b[i - 1]) {
        return None;
    }
    let r = if b[i..].starts_with(b"br") { i + 1 } else { i };
    if b[r] != b'r' {
        return None;
    }
    let hashes = b[r + 1..].iter().take_while(|&&c| c == b'#').count();
    let open = r + 1 + hashes;
    if b.get(open) != Some(&b'"') {
        return None;
    }
    let mut close = vec![b'"'];
    close.extend(std::iter::repeat_n(b'#', hashes));
    let end = b[open + 1..]
        .windows(close.len())
        .position(|w| w == close.as_slice());
    Some(end.map_or(b.len(), |p| open + 1 + p + close.len()))
}

/// The end of the char literal (`'a'`, `'\n'`, `'\u{1F600}'`, `'{'`) that starts at `i`; None
/// for a lifetime (`'a`, `'static`).
fn char_literal_end(src: &str, i: usize) -> Option<usize> {
    let b = src.as_bytes();
    if b.get(i + 1) == Some(&b'\\') {
        let p = b.get(i + 3..)?.iter().take(12).position(|&c| c == b'\'')?;
        return Some(i + 3 + p + 1);
    }
    let c = src.get(i + 1..)?.chars().next()?;
    let after = i + 1 + c.len_utf8();
    (c != '\'' && b.get(after) == Some(&b'\'')).then_some(after + 1)
}

/// Every `fn` with a body in `src`, nested ones included: (name, first line, last line), 1-based.
fn functions(src: &str) -> Vec<(String, usize, usize)> {
    let code = blank_out(src);
    let line_of = |at: usize| code[..at].iter().filter(|&&c| c == b'\n').count() + 1;
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(p) = code[i..]
        .windows(3)
        .position(|w| w[..2] == *b"fn" && w[2].is_ascii_whitespace())
    {
        let at = i + p;
        i = at + 2;
        if at > 0 && is_ident(code[at - 1]) {
            continue;
        }
        let start = at
            + 2
            + code[at + 2..]
                .iter()
                .take_while(|c| c.is_ascii_whitespace())
                .count();
        let len = code[start..].iter().take_while(|&&c| is_ident(c)).count();
        if len == 0 || code[start].is_ascii_digit() {
            continue;
        }
        // The body's opening brace: the first `{` outside parentheses and brackets, unless a `;`
        // (a declaration without a body) comes first.
        let mut depth = 0i32;
        let Some(open) = (start..code.len()).find(|&j| {
            match code[j] {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b'{' | b';' if depth == 0 => return true,
                _ => {}
            }
            false
        }) else {
            continue;
        };
        if code[open] == b';' {
            continue;
        }
        let mut braces = 0i32;
        let close = (open..code.len())
            .find(|&j| {
                braces += match code[j] {
                    b'{' => 1,
                    b'}' => -1,
                    _ => 0,
                };
                braces == 0
            })
            .unwrap_or(code.len() - 1);
        let name = String::from_utf8_lossy(&code[start..start + len]).into_owned();
        found.push((name, line_of(at), line_of(close)));
    }
    found
}

/// Whether a `// Long because:` comment sits above line `first` (1-based), among the comments,
/// doc comments and attributes directly before the function.
fn excused(lines: &[&str], first: usize) -> bool {
    lines[..first - 1]
        .iter()
        .rev()
        .map(|l| l.trim())
        .take_while(|l| l.starts_with("//") || l.starts_with("#["))
        .any(|l| l.starts_with(EXCUSE))
}

/// The Rust files under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_function_is_long_without_a_reason() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    for krate in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        rust_files(&krate.path().join("src"), &mut files);
    }
    files.sort();
    assert!(files.len() > 50, "found only {} source files", files.len());
    let mut long = Vec::new();
    for path in &files {
        let src = std::fs::read_to_string(path).unwrap();
        let lines: Vec<&str> = src.lines().collect();
        for (name, first, last) in functions(&src) {
            let length = last - first + 1;
            if length > LIMIT && !excused(&lines, first) {
                let rel = path.strip_prefix(root).unwrap_or(path);
                long.push(format!(
                    "{}:{first}: {name} ({length} lines)",
                    rel.display()
                ));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {LIMIT} lines: split each into functions that say one thing, or write why it is \
         best whole in a `{EXCUSE} ...` comment above it:\n{}",
        long.join("\n")
    );
}

#[test]
fn braces_in_strings_comments_and_chars_are_not_code() {
    let src = "fn a() {\n    let s = \"}\"; // }\n    let r = r#\"}\"#;\n    let c = '}';\n    /* } /* } */ } */\n    let l: &'static str = \"\\\"}\";\n}\nfn b<'x>(x: &'x [u8; 2]) -> [u8; 2] {\n    *x\n}\ntrait T {\n    fn c(&self);\n}\n";
    let names: Vec<(String, usize, usize)> = functions(src);
    assert_eq!(
        names,
        [("a".to_owned(), 1, 7), ("b".to_owned(), 8, 10)],
        "{src}"
    );
    let lines = [
        "/// Doc.",
        "// Long because: a table.",
        "#[inline]",
        "fn f() {}",
    ];
    assert!(excused(&lines, 4));
    assert!(!excused(&["// Long because: x.", "", "fn f() {}"], 3));
}
