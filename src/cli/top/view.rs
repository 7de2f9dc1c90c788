//! The full-screen view (ratatui): a header with each process's GPU, the kernel table, copies,
//! the slowest API calls, and a line of keys. Narrow terminals lose the less important columns;
//! `NO_COLOR` turns colours off (bold and reverse video stay).

use super::batch::{busy, bytes, gbps, ms, shown_name, us};
use super::model::{percent, Model};
use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Table, TableState, Wrap};
use ratatui::Frame;

/// What the keys changed.
#[derive(Debug, Default)]
pub struct ViewState {
    /// `p`/space: the figures stay as they are; rows are still read.
    pub paused: bool,
    /// `?`/`h`: the help.
    pub help: bool,
    /// `r`: a column per process (rank) in the kernel table.
    pub ranks: bool,
    /// `f`: full kernel names.
    pub full_names: bool,
    /// Enter: the selected kernel's full name.
    pub name_popup: bool,
    /// The selected kernel row (arrow keys).
    pub selected: usize,
    /// Colours (off with `NO_COLOR`).
    pub color: bool,
    /// Kernel rows in the last frame (for the selection's bounds).
    pub rows: usize,
}

impl ViewState {
    fn style(&self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }
}

/// The keys, for the help and the bottom line.
pub const KEYS: &str =
    "q quit  s sort  p pause  r ranks  f full names  \u{2191}\u{2193} Enter name  ? help";

const HELP: &[(&str, &str)] = &[
    ("q, Ctrl-C, Esc", "detach from every process and quit"),
    (
        "s",
        "next sort order: interval time, total, launches, mean, name",
    ),
    ("p, space", "pause the figures (rows are still read)"),
    ("r", "per-process (per-rank) columns in the kernel table"),
    ("f", "full kernel names instead of shortened ones"),
    (
        "\u{2191} \u{2193}, Enter",
        "select a kernel, show its full name",
    ),
    ("?, h", "this help (any key closes it)"),
];

/// Draws one frame.
pub fn draw(f: &mut Frame, m: &Model, v: &mut ViewState, interval_s: f64) {
    let area = f.area();
    if area.width < 30 || area.height < 8 {
        f.render_widget(
            Paragraph::new("terminal too small for rocprof-attach top (q quits)")
                .wrap(Wrap { trim: true }),
            area,
        );
        return;
    }
    let procs = m
        .procs
        .len()
        .min(area.height.saturating_sub(10) as usize / 2)
        .max(1);
    let copies = m.copies();
    let slow = m.slowest();
    let copy_h = if copies.is_empty() {
        0
    } else {
        (copies.len() as u16 + 3).min(6)
    };
    let api_h = if slow.is_empty() {
        0
    } else {
        (slow.len() as u16 + 3).min(8)
    };
    let spm = if m.spm { m.spm_lines() } else { Vec::new() };
    let spm_h = if m.spm {
        (spm.len().max(1) as u16 + 2).min(7)
    } else {
        0
    };
    let [head, spm_area, body, copy_area, api_area, foot] = Layout::vertical([
        Constraint::Length(2 + procs as u16),
        Constraint::Length(spm_h),
        Constraint::Min(4),
        Constraint::Length(copy_h),
        Constraint::Length(api_h),
        Constraint::Length(1),
    ])
    .areas(area);
    header(f, head, m, v, interval_s, procs);
    if spm_h > 0 {
        spm_table(f, spm_area, &spm, v);
    }
    kernels(f, body, m, v);
    if copy_h > 0 {
        copy_table(f, copy_area, &copies, v);
    }
    if api_h > 0 {
        api_table(f, api_area, &slow, v);
    }
    let foot_text = match m.messages.last() {
        Some(msg) => Line::from(vec![
            Span::styled(
                msg.clone(),
                v.style(Color::Yellow).add_modifier(Modifier::BOLD),
            ),
            Span::raw("   "),
            Span::raw(KEYS),
        ]),
        None => Line::from(KEYS),
    };
    f.render_widget(
        Paragraph::new(foot_text).style(Style::default().add_modifier(Modifier::REVERSED)),
        foot,
    );
    if v.help {
        help(f, area);
    } else if v.name_popup {
        name_popup(f, area, m, v);
    }
}

