//! The tri-state switches (`--kernel-trace[=BOOL]`, `--sys-trace`, `--stats`, ...): the typed key
//! [`Switch`], what a row of `switch_table` says about one, the values given
//! on a command line ([`Switches`]) and rocprofv3's implications between them.
//!
//! A switch is named by its [`Switch`] only, so an unknown name cannot be asked for; its clap
//! argument ([`Switch::arg`]), the variable it sets ([`Effect`]), what it implies, the environment
//! variable `--help` names for it and its row in docs/options.md ([`markdown`]) all come from its
//! row.

use super::switch_table::TABLE;
use super::{parse_bool, OMPT_TRACE_CATEGORIES};
use clap::{Arg, ArgAction, ArgMatches};

/// Every tri-state switch, in `--help` order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Switch {
    /// `--sys-trace`.
    SysTrace,
    /// `--runtime-trace`.
    RuntimeTrace,
    /// `--hip-trace`.
    HipTrace,
    /// `--hsa-trace`.
    HsaTrace,
    /// `--kernel-trace`.
    KernelTrace,
    /// `--memory-copy-trace`.
    MemoryCopyTrace,
    /// `--memory-allocation-trace`.
    MemoryAllocationTrace,
    /// `--scratch-memory-trace`.
    ScratchMemoryTrace,
    /// `--marker-trace`.
    MarkerTrace,
    /// `--rccl-trace`.
    RcclTrace,
    /// `--kfd-trace`.
    KfdTrace,
    /// `--hip-graph-trace`.
    HipGraphTrace,
    /// `--hip-event-trace`.
    HipEventTrace,
    /// `--ompt-trace`.
    OmptTrace,
    /// `--kokkos-trace`.
    KokkosTrace,
    /// `--rocdecode-trace`.
    RocdecodeTrace,
    /// `--rocjpeg-trace`.
    RocjpegTrace,
    /// `--rocshmem-trace`.
    RocshmemTrace,
    /// `--hipfile-trace`.
    HipfileTrace,
    /// `--hip-runtime-trace`.
    HipRuntimeTrace,
    /// `--hip-compiler-trace`.
    HipCompilerTrace,
    /// `--hsa-core-trace`.
    HsaCoreTrace,
    /// `--hsa-amd-trace`.
    HsaAmdTrace,
    /// `--hsa-image-trace`.
    HsaImageTrace,
    /// `--hsa-finalizer-trace`.
    HsaFinalizerTrace,
    /// `--kfd-page-migration-trace`.
    KfdPageMigrationTrace,
    /// `--kfd-page-mapping-trace`.
    KfdPageMappingTrace,
    /// `--kfd-queue-trace`.
    KfdQueueTrace,
    /// `--kfd-dropped-events-trace`.
    KfdDroppedEventsTrace,
    /// `--kernel-replay-beta-enabled`.
    KernelReplayBetaEnabled,
    /// `--spm-beta-enabled`.
    SpmBetaEnabled,
    /// `--selected-regions`.
    SelectedRegions,
    /// `--selected-regions-ref-count`.
    SelectedRegionsRefCount,
    /// `--stats`.
    Stats,
    /// `--summary`.
    Summary,
    /// `--summary-per-domain`.
    SummaryPerDomain,
    /// `--output-config`.
    OutputConfig,
    /// `--group-by-queue`.
    GroupByQueue,
    /// `--mangled-kernels`.
    MangledKernels,
    /// `--truncate-kernels`.
    TruncateKernels,
    /// `--kernel-rename`.
    KernelRename,
    /// `--pc-sampling-beta-enabled`.
    PcSamplingBetaEnabled,
    /// `--advanced-thread-trace`.
    AdvancedThreadTrace,
    /// `--att-no-intercept`.
    AttNoIntercept,
    /// `--att-perfcounter-target-only`.
    AttPerfcounterTargetOnly,
    /// `--att-serialize-all`.
    AttSerializeAll,
    /// `--att-no-detail`.
    AttNoDetail,
    /// `--disable-signal-handlers`.
    DisableSignalHandlers,
    // Keep this one last: it gives `COUNT`.
    /// `--process-sync`.
    ProcessSync,
}

