//! End to end inside a stand-in CUDA process: the fake libcuda.so.1 and libcupti.so.13 of
//! `tests/fixtures/cuda` (built here with gcc against the real CUPTI headers), a harness that
//! starts this cdylib the way the injected trampoline does, and the test acting as the front end.
//! Skipped with a note if the stand-ins or the headers are not there.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use rocprof_cuda_tool::sock::{self, Received};
use rocprof_rocpd::reader::{AgentIndex, Input};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn gcc(args: &[&str]) {
    let out = Command::new("gcc").args(args).output().expect("gcc runs");
    assert!(
        out.status.success(),
        "gcc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Builds the stand-ins and the harness into a fresh directory; None if they are missing.
fn build(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let src = root().join("tests/fixtures/cuda");
    if !src.join("fake_cupti.c").exists() || !src.join("fake_cuda.c").exists() {
        println!("NOTE: tests/fixtures/cuda is missing; stand-in test skipped");
        return None;
    }
    let inc = root().join("target/cupti-headers");
    if !inc.join("cupti.h").exists() {
        let ok = Command::new("sh")
            .arg(root().join("tests/prereq/cupti_headers.sh"))
            .arg(&inc)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            println!("NOTE: CUPTI headers unavailable; stand-in test skipped");
            return None;
        }
    }
    let s = |p: &str| src.join(p).display().to_string();
    let d = |p: &str| dir.join(p).display().to_string();
    let inc = inc.display().to_string();
    gcc(&[
        "-O1",
        "-pthread",
        "-fPIC",
        "-shared",
        "-Wl,-soname,libcuda.so.1",
        "-I",
        &s(""),
        "-o",
        &d("libcuda.so.1"),
        &s("fake_cuda.c"),
        "-ldl",
    ]);
    gcc(&[
        "-O1",
        "-pthread",
        "-fPIC",
        "-shared",
        "-Wl,-soname,libcupti.so.13",
        "-I",
        &s(""),
        "-I",
        &inc,
        "-o",
        &d("libcupti.so.13"),
        &s("fake_cupti.c"),
        &s("fake_cupti_profiler.c"),
        "-ldl",
    ]);
    let harness = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/harness.c");
    gcc(&[
        "-O1",
        "-pthread",
        "-I",
        &s(""),
        "-o",
        &d("harness"),
        &harness.display().to_string(),
        &d("libcuda.so.1"),
        &format!("-Wl,-rpath,{}", dir.display()),
        "-ldl",
        // libstdc++ mapped, as in any CUDA runtime process: the tool demangles with it.
        "-Wl,--no-as-needed",
        "-lstdc++",
    ]);
    Some((dir.join("harness"), dir.join("libcupti.so.13")))
}

/// The cdylib cargo built with the test executable (in `deps/`, which `cargo test` keeps
/// current; the copy one level up is refreshed by `cargo build` only).
fn tool_so() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let so = deps.join("librocprof_cuda_tool.so");
    assert!(so.exists(), "{} not built", so.display());
    so
}

struct Harness {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    pid: u32,
    tid: i64,
}

impl Harness {
    fn start(exe: &Path, fe: &str, cupti: Option<&Path>, env: &[(&str, &str)]) -> Harness {
        let mut cmd = Command::new(exe);
        cmd.arg(tool_so()).arg(fe);
        if let Some(c) = cupti {
            cmd.arg(c);
        }
        cmd.envs(env.iter().copied());
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut h = Harness {
            child,
            stdin,
            lines,
            pid: 0,
            tid: 0,
        };
        let ready = h.line();
        let parts: Vec<&str> = ready.split(' ').collect();
        assert_eq!(parts[0], "ready", "{ready}");
        h.pid = parts[1].parse().unwrap();
        h.tid = parts[2].parse().unwrap();
        h
    }