fn header(f: &mut Frame, area: Rect, m: &Model, v: &ViewState, interval_s: f64, shown: usize) {
    let title = format!(
        "rocprof-attach top - interval {} ({:.2} s{}) - {} process{} - GPU {} ms - sorted by {}{}",
        m.iteration,
        interval_s,
        super::batch::span(m),
        m.procs.len(),
        if m.procs.len() == 1 { "" } else { "es" },
        ms(m.interval_kernel_ns()),
        m.sort.label(),
        if v.paused { " - PAUSED" } else { "" }
    );
    let mut lines = vec![
        Line::from(Span::styled(
            title,
            v.style(Color::Cyan).add_modifier(Modifier::BOLD),
        )),
        Line::from(format!("sampling: {}", m.sampling)),
    ];
    let straggler = m.straggler();
    for (i, p) in m.procs.iter().enumerate().take(shown) {
        let mut spans = vec![Span::styled(
            format!("{:<14}", p.label()),
            Style::default().add_modifier(Modifier::BOLD),
        )];
        if p.exited {
            spans.push(Span::styled("exited ", v.style(Color::DarkGray)));
        }
        for (agent, b) in &p.busy {
            spans.push(Span::raw(format!("{agent} ")));
            spans.push(Span::styled(bar(b.last, 10), v.style(Color::Green)));
            spans.push(Span::raw(format!(" {:>5}%  ", busy(b.last))));
        }
        if p.busy.is_empty() && !p.exited {
            spans.push(Span::raw("no kernel yet"));
        }
        if let Some((s, why)) = straggler {
            if s == i {
                spans.push(Span::styled(
                    format!("<- {why}"),
                    v.style(Color::Red).add_modifier(Modifier::BOLD),
                ));
            }
        }
        lines.push(Line::from(spans));
    }
    if m.procs.len() > shown {
        lines.push(Line::from(format!(
            "... and {} more (r: per-process columns)",
            m.procs.len() - shown
        )));
    }
    f.render_widget(Paragraph::new(lines), area);
}

/// A bar of `width` cells, filled to `frac`.
fn bar(frac: Option<f64>, width: usize) -> String {
    let n = (frac.unwrap_or(0.0).clamp(0.0, 1.0) * width as f64).round() as usize;
    format!("{}{}", "\u{2588}".repeat(n), "\u{b7}".repeat(width - n))
}

fn kernels(f: &mut Frame, area: Rect, m: &Model, v: &mut ViewState) {
    let rows = m.kernels();
    v.rows = rows.len();
    v.selected = v.selected.min(rows.len().saturating_sub(1));
    let (all_i, all_t) = (m.interval_kernel_ns(), m.total_kernel_ns());
    let w = area.width;
    let mut head: Vec<String> = vec!["LAUNCHES".into(), "TOTAL ms".into()];
    let mut widths = vec![Constraint::Length(9), Constraint::Length(11)];
    let wide = w >= 100;
    if wide {
        head.extend(["MEAN us".into(), "%GPU".into()]);
        widths.extend([Constraint::Length(10), Constraint::Length(6)]);
    }
    if v.ranks && m.procs.len() > 1 {
        for p in &m.procs {
            head.push(format!("{} ms", p.label()));
            widths.push(Constraint::Length(12));
        }
    } else if w >= 70 {
        head.extend(["ALL ms".into(), "ALL %".into()]);
        widths.extend([Constraint::Length(12), Constraint::Length(6)]);
    }
    let mut head: Vec<Cell> = head.into_iter().map(num).collect();
    head.push(Cell::from("KERNEL"));
    widths.push(Constraint::Fill(1));
    let body: Vec<Row> = rows
        .iter()
        .map(|r| {
            let mut c = vec![r.interval.count.to_string(), ms(r.interval.sum)];
            if wide {
                c.push(us(r.interval.mean()));
                c.push(format!("{:.1}", percent(r.interval.sum, all_i)));
            }
            if v.ranks && m.procs.len() > 1 {
                c.extend(r.per_proc.iter().map(|x| ms(*x)));
            } else if w >= 70 {
                c.push(ms(r.total.sum));
                c.push(format!("{:.1}", percent(r.total.sum, all_t)));
            }
            let mut cells: Vec<Cell> = c.into_iter().map(num).collect();
            cells.push(Cell::from(shown_name(&r.name, v.full_names)));
            Row::new(cells)
        })
        .collect();
    let table = Table::new(body, widths)
        .header(
            Row::new(head)
                .style(Style::default().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)),
        )
        .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED))
        .block(
            Block::default()
                .borders(Borders::TOP)
                .title(" kernels (last interval | since start) "),
        );
    let mut state = TableState::default().with_selected(Some(v.selected));
    f.render_stateful_widget(table, area, &mut state);
}

fn copy_table(f: &mut Frame, area: Rect, rows: &[super::model::CopyRow], _v: &ViewState) {
    let body: Vec<Row> = rows
        .iter()
        .map(|r| {
            let n = [
                r.interval.count.to_string(),
                bytes(r.bytes),
                ms(r.interval.sum),
                gbps(r.bandwidth()),
                bytes(r.bytes_total),
            ];
            let mut cells: Vec<Cell> = n.into_iter().map(num).collect();
            cells.push(Cell::from(r.name.clone()));
            Row::new(cells)
        })
        .collect();
    let widths = [
        Constraint::Length(8),
        Constraint::Length(11),
        Constraint::Length(10),
        Constraint::Length(8),
        Constraint::Length(11),
        Constraint::Fill(1),
    ];
    let t = Table::new(body, widths)
        .header(
            Row::new(
                ["COUNT", "BYTES", "TOTAL ms", "GB/s", "ALL BYTES"]
                    .map(|h| num(h.to_string()))
                    .into_iter()
                    .chain([Cell::from("COPY")]),
            )
            .style(Style::default().add_modifier(Modifier::BOLD)),
        )
        .block(Block::default().borders(Borders::TOP).title(" copies "));
    f.render_widget(t, area);
}