/// How many switches there are.
pub const COUNT: usize = Switch::ProcessSync as usize + 1;

/// What a switch writes into the environment, given its value after the implications.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// `VAR=1` when true, with the other trace variables in rocprofv3's order (that of
    /// [`super::defaults::DEFAULTS`]); never written when false, so an exported `VAR=1` stays.
    Trace(&'static str),
    /// `VAR=value` when true; nothing when false.
    Set(&'static str, &'static str),
    /// `VAR=1` or `VAR=0` whenever given.
    Bool(&'static str),
    /// `VAR=0` when true, `VAR=1` when false, whenever given.
    Negated(&'static str),
    /// Nothing of its own: it turns on what it implies.
    Umbrella,
    /// Acknowledges a beta feature that other options ask for; sets nothing alone.
    Beta,
}

impl Effect {
    /// The variable and value this effect writes for a switch whose value is `value`.
    pub fn pair(self, value: bool) -> Option<(&'static str, &'static str)> {
        let b01 = |v: bool| if v { "1" } else { "0" };
        match self {
            Effect::Trace(var) => value.then_some((var, "1")),
            Effect::Set(var, v) => value.then_some((var, v)),
            Effect::Bool(var) => Some((var, b01(value))),
            Effect::Negated(var) => Some((var, b01(!value))),
            Effect::Umbrella | Effect::Beta => None,
        }
    }
}

/// The values a switch takes on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `--x`, `--x=BOOL` or `--x BOOL` (rocprofv3's booleans, [`parse_bool`]).
    Bool,
    /// `--x [CATEGORY...]`: no value for all, one boolean word, or categories
    /// ([`OMPT_TRACE_CATEGORIES`], named in the help).
    Categories,
}

/// The definition of one switch: a row of the table.
#[derive(Debug, Clone, Copy)]
pub struct SwitchDef {
    /// The switch the row defines.
    pub switch: Switch,
    /// Its `--help` heading.
    pub heading: &'static str,
    /// Its long option name, without `--` (also the clap id).
    pub long: &'static str,
    /// Its short option, if any.
    pub short: Option<char>,
    /// A visible alias of the long name, if any.
    pub alias: Option<&'static str>,
    /// The one-line help.
    pub help: &'static str,
    /// The values it takes.
    pub kind: Kind,
    /// What it writes.
    pub effect: Effect,
    /// What it turns on when true, unless given explicitly (rocprofv3's `setattrifnone`).
    pub implies: &'static [Switch],
    /// The switch without which it has no effect.
    pub needs: Option<Switch>,
    /// An environment variable that stands in for it (named in `--help`).
    pub env: Option<&'static str>,
    /// The option (long name) it follows in `--help`; `None`: the row before it.
    pub after: Option<&'static str>,
    /// What docs/options.md adds about it.
    pub note: &'static str,
}

impl SwitchDef {
    /// With a short option.
    pub(super) const fn short(mut self, c: char) -> Self {
        self.short = Some(c);
        self
    }
    /// With a visible alias.
    pub(super) const fn alias(mut self, a: &'static str) -> Self {
        self.alias = Some(a);
        self
    }
    /// Taking OpenMP categories instead of a boolean.
    pub(super) const fn categories(mut self) -> Self {
        self.kind = Kind::Categories;
        self
    }
    /// Turning these on.
    pub(super) const fn implies(mut self, s: &'static [Switch]) -> Self {
        self.implies = s;
        self
    }
    /// Effective only with `s`.
    pub(super) const fn needs(mut self, s: Switch) -> Self {
        self.needs = Some(s);
        self
    }
    /// Stood in for by the environment variable `var`.
    pub(super) const fn env(mut self, var: &'static str) -> Self {
        self.env = Some(var);
        self
    }
    /// Placed after the option `long` in `--help`.
    pub(super) const fn after(mut self, long: &'static str) -> Self {
        self.after = Some(long);
        self
    }
    /// With a note for docs/options.md.
    pub(super) const fn note(mut self, n: &'static str) -> Self {
        self.note = n;
        self
    }

    /// The help line `--help` shows: the row's help, the categories of [`Kind::Categories`] and
    /// the stand-in environment variable.
    pub fn help_line(&self) -> String {
        let mut help = self.help.to_string();
        if self.kind == Kind::Categories {
            help.push_str(": ");
            help.push_str(&OMPT_TRACE_CATEGORIES.join(" "));
        }
        if let Some(var) = self.env {
            help.push_str(&format!(" [env: {var}]"));
        }
        help
    }
}

impl Switch {
    /// Every switch, in `--help` order.
    pub const ALL: [Switch; COUNT] = {
        let mut all = [Switch::SysTrace; COUNT];
        let mut i = 0;
        while i < COUNT {
            all[i] = TABLE[i].switch;
            i += 1;
        }
        all
    };

    /// Its row.
    pub fn def(self) -> &'static SwitchDef {
        &TABLE[self as usize]
    }

    /// The clap argument, from its row (the id is the long name).
    pub fn arg(self) -> Arg {
        let d = self.def();
        let mut arg = Arg::new(d.long)
            .long(d.long)
            .help_heading(d.heading)
            .help(d.help_line());
        if let Some(c) = d.short {
            arg = arg.short(c);
        }
        if let Some(a) = d.alias {
            arg = arg.visible_alias(a);
        }
        match d.kind {
            Kind::Bool => arg
                .value_name("BOOL")
                .num_args(0..=1)
                .default_missing_value("true")
                .value_parser(parse_bool)
                .action(ArgAction::Set),
            Kind::Categories => arg
                .value_name("CATEGORY")
                .num_args(0..)
                .action(ArgAction::Append),
        }
    }

    /// The variable and value it writes when its value is `value`.
    pub fn pair(self, value: bool) -> Option<(&'static str, &'static str)> {
        self.def().effect.pair(value)
    }

    /// Its variable (the one its [`Effect`] names).
    pub fn var(self) -> &'static str {
        match self.def().effect {
            Effect::Trace(v) | Effect::Set(v, _) | Effect::Bool(v) | Effect::Negated(v) => v,
            Effect::Umbrella | Effect::Beta => self.def().env.unwrap_or(""),
        }
    }
}

