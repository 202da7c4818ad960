//! The keeper's protocol through real sockets, pipes and a process (docs/handover.md): a first
//! owner hands a command over and records part of its output, then goes away having received
//! more than it recorded; a second owner follows from what is recorded and gets exactly the
//! rest — no byte twice, none missing — and the end after the last byte. The call's doors to the
//! host go with it: what reaches them while no owner serves them waits for the next.

use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};

use chock_sandbox::keeper::{self, Frame};
use chock_sandbox::{CallDoors, KeptCall};

/// A command printing numbered lines, kept as a confined call would be: its pipes, a pidfd of
/// it, a status pipe holding its wait status 0, and a lifeline.
fn kept_command(lines: u32) -> (KeptCall, std::process::Child) {
    let child = Command::new("/bin/sh")
        .args([
            "-c",
            &format!("i=1; while [ $i -le {lines} ]; do echo line $i; i=$((i+1)); sleep 0.01; done; echo bye >&2"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // SAFETY: pidfd_open of our own child; the descriptor returned is owned here.
    let pidfd = unsafe {
        let fd = libc::syscall(libc::SYS_pidfd_open, child.id(), 0);
        assert!(fd >= 0, "pidfd_open");
        OwnedFd::from_raw_fd(i32::try_from(fd).unwrap())
    };
    let (status_r, mut status_w) = std::io::pipe().unwrap();
    status_w.write_all(&0i32.to_ne_bytes()).unwrap();
    drop(status_w);
    let (_lifeline_r, lifeline_w) = std::io::pipe().unwrap();
    let mut child = child;
    let kept = KeptCall {
        lifeline: lifeline_w.into(),
        pidfd,
        status: status_r.into(),
        stdout: child.stdout.take().unwrap().into(),
        stderr: child.stderr.take().unwrap().into(),
        timeout: None,
        doors: CallDoors::default(),
    };
    (kept, child)
}

fn expected(lines: u32) -> Vec<u8> {
    (1..=lines)
        .flat_map(|i| format!("line {i}\n").into_bytes())
        .collect()
}

#[test]
fn a_second_owner_gets_exactly_what_the_first_did_not_record_and_then_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let listener = keeper::bind(dir.path()).unwrap();
    let served = std::thread::spawn(move || keeper::serve(listener));
    let (first, handles) = keeper::connect(dir.path()).unwrap().unwrap();
    assert!(handles.is_empty());
    let (mut kept, mut child) = kept_command(200);
    // Two of the call's doors: an egress listener and a host channel (the call's end kept here,
    // as the call's processes would hold it).
    let egress = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let egress_at = egress.local_addr().unwrap();
    let (host_end, call_end) = std::os::unix::net::UnixDatagram::pair().unwrap();
    kept.doors = CallDoors {
        egress: Some(egress.into()),
        channel: Some(host_end.into()),
        seccomp: None,
    };
    let follow = keeper::keep(&first, "bg-c1", kept).unwrap();
    // The first owner records the first 100 bytes of stdout and acknowledges them; it receives
    // more, then dies before it records them.
    let mut recorded: Vec<u8> = Vec::new();
    let mut received_past = 0;
    while recorded.len() < 100 || received_past == 0 {
        match follow.next().unwrap().unwrap() {
            Frame::Out {
                stream: 0,
                offset,
                bytes,
            } => {
                assert_eq!(
                    usize::try_from(offset).unwrap(),
                    recorded.len() + received_past
                );
                if recorded.len() < 100 {
                    recorded.extend_from_slice(&bytes);
                    follow.ack(0, recorded.len() as u64).unwrap();
                } else {
                    received_past += bytes.len();
                }
            }
            Frame::Out { .. } => {}
            Frame::End { .. } => panic!("ended before the first owner went"),
        }
    }
    drop(follow);
    drop(first);
    // Nobody serves the doors now: a connection waits in the listener's queue and a request in
    // the channel, neither refused (the keeper holds the only host copies).
    let mut waiting = std::net::TcpStream::connect(egress_at).unwrap();
    call_end.send(b"a request").unwrap();
    // The second owner: the keeper keeps the call, and sends from the recorded offset on.
    let (second, handles) = keeper::connect(dir.path()).unwrap().unwrap();
    assert_eq!(handles, ["bg-c1"]);
    let refused = keeper::follow(&second, "bg-c1", [0, 0]);
    assert!(refused.is_err(), "bytes already let go were offered again");
    let (follow, followed) = keeper::follow(&second, "bg-c1", [recorded.len() as u64, 0]).unwrap();
    assert!(
        followed.doors.seccomp.is_none(),
        "a door that was not given"
    );
    // The second owner serves the doors it was given: the waiting connection and request are
    // there.
    let egress = std::net::TcpListener::from(followed.doors.egress.unwrap());
    let (mut served_conn, _) = egress.accept().unwrap();
    use std::io::Read;
    waiting.write_all(b"hello").unwrap();
    let mut word = [0u8; 5];
    served_conn.read_exact(&mut word).unwrap();
    assert_eq!(&word, b"hello");
    let channel = std::os::unix::net::UnixDatagram::from(followed.doors.channel.unwrap());
    let mut request = [0u8; 32];
    let n = channel.recv(&mut request).unwrap();
    assert_eq!(&request[..n], b"a request");
    let mut stderr = Vec::new();
    let end = loop {
        match follow.next().unwrap().unwrap() {
            Frame::Out {
                stream: 0,
                offset,
                bytes,
            } => {
                assert_eq!(
                    usize::try_from(offset).unwrap(),
                    recorded.len(),
                    "a gap or a repeat"
                );
                recorded.extend_from_slice(&bytes);
                follow.ack(0, recorded.len() as u64).unwrap();
            }
            Frame::Out { offset, bytes, .. } => {
                assert_eq!(usize::try_from(offset).unwrap(), stderr.len());
                stderr.extend_from_slice(&bytes);
            }
            Frame::End { status, timed_out } => break (status, timed_out),
        }
    };
    assert_eq!(recorded, expected(200));
    assert_eq!(stderr, b"bye\n");
    assert_eq!(end, (Some(0), false));
    child.wait().unwrap();
    follow.recorded().unwrap();
    second.finish();
    served.join().unwrap().unwrap();
}

/// The session ends: the keeper kills what it still keeps, through the call's pidfd.
#[test]
fn finish_kills_what_the_keeper_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let listener = keeper::bind(dir.path()).unwrap();
    let served = std::thread::spawn(move || keeper::serve(listener));
    let (link, _) = keeper::connect(dir.path()).unwrap().unwrap();
    let (kept, mut child) = kept_command(100_000);
    let _follow = keeper::keep(&link, "bg-c2", kept).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    link.finish();
    served.join().unwrap().unwrap();
    let status = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
}

/// Nobody holds the keeper (its owner died, or let go and nobody took the session up): after
/// its wait it ends, and what it keeps is killed with it.
#[test]
fn an_ownerless_keeper_ends_and_kills_what_it_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let listener = keeper::bind(dir.path()).unwrap();
    let alone = std::time::Duration::from_millis(300);
    let served = std::thread::spawn(move || keeper::serve_alone(listener, alone));
    let (link, _) = keeper::connect(dir.path()).unwrap().unwrap();
    let (kept, mut child) = kept_command(100_000);
    let follow = keeper::keep(&link, "bg-c3", kept).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the command ended early"
    );
    // The owner goes: every connection it held closes.
    drop((follow, link));
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < until,
            "the command outlived its keeper"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    served.join().unwrap().unwrap();
}
