//! Self-contained HTML: one file with inline CSS and inline SVG charts, no scripts and no
//! external resources (it opens offline and in mail clients that block remote content).

use std::fmt::Write as _;

use super::esc;

const CSS: &str = "body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#1d2330;background:#fff}\
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde2ea;padding-bottom:4px}\
.meta{color:#5b6475;margin-bottom:12px}table{border-collapse:collapse;margin:8px 0 18px;font-size:13px}\
caption{text-align:left;font-weight:600;padding:4px 0}th,td{border:1px solid #dde2ea;padding:3px 8px;text-align:left}\
th{background:#f3f5f9}td.n{text-align:right;font-variant-numeric:tabular-nums}svg{display:block;margin:6px 0 14px}\
svg text{font:12px system-ui,sans-serif;fill:#1d2330}.grid{display:flex;flex-wrap:wrap;gap:24px}";

/// A complete page around `body`.
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{}</title><style>{CSS}</style></head><body>\n{body}</body></html>\n",
        esc(title)
    )
}

const PALETTE: [&str; 8] = [
    "#3b6fd4", "#e07b39", "#3aa675", "#c9465d", "#8a5cc7", "#c4a21d", "#2d9bb0", "#7a7f8c",
];

/// Shortens a label to `max` characters.
fn short(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}

/// Human-readable duration.
pub fn dur(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.3} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// A horizontal bar chart of `(label, value in ns, calls)`; the full label is in a `<title>`.
pub fn bar_chart(title: &str, items: &[(String, f64, u64)]) -> String {
    let label_w = 300.0;
    let bar_w = 420.0;
    let row_h = 22.0;
    let h = 30.0 + row_h * items.len().max(1) as f64;
    let max = items.iter().map(|i| i.1).fold(0.0, f64::max).max(1.0);
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{h}\" role=\"img\" aria-label=\"{}\">\
         <text x=\"0\" y=\"16\" font-weight=\"600\">{}</text>",
        label_w + bar_w + 120.0,
        esc(title),
        esc(title)
    );
    if items.is_empty() {
        let _ = write!(s, "<text x=\"0\" y=\"44\">no data</text>");
    }
    for (i, (label, v, calls)) in items.iter().enumerate() {
        let y = 26.0 + row_h * i as f64;
        let w = (v / max * bar_w).max(1.0);
        let _ = write!(
            s,
            "<g><title>{} — {} total, {calls} calls</title>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
             <rect x=\"{}\" y=\"{y}\" width=\"{w:.1}\" height=\"{}\" fill=\"{}\"/>\
             <text x=\"{}\" y=\"{}\">{}</text></g>",
            esc(label),
            esc(&dur(*v)),
            label_w - 6.0,
            y + 14.0,
            esc(&short(label, 42)),
            label_w,
            row_h - 6.0,
            PALETTE[i % PALETTE.len()],
            label_w + w + 6.0,
            y + 14.0,
            esc(&dur(*v))
        );
    }
    s.push_str("</svg>\n");
    s
}

/// One lane of the timeline overview: a label and, per time bin, the busy fraction (0..1).
#[derive(Debug, Clone)]
pub struct Lane {
    /// Label (`pid 1234 host`, `pid 1234 AGENT [1] (GPU)`).
    pub label: String,
    /// Busy fraction per bin.
    pub busy: Vec<f32>,
    /// Colour index.
    pub color: usize,
}