/// A value for every switch: `None` where it was not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Switches([Option<bool>; COUNT]);

impl Default for Switches {
    fn default() -> Self {
        Switches([None; COUNT])
    }
}

impl Switches {
    /// The boolean switches given in `matches` (the categories of [`Kind::Categories`] are read
    /// by the options themselves).
    pub fn from_matches(matches: &ArgMatches) -> Self {
        let mut s = Switches::default();
        for sw in Switch::ALL {
            if sw.def().kind == Kind::Bool {
                s.0[sw as usize] = matches.get_one::<bool>(sw.def().long).copied();
            }
        }
        s
    }

    /// The value of `s`: `None` when not given.
    pub fn get(&self, s: Switch) -> Option<bool> {
        self.0[s as usize]
    }

    /// Whether `s` is true.
    pub fn on(&self, s: Switch) -> bool {
        self.get(s) == Some(true)
    }

    /// Give `s` a value (`None`: not given).
    pub fn set(&mut self, s: Switch, value: Option<bool>) {
        self.0[s as usize] = value;
    }

    /// With `s` set to `value`.
    pub fn with(mut self, s: Switch, value: bool) -> Self {
        self.set(s, Some(value));
        self
    }

    /// The values after rocprofv3's implications: every switch a true one implies becomes true
    /// unless it was given (so `-s --hsa-trace=false` traces everything but HSA), through chains
    /// (`--sys-trace` turns on `--hip-trace`, which turns on `--hip-runtime-trace`, ...).
    pub fn resolved(mut self) -> Self {
        loop {
            let mut changed = false;
            for s in Switch::ALL {
                if !self.on(s) {
                    continue;
                }
                for &i in s.def().implies {
                    if self.get(i).is_none() {
                        self.set(i, Some(true));
                        changed = true;
                    }
                }
            }
            if !changed {
                return self;
            }
        }
    }

