//! `-L`/`--list-avail -p PID`: the metrics the GPUs of a CUDA process offer, as a table (name,
//! type, unit, description, the rocprofv3 names `--pmc` maps to each) or with `--json` one
//! document (docs/json.md). Nothing is traced, counted or left enabled in the process.

use crate::attach::claims::FRONT_END_CLI;
use crate::attach::cuda::catalog::{self, Catalog, Chip, Metric};
use crate::cli::json;
use crate::cli::render::Ui;
use crate::cli::stdio::outln;
use crate::engine::agent::{Agents, CallTimeouts};
use crate::exit::ExitCode;
use serde_json::json;

/// List the metrics of process `pid`'s GPUs; the exit code.
pub fn run(pid: i32, ui: &Ui, as_json: bool) -> ExitCode {
    let agents = Agents::start(CallTimeouts::default());
    match catalog::list(pid, FRONT_END_CLI, &agents) {
        Ok(c) => {
            if c.loaded_now {
                ui.info(format!("process {pid}: loaded our CUDA tool"));
            }
            for n in &c.notes {
                ui.warn(format!("process {pid}: {n}"));
            }
            if as_json {
                json::print("list-avail", ExitCode::Success, document(pid, &c));
            } else {
                print_table(pid, &c);
            }
            ExitCode::Success
        }
        Err(e) => {
            ui.error(e.to_string());
            if as_json {
                json::print(
                    "list-avail",
                    e.exit_code(),
                    json!({"pid": pid, "chips": [], "error": e.to_string()}),
                );
            }
            e.exit_code()
        }
    }
}

/// The `--json` document's body.
fn document(pid: i32, c: &Catalog) -> serde_json::Value {
    json!({
        "pid": pid,
        "backend": "cuda",
        "cupti": c.cupti,
        "cupti_version": c.cupti_version,
        "driver_version": c.driver_version,
        "devices": c.devices,
        "chips": c.chips,
        "notes": c.notes,
        "error": null,
    })
}

/// The rocprofv3 names of a metric as the table shows them: `SQ_WAVES (.sum)`.
fn rocprofv3_column(m: &Metric) -> String {
    m.rocprofv3
        .iter()
        .map(|(name, metric)| match metric.strip_prefix(&m.name) {
            Some("") | None => name.clone(),
            Some(rollup) => format!("{name} ({rollup})"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One chip's table: a header line, then one row per metric.
fn print_chip(pid: i32, c: &Catalog, chip: &Chip) {
    let devices: Vec<String> = chip
        .devices
        .iter()
        .map(|d| {
            let name = c
                .devices
                .iter()
                .find(|x| x.ordinal == *d)
                .map(|x| x.name.as_str());
            match name {
                Some(n) if !n.is_empty() => format!("{d} ({n})"),
                _ => d.to_string(),
            }
        })
        .collect();
    outln!(
        "process {pid}: chip {}, device(s) {}: {} metrics{}",
        chip.chip,
        devices.join(", "),
        chip.metrics.len(),
        if chip.availability {
            ""
        } else {
            " (CUPTI's defaults for the chip: the availability of its counters was not read)"
        }
    );
    let w = |f: &dyn Fn(&Metric) -> usize, min: usize| {
        chip.metrics.iter().map(f).max().unwrap_or(0).max(min)
    };
    let (wn, wt, wu, wr) = (
        w(&|m| m.name.len(), 4),
        w(&|m| m.kind.len(), 4),
        w(&|m| m.unit.len(), 4),
        w(&|m| rocprofv3_column(m).len(), 9),
    );
    outln!(
        "{:wn$}  {:wt$}  {:wu$}  {:wr$}  DESCRIPTION",
        "NAME",
        "TYPE",
        "UNIT",
        "ROCPROFV3"
    );
    for m in &chip.metrics {
        outln!(
            "{:wn$}  {:wt$}  {:wu$}  {:wr$}  {}",
            m.name,
            m.kind,
            m.unit,
            rocprofv3_column(m),
            m.description
        );
    }
}

/// Every chip's table, then how `--pmc` takes the names.
fn print_table(pid: i32, c: &Catalog) {
    for (i, chip) in c.chips.iter().enumerate() {
        if i > 0 {
            outln!();
        }
        print_chip(pid, c, chip);
    }
    outln!();
    outln!(
        "--pmc takes a counter with a rollup (.sum, .avg, .min, .max: sm__warps_launched.sum), a ratio or \
         throughput with its submetric (.ratio, .pct, .avg.pct_of_peak_sustained_elapsed), as ncu does; \
         the ROCPROFV3 column names the rocprofv3 counters --pmc maps to the metric (docs/cuda.md, \"Counters\")"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rocprofv3_column_names_the_rollup_of_a_base_name() {
        let m = Metric {
            name: "sm__warps_launched".into(),
            rocprofv3: vec![
                ("SQ_WAVES".into(), "sm__warps_launched.sum".into()),
                ("Wavefronts".into(), "sm__warps_launched.sum".into()),
            ],
            ..Default::default()
        };
        assert_eq!(rocprofv3_column(&m), "SQ_WAVES (.sum), Wavefronts (.sum)");
        let full = Metric {
            name: "sm__warps_launched.sum".into(),
            rocprofv3: vec![("SQ_WAVES".into(), "sm__warps_launched.sum".into())],
            ..Default::default()
        };
        assert_eq!(rocprofv3_column(&full), "SQ_WAVES");
    }
}
