//! The init's lifetime layer, through real processes: an init whose setup process died between
//! the fork and the init's `PR_SET_PDEATHSIG` would never get the signal, so it must find the
//! death itself and end. Every forked process here makes only system calls (no allocation), as
//! a child of a multi-threaded test process must.

use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use crate::child::init::{ChildFds, init_lifetime, step};
use crate::child::sys::{exit_now, pidfd_open};
use crate::wire::error::Layer;
use crate::wire::report::{self, Kind, Record};

/// How the setup process (a child of the test) behaves once it forked its init.
#[derive(Clone, Copy)]
enum Setup {
    /// Ends at once, before its init can ask to die with it.
    DiesFirst,
    /// Lives until its init has ended.
    Lives,
}

/// Forks a setup process that forks an init; the init runs [`init_lifetime`] once its setup is
/// where `setup` puts it and reports on `chan`: the layer that failed, or `SessionReady` when
/// `init_lifetime` returned.
fn run(setup: Setup) -> Record {
    let (host, chan) = UnixDatagram::pair().unwrap();
    host.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let chan_fd = chan.as_raw_fd();
    // SAFETY: the child makes only system calls and ends with _exit.
    let setup_pid = unsafe { libc::fork() };
    assert!(setup_pid >= 0, "fork");
    if setup_pid == 0 {
        setup_main(setup, chan_fd);
    }
    drop(chan);
    let mut status = 0;
    // SAFETY: our own child.
    unsafe { libc::waitpid(setup_pid, &raw mut status, 0) };
    let (record, _) = report::recv(host.as_raw_fd())
        .expect("the init reports within 10 s")
        .expect("the init reports before it ends");
    record
}

fn setup_main(setup: Setup, chan: RawFd) -> ! {
    // SAFETY: getpid cannot fail.
    let Ok(me) = pidfd_open(unsafe { libc::getpid() }) else {
        exit_now(2)
    };
    let mut lifeline = [0 as RawFd; 2];
    // SAFETY: room for two descriptors.
    if unsafe { libc::pipe(lifeline.as_mut_ptr()) } != 0 {
        exit_now(2);
    }
    // SAFETY: as above: system calls only.
    let init = unsafe { libc::fork() };
    if init == 0 {
        init_main(me, chan, lifeline[0]);
    }
    if matches!(setup, Setup::Lives) {
        let mut status = 0;
        // SAFETY: our own child.
        unsafe { libc::waitpid(init, &raw mut status, 0) };
    }
    exit_now(0)
}

fn init_main(setup: RawFd, chan: RawFd, lifeline_r: RawFd) -> ! {
    // A setup that dies first is waited for, so that the race is lost for certain.
    let mut pfd = libc::pollfd {
        fd: setup,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&raw mut pfd, 1, 200) };
    let fds = ChildFds {
        chan,
        status_w: -1,
        lifeline_r,
        stdio: [None; 3],
        overlay: None,
        cgroup: None,
        control: None,
        gate: None,
        net: None,
        setup: Some(setup),
        host_channel: None,
    };
    init_lifetime(&fds);
    let _ = report::send(chan, Record::new(Kind::SessionReady, 0, 0, 0, 0), None);
    exit_now(0)
}

#[test]
fn an_init_whose_setup_died_before_its_parent_death_signal_was_set_ends_naming_the_lifetime_layer()
{
    let record = run(Setup::DiesFirst);
    assert_eq!(
        (record.kind, record.layer, record.step, record.errno),
        (
            Kind::LayerFailed as u32,
            Layer::Lifetime as u32,
            step::SETUP_GONE,
            libc::ESRCH
        ),
        "an init outliving its setup went on (stopped by: the setup's pidfd, looked at after \
         PR_SET_PDEATHSIG in init_lifetime)"
    );
}

#[test]
fn an_init_whose_setup_lives_goes_on() {
    let record = run(Setup::Lives);
    assert_eq!(record.kind, Kind::SessionReady as u32, "{record:?}");
}
