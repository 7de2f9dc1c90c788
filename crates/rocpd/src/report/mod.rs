//! Tables rendered as console text, CSV, JSON, Markdown or HTML: the output of `query` and the
//! file formats of `summary` (whose HTML page adds inline SVG charts, [`html`]).

pub mod counters;
pub mod html;
pub mod live;
pub mod pass;
pub mod spm;
pub mod summary;

use std::fmt::Write as _;

/// One cell.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// SQL NULL.
    Null,
    /// Integer.
    Int(i64),
    /// Floating point.
    Real(f64),
    /// Text (blobs are shown as `<N bytes>`).
    Text(String),
}

impl Cell {
    /// The cell as shown in text formats.
    pub fn text(&self) -> String {
        match self {
            Cell::Null => String::new(),
            Cell::Int(v) => v.to_string(),
            Cell::Real(v) => {
                if v.fract() == 0.0 && v.abs() < 1e15 {
                    format!("{v:.1}")
                } else {
                    format!("{v}")
                }
            }
            Cell::Text(s) => s.clone(),
        }
    }

    fn json(&self) -> serde_json::Value {
        match self {
            Cell::Null => serde_json::Value::Null,
            Cell::Int(v) => (*v).into(),
            Cell::Real(v) => serde_json::Number::from_f64(*v)
                .map(serde_json::Value::Number)
                .unwrap_or(serde_json::Value::Null),
            Cell::Text(s) => s.clone().into(),
        }
    }

    fn numeric(&self) -> bool {
        matches!(self, Cell::Int(_) | Cell::Real(_))
    }
}

/// A titled table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    /// Title (a heading in Markdown/HTML, a banner on the console, a key in JSON).
    pub title: String,
    /// Column names.
    pub columns: Vec<String>,
    /// Rows, each as long as `columns`.
    pub rows: Vec<Vec<Cell>>,
}

/// Output formats of `query` and `summary`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Aligned text for a terminal.
    Console,
    /// CSV (RFC 4180 quoting).
    Csv,
    /// JSON.
    Json,
    /// Markdown tables.
    Md,
    /// One self-contained HTML page.
    Html,
}

impl Format {
    /// File extension.
    pub fn ext(self) -> &'static str {
        match self {
            Format::Console => "txt",
            Format::Csv => "csv",
            Format::Json => "json",
            Format::Md => "md",
            Format::Html => "html",
        }
    }
}

/// Aligned text; long cells are cut to `max_cell` characters with `…`.
pub fn console(tables: &[Table], max_cell: usize) -> String {
    let mut out = String::new();
    for t in tables {
        if !t.title.is_empty() {
            let _ = writeln!(out, "\n{}:\n", t.title);
        }
        let cut = |s: String| -> String {
            if s.chars().count() > max_cell {
                let mut c: String = s.chars().take(max_cell.saturating_sub(1)).collect();
                c.push('…');
                c
            } else {
                s
            }
        };
        let cells: Vec<Vec<String>> = t
            .rows
            .iter()
            .map(|r| r.iter().map(|c| cut(c.text())).collect())
            .collect();
        let widths: Vec<usize> = t
            .columns
            .iter()
            .enumerate()
            .map(|(i, h)| {
                cells
                    .iter()
                    .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                    .max()
                    .unwrap_or(0)
                    .max(h.chars().count())
            })
            .collect();
        let line = |out: &mut String, vals: &[String], numeric: &[bool]| {
            out.push('|');
            for (i, w) in widths.iter().enumerate() {
                let v = vals.get(i).map(String::as_str).unwrap_or("");
                let pad = w - v.chars().count();
                if numeric.get(i).copied().unwrap_or(false) {
                    let _ = write!(out, " {}{v} |", " ".repeat(pad));
                } else {
                    let _ = write!(out, " {v}{} |", " ".repeat(pad));
                }
            }
            out.push('\n');
        };
        line(&mut out, &t.columns, &[]);
        out.push('|');
        for w in &widths {
            out.push_str(&"-".repeat(w + 2));
            out.push('|');
        }
        out.push('\n');
        for (r, row) in cells.iter().zip(&t.rows) {
            let numeric: Vec<bool> = row.iter().map(Cell::numeric).collect();
            line(&mut out, r, &numeric);
        }
        let _ = writeln!(
            out,
            "({} row{})",
            t.rows.len(),
            if t.rows.len() == 1 { "" } else { "s" }
        );
    }
    out
}

