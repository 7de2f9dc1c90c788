//! The serving code in-process with a fake backend: attach/detach replies, busy refusals,
//! detach on EOF, the tool socket name taken twice.

use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

use rocprof_cuda_tool::protocol::{AttachRequest, Code, ToolError};
use rocprof_cuda_tool::server::{serve_connection, Backend};
use rocprof_cuda_tool::sock::{self, Received};

#[derive(Default, Clone)]
struct Fake {
    log: Arc<Mutex<Vec<String>>>,
}

impl Backend for Fake {
    fn attach(&mut self, req: &AttachRequest) -> Result<serde_json::Value, ToolError> {
        self.log.lock().unwrap().push("attach".into());
        let plan = req.plan()?;
        Ok(serde_json::json!({"kinds": plan.kind_names()}))
    }
    fn detach(&mut self) -> Result<serde_json::Value, ToolError> {
        self.log.lock().unwrap().push("detach".into());
        Ok(serde_json::json!({"db": "/x.db", "kernels": 0}))
    }
}

fn pair() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: valid array of two ints.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    assert_eq!(r, 0);
    // SAFETY: fresh descriptors.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

fn ask(fd: &OwnedFd, msg: &str) -> String {
    sock::send(fd, msg.as_bytes()).unwrap();
    match sock::recv(fd).unwrap() {
        Received::Message(m) => String::from_utf8(m).unwrap(),
        other => panic!("{other:?}"),
    }
}

const ATTACH: &str = "attach\nROCPROF_KERNEL_TRACE=1\nROCPROF_ATTACH_DB=/tmp/x.db\n";

#[test]
fn attach_detach_and_refusals() {
    let (fe, tool) = pair();
    let fake = Fake::default();
    let log = fake.log.clone();
    let t = std::thread::spawn(move || {
        let mut b = fake;
        serve_connection(&tool, None, &mut b)
    });
    assert_eq!(ask(&fe, "detach\n").split(' ').nth(1), Some("internal"));
    assert_eq!(ask(&fe, ATTACH), r#"ok {"kinds":["kernel"]}"#);
    assert!(ask(&fe, ATTACH).starts_with("error busy "));
    assert!(ask(&fe, "bogus\n").starts_with("error unsupported "));
    assert!(ask(&fe, "detach\n").starts_with(r#"ok {"db":"/x.db""#));
    assert!(ask(&fe, "attach\nROCPROF_ATTACH_DB=/x.db\n").starts_with("error unsupported "));
    assert_eq!(ask(&fe, ATTACH), r#"ok {"kinds":["kernel"]}"#);
    drop(fe); // EOF while attached: the tool detaches by itself
    assert!(t.join().unwrap());
    assert_eq!(
        *log.lock().unwrap(),
        ["attach", "detach", "attach", "attach", "detach"]
    );
}

#[test]
fn second_session_is_busy_and_socket_name_is_single() {
    let listener = rocprof_cuda_tool::bind_tool_socket()
        .unwrap()
        .expect("tool socket free");
    assert!(rocprof_cuda_tool::bind_tool_socket().unwrap().is_none());
    let name = rocprof_cuda_tool::protocol::tool_socket_name(std::process::id());
    let (fe, tool) = pair();
    let t = std::thread::spawn(move || {
        let mut b = Fake::default();
        serve_connection(&tool, Some(&listener), &mut b);
        listener
    });
    assert!(ask(&fe, ATTACH).starts_with("ok "));
    let second = sock::connect(&name).unwrap();
    // The front end's way: send first, then read; the refusal must be what it reads.
    sock::send(&second, ATTACH.as_bytes()).expect("the refused connection takes the message");
    match sock::recv(&second).unwrap() {
        Received::Message(m) => {
            let text = String::from_utf8(m).unwrap();
            assert!(text.starts_with("error busy "), "{text}");
            assert!(text.contains("second concurrent session is refused"));
        }
        other => panic!("{other:?}"),
    }
    assert!(ask(&fe, "detach\n").starts_with("ok "));
    drop(fe);
    let listener = t.join().unwrap();
    // The listener still accepts after the session: a new connection queues.
    let third = sock::connect(&name).unwrap();
    let c = sock::accept(&listener).unwrap();
    assert!(rocprof_cuda_tool::server::check_peer(&c));
    drop(third);
    let _ = Code::Busy;
}