/// The sampled counters (`--spm`): the last interval's mean (with a bar for percentages), min,
/// max and last value per series.
/// One process with one agent: the agent goes to the title instead of every row.
fn spm_table(f: &mut Frame, area: Rect, lines: &[super::spm::Line], v: &ViewState) {
    let one = lines
        .first()
        .filter(|a| lines.iter().all(|l| l.who == a.who))
        .map(|a| a.who.clone());
    let body: Vec<Row> = if lines.is_empty() {
        vec![Row::new([Cell::from("no sampled counters read yet")])]
    } else {
        lines
            .iter()
            .map(|l| {
                let c = super::spm::cells(l, false);
                let pct = l.series.ends_with('%');
                let frac = l.interval.mean().filter(|_| pct).map(|x| x / 100.0);
                Row::new([
                    Cell::from(Span::styled(
                        if pct { bar(frac, 10) } else { String::new() },
                        v.style(Color::Green),
                    )),
                    num(c[1].clone()),
                    num(c[2].clone()),
                    num(c[3].clone()),
                    num(c[4].clone()),
                    Cell::from(if one.is_some() {
                        l.series.clone()
                    } else {
                        c[5].clone()
                    }),
                ])
            })
            .collect()
    };
    let widths = [
        Constraint::Length(10),
        Constraint::Length(12),
        Constraint::Length(12),
        Constraint::Length(12),
        Constraint::Length(12),
        Constraint::Fill(1),
    ];
    let head = ["", "MEAN", "MIN", "MAX", "LAST"];
    let t = Table::new(body, widths)
        .header(
            Row::new(
                head.iter()
                    .map(|h| num(h.to_string()))
                    .chain([Cell::from("COUNTER")]),
            )
            .style(Style::default().add_modifier(Modifier::BOLD)),
        )
        .block(Block::default().borders(Borders::TOP).title(match &one {
            Some(who) => format!(" sampled counters of {who} (last interval) "),
            None => " sampled counters (last interval) ".to_string(),
        }));
    f.render_widget(t, area);
}

fn api_table(
    f: &mut Frame,
    area: Rect,
    rows: &[(i32, &crate::rocpd::report::live::Call)],
    _v: &ViewState,
) {
    let body: Vec<Row> = rows
        .iter()
        .map(|(pid, c)| {
            Row::new([
                num(pid.to_string()),
                num(c.tid.to_string()),
                num(us(c.duration as f64)),
                Cell::from(c.name.clone()),
            ])
        })
        .collect();
    let widths = [
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(12),
        Constraint::Fill(1),
    ];
    let t = Table::new(body, widths)
        .header(
            Row::new([
                num("PID".into()),
                num("TID".into()),
                num("DURATION us".into()),
                Cell::from("API CALL"),
            ])
            .style(Style::default().add_modifier(Modifier::BOLD)),
        )
        .block(
            Block::default()
                .borders(Borders::TOP)
                .title(" slowest API calls "),
        );
    f.render_widget(t, area);
}

/// A number's cell: aligned right.
fn num<'a>(s: String) -> Cell<'a> {
    Cell::from(Text::from(s).alignment(Alignment::Right))
}

/// A box in the middle of `area`.
fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

fn help(f: &mut Frame, area: Rect) {
    let lines: Vec<Line> = HELP
        .iter()
        .map(|(k, d)| {
            Line::from(vec![
                Span::styled(
                    format!("{k:<16}"),
                    Style::default().add_modifier(Modifier::BOLD),
                ),
                Span::raw(*d),
            ])
        })
        .collect();
    let r = centered(area, 80, HELP.len() as u16 + 2);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::default().borders(Borders::ALL).title(" keys ")),
        r,
    );
}

fn name_popup(f: &mut Frame, area: Rect, m: &Model, v: &ViewState) {
    let rows = m.kernels();
    let Some(r) = rows.get(v.selected) else {
        return;
    };
    let text = format!(
        "{}\n\n{} launches since the start, {} ms",
        r.name,
        r.total.count,
        ms(r.total.sum)
    );
    let w = area.width.saturating_sub(4).min(120);
    let h = ((r.name.chars().count() as u16 / w.saturating_sub(2).max(1)) + 5).min(area.height);
    let rect = centered(area, w, h);
    f.render_widget(Clear, rect);
    f.render_widget(
        Paragraph::new(text).wrap(Wrap { trim: false }).block(
            Block::default()
                .borders(Borders::ALL)
                .title(" full name (any key closes) "),
        ),
        rect,
    );
}