    fn line(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(30))
            .expect("harness answers within 30 s")
    }

    fn ask(&mut self, cmd: &str) -> String {
        writeln!(self.stdin, "{cmd}").unwrap();
        self.stdin.flush().unwrap();
        self.line()
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        std::thread::sleep(Duration::from_millis(50));
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn timeouts(fd: &OwnedFd) {
    let tv = libc::timeval {
        tv_sec: 30,
        tv_usec: 0,
    };
    for opt in [libc::SO_RCVTIMEO, libc::SO_SNDTIMEO] {
        // SAFETY: valid timeval.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                &tv as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
    }
}

fn ask(fd: &OwnedFd, msg: &str) -> String {
    sock::send(fd, msg.as_bytes()).unwrap();
    match sock::recv(fd).expect("tool replies within 30 s") {
        Received::Message(m) => String::from_utf8(m).unwrap(),
        other => panic!("{other:?}"),
    }
}

fn ok_json(reply: &str) -> serde_json::Value {
    let body = reply
        .strip_prefix("ok ")
        .unwrap_or_else(|| panic!("not ok: {reply}"));
    serde_json::from_str(body).unwrap()
}

fn attach_msg(db: &Path) -> String {
    format!(
        "attach\nROCPROF_KERNEL_TRACE=1\nROCPROF_MEMORY_COPY_TRACE=1\nROCPROF_HIP_RUNTIME_API_TRACE=1\n\
         ROCPROF_ATTACH_CUDA_DRIVER_API=1\nROCPROF_MEMORY_ALLOCATION_TRACE=1\nROCPROF_ATTACH_DB={}\n",
        db.display()
    )
}

fn state(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Checks the database of one `work` round.
fn check_db(db: &Path, pid: u32, tid: i64) {
    let input = Input::open(db).expect("open db");
    let sources = input.sources().expect("sources");
    assert_eq!(sources.len(), 1);
    let src = &sources[0];
    let dims = src.dims(AgentIndex::Absolute).unwrap();
    let gpu = dims.agents.get(&1).expect("GPU agent 1");
    assert_eq!(gpu.agent_type, "GPU");
    assert_eq!(gpu.vendor_name, "NVIDIA");
    assert!(dims.agents.contains_key(&0), "CPU agent");
    let mut kernels = Vec::new();
    src.dispatches(|d| {
        kernels.push((
            dims.symbols[&d.kernel_id].kernel_name.clone(),
            d.tid,
            d.grid[0],
            d.start,
        ));
        Ok(())
    })
    .unwrap();
    kernels.sort();
    let names: Vec<&str> = kernels.iter().map(|k| k.0.as_str()).collect();
    assert_eq!(names, ["_Z5otherv", "_Z6kernelPf", "_Z6kernelPf"]);
    let shown: Vec<&str> = dims
        .symbols
        .values()
        .map(|s| s.display_name.as_str())
        .collect();
    assert!(
        shown.contains(&"kernel(float*)") && shown.contains(&"other()"),
        "{shown:?}"
    );
    assert!(kernels.iter().all(|k| k.1 == tid), "{kernels:?} tid {tid}");
    assert_eq!(kernels[1].2, 4 * 256, "grid = blocks * threads");
    // CLOCK_BOOTTIME, not CUPTI's CLOCK_REALTIME: within the last hour of boot time.
    let now = {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut t) };
        t.tv_sec * 1_000_000_000 + t.tv_nsec
    };
    assert!(kernels
        .iter()
        .all(|k| k.3 <= now && k.3 > now - 3_600_000_000_000));
    let mut copies = Vec::new();
    src.memory_copies(|c| {
        copies.push((dims.string(c.name_id).to_owned(), c.size, c.tid));
        Ok(())
    })
    .unwrap();
    copies.sort();
    assert_eq!(
        copies,
        [
            ("MEMORY_COPY_DEVICE_TO_HOST".into(), 1024, tid),
            ("MEMORY_COPY_HOST_TO_DEVICE".into(), 4096, tid),
            ("MEMORY_SET".into(), 512, tid),
        ]
    );
    let mut apis = Vec::new();
    src.api_calls(|a| {
        apis.push((
            dims.string(a.category_id).to_owned(),
            dims.string(a.name_id).to_owned(),
            a.tid,
            a.pid,
        ));
        Ok(())
    })
    .unwrap();
    assert!(
        apis.iter().all(|a| a.2 == tid && a.3 == pid as i64),
        "{apis:?}"
    );
    assert!(
        apis.iter()
            .any(|a| a.0 == "HIP_RUNTIME_API_CUDA" && a.1 == "cudaLaunchKernel"),
        "{apis:?}"
    );
    assert!(
        apis.iter()
            .any(|a| a.0 == "HIP_RUNTIME_API_CUDA_DRIVER" && a.1 == "cuLaunchKernel"),
        "{apis:?}"
    );
    let mut allocs = Vec::new();
    src.memory_allocations(|m| {
        allocs.push((m.operation, m.size));
        Ok(())
    })
    .unwrap();
    allocs.sort();
    assert_eq!(
        allocs,
        [
            ("MEMORY_ALLOCATION_ALLOCATE", 1 << 20),
            ("MEMORY_ALLOCATION_FREE", 1 << 20)
        ]
    );
}

