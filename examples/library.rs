//! The attach library in one session, as the CLI composes it: plan, attach, wait, detach,
//! collect (docs/architecture.md). Kernel tracing on one process for a few seconds:
//!
//!     cargo run --example library -- PID [SECONDS]
use rocprof_attach::attach::envbuf::EnvList;
use rocprof_attach::attach::session::{
    self, AttachRequest, Event, OutputWait, WaitOptions, Waiter,
};
use rocprof_attach::attach::targets::TargetSelection;
use rocprof_attach::engine::agent::{Agents, CallTimeouts};
use std::time::Duration;

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>().ok());
    let (Some(Some(pid)), secs) = (args.next(), args.next().flatten().unwrap_or(2)) else {
        return eprintln!("usage: library PID [SECONDS]");
    };
    let agents = Agents::start(CallTimeouts::default()); // the forked agent server: first
    let env = EnvList::from_pairs([("ROCPROF_KERNEL_TRACE", "1")]); // rocprofv3's variables
    let cwd = std::env::current_dir().expect("cwd");
    let req = AttachRequest::new(TargetSelection::Pids(vec![pid as i32]), env, &cwd);
    let events = |e: Event| eprintln!("{e:?}"); // progress; the library never prints
    let plan = session::plan(&req, &events).expect("preflight refused the target");
    let collector = session::Collector::before(&plan, &req);
    let attached = session::attach(&plan, &req.env, 1, &agents, &events, &|| false);
    let window = WaitOptions {
        duration: Some(Duration::from_secs(secs)),
        enter: false,
        tick: None,
    };
    let end = Waiter::install()
        .expect("signals")
        .wait(&attached.pids(), window, &events);
    let detached = session::detach(&attached.attached, 1, req.sync_output, &agents, &events);
    session::settle(&plan.claims, &plan.pids(), &detached);
    let report = collector.collect(
        &req,
        &plan,
        &attached,
        &end,
        &detached,
        OutputWait::NotWaited,
        &events,
    );
    report
        .files
        .iter()
        .for_each(|f| println!("{} ({} bytes)", f.path.display(), f.size));
    std::process::exit(report.exit_code as i32);
}