    /// Whether any of `list` was given (true or false).
    pub fn any_given(&self, list: impl IntoIterator<Item = Switch>) -> bool {
        list.into_iter().any(|s| self.get(s).is_some())
    }
}

/// The line before the generated tables in docs/options.md.
pub const DOC_BEGIN: &str =
    "<!-- generated from crates/attach/src/options/switch_table.rs; a test checks it -->";
/// The line after them.
pub const DOC_END: &str = "<!-- end of the generated tables -->";

/// docs/options.md's tables of the switches under `headings` (one `###` section each), as the
/// rows define them.
pub fn markdown(headings: &[&str]) -> String {
    let mut out = String::new();
    for (i, heading) in headings.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&format!(
            "### {heading}\n\n| Option | Variables |\n|---|---|\n"
        ));
        for s in Switch::ALL.iter().filter(|s| s.def().heading == *heading) {
            out.push_str(&markdown_row(s.def()));
        }
    }
    out
}

/// One switch's row of docs/options.md.
fn markdown_row(d: &SwitchDef) -> String {
    let mut option = match d.short {
        Some(c) => format!("`-{c}`, `--{}`", d.long),
        None => format!("`--{}`", d.long),
    };
    if let Some(a) = d.alias {
        option.push_str(&format!(", `--{a}`"));
    }
    if d.kind == Kind::Categories {
        option = format!("`--{} [CATEGORY...]`", d.long);
    }
    let mut parts = Vec::new();
    match d.effect {
        Effect::Trace(v) | Effect::Set(v, "1") => parts.push(format!("`{v}=1` if true")),
        Effect::Set(v, value) => parts.push(format!("`{v}={value}` if true")),
        Effect::Bool(v) => parts.push(format!("`{v}` = `1`/`0`")),
        Effect::Negated(v) => parts.push(format!("`{v}` = `0`/`1` (the negation)")),
        Effect::Umbrella | Effect::Beta => {}
    }
    if !d.implies.is_empty() {
        let flags: Vec<String> = d
            .implies
            .iter()
            .map(|s| format!("--{}", s.def().long))
            .collect();
        parts.push(format!("implies `{}`", flags.join(" ")));
    }
    if !d.note.is_empty() {
        parts.push(d.note.to_string());
    }
    format!("| {option} | {} |\n", parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn implications_chain_and_respect_explicit_values() {
        let sys = Switches::default().with(Switch::SysTrace, true).resolved();
        for s in [
            Switch::HipTrace,
            Switch::HipRuntimeTrace,
            Switch::HipGraphTrace,
            Switch::HsaCoreTrace,
        ] {
            assert!(sys.on(s), "{s:?}");
        }
        assert!(!sys.on(Switch::KernelRename));
        let no_hsa = Switches::default()
            .with(Switch::SysTrace, true)
            .with(Switch::HsaTrace, false)
            .resolved();
        assert!(!no_hsa.on(Switch::HsaCoreTrace) && no_hsa.on(Switch::KernelTrace));
    }

    /// docs/options.md carries the tracing tables as the rows define them, between these lines.
    #[test]
    fn docs_tables_are_generated_from_the_rows() {
        use crate::options::{H_BASIC, H_EXTENDED};
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/options.md");
        let doc = std::fs::read_to_string(path).expect("docs/options.md");
        let (begin, end) = (DOC_BEGIN, DOC_END);
        let found = doc
            .split_once(begin)
            .and_then(|(_, rest)| rest.split_once(end))
            .map(|(inside, _)| inside.trim_matches('\n'));
        let expected = markdown(&[H_BASIC, H_EXTENDED]);
        assert_eq!(
            found,
            Some(expected.trim_end()),
            "docs/options.md must have, between `{begin}` and `{end}`:\n{expected}"
        );
    }

    #[test]
    fn rows_are_consistent() {
        let mut longs = std::collections::HashSet::new();
        for s in Switch::ALL {
            let d = s.def();
            assert!(longs.insert(d.long), "--{} twice", d.long);
            assert!(!d.implies.contains(&s), "{s:?} implies itself");
            assert!(d.needs != Some(s), "{s:?} needs itself");
        }
    }
}