/// A timeline overview: one strip per lane, each bin shaded by how busy it was.
pub fn timeline(start: i64, end: i64, lanes: &[Lane]) -> String {
    let label_w = 260.0;
    let width = 900.0;
    let lane_h = 22.0;
    let h = 44.0 + lane_h * lanes.len().max(1) as f64;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{h}\" role=\"img\" aria-label=\"timeline\">",
        label_w + width + 10.0
    );
    if lanes.is_empty() {
        let _ = write!(s, "<text x=\"0\" y=\"20\">no data</text>");
    }
    for (i, lane) in lanes.iter().enumerate() {
        let y = 8.0 + lane_h * i as f64;
        let color = PALETTE[lane.color % PALETTE.len()];
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
             <rect x=\"{label_w}\" y=\"{y}\" width=\"{width}\" height=\"{}\" fill=\"#f3f5f9\"/>",
            label_w - 6.0,
            y + 14.0,
            esc(&short(&lane.label, 38)),
            lane_h - 4.0
        );
        let n = lane.busy.len().max(1) as f64;
        let bw = width / n;
        for (b, &f) in lane.busy.iter().enumerate() {
            if f <= 0.0 {
                continue;
            }
            let _ = write!(
                s,
                "<rect x=\"{:.2}\" y=\"{y}\" width=\"{:.2}\" height=\"{}\" fill=\"{color}\" fill-opacity=\"{:.2}\"/>",
                label_w + bw * b as f64,
                bw + 0.05,
                lane_h - 4.0,
                (0.15 + 0.85 * f.min(1.0)) as f64
            );
        }
    }
    let y = 8.0 + lane_h * lanes.len().max(1) as f64 + 14.0;
    let span = (end - start).max(0) as f64;
    time_axis(&mut s, label_w, width, y, span);
    s.push_str("</svg>\n");
    s
}

/// One sampled counter's series for [`series_chart`]: its name and `(time, value)` points.
#[derive(Debug, Clone)]
pub struct Series {
    /// Counter name (`sm__cycles_active.avg`).
    pub name: String,
    /// Points in time order (ns, any origin) with the value.
    pub points: Vec<(i64, f64)>,
}

/// A small line chart per series over `[start, end]` (`--spm` samples): each scaled to its own
/// maximum, which the label gives.
pub fn series_chart(start: i64, end: i64, series: &[Series]) -> String {
    let (label_w, width, row_h) = (260.0, 900.0, 46.0);
    let h = 30.0 + row_h * series.len().max(1) as f64;
    let span = (end - start).max(1) as f64;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{h}\" role=\"img\" aria-label=\"sampled counters\">",
        label_w + width + 10.0
    );
    for (i, se) in series.iter().enumerate() {
        let top = 6.0 + row_h * i as f64;
        let max = se.points.iter().map(|p| p.1).fold(0.0, f64::max);
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill-opacity=\"0.6\">max {:.4}</text>\
             <rect x=\"{label_w}\" y=\"{top}\" width=\"{width}\" height=\"{}\" fill=\"#f3f5f9\"/>",
            label_w - 6.0,
            top + 16.0,
            esc(&short(&se.name, 38)),
            label_w - 6.0,
            top + 32.0,
            max,
            row_h - 8.0
        );
        let pts: Vec<String> = se
            .points
            .iter()
            .map(|&(t, v)| {
                let x = label_w + width * ((t - start) as f64 / span).clamp(0.0, 1.0);
                let y = top + (row_h - 8.0) * (1.0 - if max > 0.0 { v / max } else { 0.0 });
                format!("{x:.1},{y:.1}")
            })
            .collect();
        let _ = write!(
            s,
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1\" points=\"{}\"/>",
            PALETTE[i % PALETTE.len()],
            pts.join(" ")
        );
    }
    let y = 6.0 + row_h * series.len().max(1) as f64 + 14.0;
    time_axis(&mut s, label_w, width, y, span);
    s.push_str("</svg>\n");
    s
}

/// Five time labels (+0 to +`span`) under a chart of `width` starting at `label_w`, at `y`.
fn time_axis(s: &mut String, label_w: f64, width: f64, y: f64, span: f64) {
    for k in 0..=4 {
        let x = label_w + width * k as f64 / 4.0;
        let anchor = match k {
            0 => "start",
            4 => "end",
            _ => "middle",
        };
        let _ = write!(
            s,
            "<text x=\"{x:.1}\" y=\"{y}\" text-anchor=\"{anchor}\">+{}</text>",
            esc(&dur(span * k as f64 / 4.0))
        );
    }
}