fn csv_field(out: &mut String, s: &str) {
    if s.contains([',', '"', '\n', '\r']) {
        out.push('"');
        out.push_str(&s.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(s);
    }
}

/// CSV of one table (header line, then rows).
pub fn csv(t: &Table) -> String {
    let mut out = String::new();
    for (i, c) in t.columns.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        csv_field(&mut out, c);
    }
    out.push('\n');
    for r in &t.rows {
        for (i, c) in r.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            csv_field(&mut out, &c.text());
        }
        out.push('\n');
    }
    out
}

/// JSON: one table is an array of row objects; several are an object keyed by title.
pub fn json(tables: &[Table]) -> String {
    let rows = |t: &Table| -> serde_json::Value {
        serde_json::Value::Array(
            t.rows
                .iter()
                .map(|r| {
                    serde_json::Value::Object(
                        t.columns
                            .iter()
                            .zip(r)
                            .map(|(k, v)| (k.clone(), v.json()))
                            .collect(),
                    )
                })
                .collect(),
        )
    };
    let v = if tables.len() == 1 {
        rows(&tables[0])
    } else {
        serde_json::Value::Object(tables.iter().map(|t| (t.title.clone(), rows(t))).collect())
    };
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    s
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// Markdown: a heading and a pipe table per table.
pub fn markdown(tables: &[Table]) -> String {
    let mut out = String::new();
    for t in tables {
        if !t.title.is_empty() {
            let _ = writeln!(out, "## {}\n", md_cell(&t.title));
        }
        let _ = writeln!(
            out,
            "| {} |",
            t.columns
                .iter()
                .map(|c| md_cell(c))
                .collect::<Vec<_>>()
                .join(" | ")
        );
        let align: Vec<&str> = (0..t.columns.len())
            .map(|i| {
                if t.rows
                    .first()
                    .and_then(|r| r.get(i))
                    .is_some_and(Cell::numeric)
                {
                    "---:"
                } else {
                    "---"
                }
            })
            .collect();
        let _ = writeln!(out, "| {} |", align.join(" | "));
        for r in &t.rows {
            let _ = writeln!(
                out,
                "| {} |",
                r.iter()
                    .map(|c| md_cell(&c.text()))
                    .collect::<Vec<_>>()
                    .join(" | ")
            );
        }
        out.push('\n');
    }
    out
}

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// An HTML `<table>` (with a caption) for one table.
pub fn html_table(t: &Table) -> String {
    let mut out = String::from("<table>");
    if !t.title.is_empty() {
        let _ = write!(out, "<caption>{}</caption>", esc(&t.title));
    }
    out.push_str("<thead><tr>");
    for c in &t.columns {
        let _ = write!(out, "<th>{}</th>", esc(c));
    }
    out.push_str("</tr></thead><tbody>");
    for r in &t.rows {
        out.push_str("<tr>");
        for c in r {
            let class = if c.numeric() { " class=\"n\"" } else { "" };
            let _ = write!(out, "<td{class}>{}</td>", esc(&c.text()));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>\n");
    out
}

/// A self-contained HTML page holding `tables` (no scripts, no external resources).
pub fn html_page(title: &str, tables: &[Table]) -> String {
    let mut body = String::new();
    for t in tables {
        body.push_str(&html_table(t));
    }
    html::page(title, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> Table {
        Table {
            title: "T".into(),
            columns: vec!["name".into(), "n".into()],
            rows: vec![
                vec![Cell::Text("a,\"b\"".into()), Cell::Int(3)],
                vec![Cell::Text("<x>".into()), Cell::Null],
            ],
        }
    }

    #[test]
    fn formats_escape_what_they_must() {
        assert_eq!(csv(&t()), "name,n\n\"a,\"\"b\"\"\",3\n<x>,\n");
        assert!(html_table(&t()).contains("&lt;x&gt;"));
        assert!(markdown(&[t()]).contains("| name | n |"));
        let j: serde_json::Value = serde_json::from_str(&json(&[t()])).unwrap();
        assert_eq!(j[0]["n"], 3);
        assert!(console(&[t()], 40).contains("| a,\"b\" | 3 |"));
    }
}