#[test]
fn attach_work_detach_reattach_in_a_standin_process() {
    let dir = std::env::temp_dir().join(format!("cuda-tool-standins-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let Some((harness, cupti)) = build(&dir) else {
        return;
    };
    let fe_name = format!("rocprof-cuda-tool-test.{}", std::process::id());
    let fe = sock::listen(&fe_name).unwrap();
    timeouts(&fe);
    let state_file = dir.join("state");
    let state_s = state_file.display().to_string();
    let mut h = Harness::start(
        &harness,
        &fe_name,
        Some(&cupti),
        &[("FAKE_CUPTI_STATE", &state_s)],
    );
    let conn = sock::accept(&fe).expect("the tool connects within 30 s");
    timeouts(&conn);

    // Session 1 over the connection the tool made.
    let db1 = dir.join("one.db");
    let r = ok_json(&ask(&conn, &attach_msg(&db1)));
    assert!(
        r["cupti"].as_str().unwrap().ends_with("libcupti.so.13"),
        "{r}"
    );
    assert_eq!(
        r["kinds"],
        serde_json::json!(["kernel", "memcpy", "memset", "runtime", "driver", "memory"])
    );
    assert!(
        state(&state_file).starts_with("subscribed=1 callbacks=1 enabled=1,2,4,5,10,49 "),
        "{}",
        state(&state_file)
    );
    assert_eq!(h.ask("work"), "done");
    let r = ok_json(&ask(&conn, "detach\n"));
    assert_eq!(
        (
            r["kernels"].as_u64(),
            r["copies"].as_u64(),
            r["allocations"].as_u64()
        ),
        (Some(3), Some(3), Some(2)),
        "{r}"
    );
    assert_eq!(r["dropped"], 0);
    // Nothing is enabled; the subscriber stays until the process's next launch tears CUPTI
    // down (crates/cuda-tool/src/teardown.rs), which its next work does.
    assert!(
        state(&state_file).starts_with("subscribed=1 callbacks=1 enabled= "),
        "{}",
        state(&state_file)
    );
    assert_eq!(h.ask("work"), "done");
    assert!(
        state(&state_file).starts_with("subscribed=0 callbacks=0 enabled= ")
            && state(&state_file).contains(" finalized=1 "),
        "{}",
        state(&state_file)
    );
    check_db(&db1, h.pid, h.tid);

    // csv conversion files the CUDA API rows under the HIP API domain.
    let csv_dir = dir.join("csv");
    let files = rocprof_rocpd::convert_outputs(
        std::slice::from_ref(&db1),
        &[rocprof_rocpd::format::OutputFormat::Csv],
        &csv_dir,
        "out",
    )
    .unwrap();
    let api_csv = files
        .iter()
        .find(|f| f.to_string_lossy().ends_with("hip_api_trace.csv"))
        .expect("hip_api_trace.csv");
    let text = std::fs::read_to_string(api_csv).unwrap();
    assert!(text.contains("\"cudaLaunchKernel\""), "{text}");

    // A second start in the same process finds the tool alive.
    assert_eq!(h.ask("start"), "returned 1");

    // Session 2 through the tool's own socket once the first connection is closed; the
    // connection then ends without detach.
    drop(conn);
    let conn2 = sock::connect(&format!("rocprof-attach-cuda.{}", h.pid)).unwrap();
    timeouts(&conn2);
    let db2 = dir.join("two.db");
    ok_json(&ask(&conn2, &attach_msg(&db2)));
    // A third connection meanwhile is refused.
    let conn3 = sock::connect(&format!("rocprof-attach-cuda.{}", h.pid)).unwrap();
    timeouts(&conn3);
    sock::send(&conn3, attach_msg(&dir.join("three.db")).as_bytes()).unwrap();
    match sock::recv(&conn3).unwrap() {
        Received::Message(m) => assert!(String::from_utf8_lossy(&m).starts_with("error busy ")),
        other => panic!("{other:?}"),
    }
    assert_eq!(h.ask("work"), "done");
    drop(conn2);
    let mut waited = 0;
    // The EOF detaches: nothing enabled (the teardown waits for a launch).
    while !(db2.exists() && state(&state_file).starts_with("subscribed=1 callbacks=1 enabled= ")) {
        assert!(
            waited < 300,
            "no database after EOF: {}",
            state(&state_file)
        );
        std::thread::sleep(Duration::from_millis(100));
        waited += 1;
    }
    std::thread::sleep(Duration::from_millis(200));
    check_db(&db2, h.pid, h.tid);
    assert_eq!(h.ask("work"), "done");
    assert!(
        state(&state_file).contains(" finalized=2 "),
        "{}",
        state(&state_file)
    );
    drop(h);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cupti_held_by_another_profiler() {
    let dir = std::env::temp_dir().join(format!("cuda-tool-held-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let Some((harness, cupti)) = build(&dir) else {
        return;
    };
    let fe_name = format!("rocprof-cuda-tool-held.{}", std::process::id());
    let fe = sock::listen(&fe_name).unwrap();
    timeouts(&fe);
    let h = Harness::start(&harness, &fe_name, None, &[("FAKE_CUPTI_HELD", "1")]);
    let conn = sock::accept(&fe).unwrap();
    timeouts(&conn);
    // Not mapped: found through ROCPROF_ATTACH_CUPTI.
    let msg = format!(
        "attach\nROCPROF_KERNEL_TRACE=1\nROCPROF_ATTACH_CUPTI={}\nROCPROF_ATTACH_DB={}\n",
        cupti.display(),
        dir.join("x.db").display()
    );
    let r = ask(&conn, &msg);
    assert!(r.starts_with("error cupti-held "), "{r}");
    assert!(r.contains("(39)"), "{r}");
    // The session is not attached: detach is refused, the tool stays usable.
    assert!(ask(&conn, "detach\n").starts_with("error "));
    drop(h);
    let _ = std::fs::remove_dir_all(&dir);
}
