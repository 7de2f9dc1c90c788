//! Output formats understood by rocprofv3's tool and by our converters.

use std::fmt;
use std::str::FromStr;

/// One rocprofv3 output format (`--output-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OutputFormat {
    /// rocpd SQLite database (`<name>_results.db`), rocprofv3's default since ROCm 7.0.
    Rocpd,
    /// One CSV file per domain (`<name>_kernel_trace.csv`, ...).
    Csv,
    /// One JSON document (`<name>_results.json`).
    Json,
    /// Perfetto trace (`<name>_results.pftrace`); written by the target's tool only.
    Pftrace,
    /// OTF2 archive; written by the target's tool only.
    Otf2,
}

impl OutputFormat {
    /// All formats, in rocprofv3's documented order.
    pub const ALL: [OutputFormat; 5] = [
        OutputFormat::Csv,
        OutputFormat::Json,
        OutputFormat::Pftrace,
        OutputFormat::Otf2,
        OutputFormat::Rocpd,
    ];

    /// The lower-case name used on the command line and in `ROCPROF_OUTPUT_FORMAT`.
    pub fn name(self) -> &'static str {
        match self {
            OutputFormat::Rocpd => "rocpd",
            OutputFormat::Csv => "csv",
            OutputFormat::Json => "json",
            OutputFormat::Pftrace => "pftrace",
            OutputFormat::Otf2 => "otf2",
        }
    }
}

impl fmt::Display for OutputFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for OutputFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "rocpd" => Ok(OutputFormat::Rocpd),
            "csv" => Ok(OutputFormat::Csv),
            "json" => Ok(OutputFormat::Json),
            "pftrace" => Ok(OutputFormat::Pftrace),
            "otf2" => Ok(OutputFormat::Otf2),
            other => Err(format!(
                "unknown output format '{other}': choose from csv, json, pftrace, otf2, rocpd"
            )),
        }
    }
}
