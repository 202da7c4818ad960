//! The guest's init: pid 1 of a microVM that runs tool calls (docs/microvm.md).
//!
//! It mounts what a kernel needs, loads the virtio modules from the initramfs, opens its
//! channel to the host (the virtio-serial port named [`chock_guest::PORT_NAME`]), says hello,
//! mounts the shares the host names, and then runs each call it is sent with the same sandbox
//! driver the host uses (`chock_sandbox::spawn`): every layer is built here, under the guest's
//! kernel. When the channel ends, or anything of the setup fails, it powers the guest off.

#![forbid(unsafe_code)]

mod boot;
mod call;
mod channel;
mod egress;

use std::fs::File;
use std::io;
use std::sync::{Arc, Mutex};

use chock_guest::{Frame, Hello, Setup, tag};

/// The channel's writing end, shared by the threads that send frames.
pub(crate) type Writer = Arc<Mutex<File>>;

/// Sends `frame`; a channel that cannot be written is gone, and so is the host.
pub(crate) fn send(w: &Writer, frame: &Frame) -> io::Result<()> {
    let mut port = w
        .lock()
        .map_err(|_| io::Error::other("the channel's lock"))?;
    frame.write_to(&mut *port)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("chock-guest: {e}");
    }
    boot::power_off();
}

/// Reads the host's setup, sets the clock and mounts the shares; answers `READY`, or
/// `SETUP_FAILED` and an error (the guest then powers off).
fn set_up(port: &mut File, writer: &Writer) -> io::Result<Setup> {
    let setup = match Frame::read_from(port)? {
        Some(f) if f.tag == tag::SETUP => f.parse::<Setup>()?,
        _ => return Err(io::Error::other("the host sent no setup")),
    };
    if let Err(e) = boot::set_clock(&setup).and_then(|()| boot::mount_shares(&setup)) {
        send(writer, &Frame::new(tag::SETUP_FAILED, e.to_string()))?;
        return Err(e);
    }
    send(writer, &Frame::new(tag::READY, Vec::new()))?;
    Ok(setup)
}

fn run() -> io::Result<()> {
    boot::leave_initramfs()?;
    boot::mount_basics()?;
    boot::load_modules()?;
    let mut port = boot::open_port()?;
    let writer: Writer = Arc::new(Mutex::new(port.try_clone()?));
    let kernel = rustix::system::uname()
        .release()
        .to_string_lossy()
        .into_owned();
    let hello = Hello {
        kernel,
        interfaces: boot::interfaces(),
        virtio_devices: boot::virtio_devices(),
    };
    send(&writer, &Frame::json(tag::HELLO, &hello))?;
    let mut setup = set_up(&mut port, &writer)?;
    let calls = call::Calls::default();
    while let Some(frame) = Frame::read_from(&mut port)? {
        match frame.tag {
            // Between calls only (the host sends it to a warm guest it holds): the shares go,
            // the machine is snapshotted, and the next setup mounts the shares again — in a
            // restored guest, the fork's.
            tag::SUSPEND => match boot::unmount_shares(&setup) {
                Ok(()) => {
                    send(&writer, &Frame::new(tag::SUSPENDED, Vec::new()))?;
                    setup = set_up(&mut port, &writer)?;
                }
                Err(e) => send(&writer, &Frame::new(tag::SUSPEND_FAILED, e.to_string()))?,
            },
            tag::CALL => calls.start(&frame.body, &writer),
            tag::STDIN => calls.stdin(Some(&frame.body)),
            tag::STDIN_END => calls.stdin(None),
            tag::KILL => calls.kill(),
            tag::NET_IN | tag::NET_IN_END => {
                if let Some((id, bytes)) = chock_guest::net_parts(&frame.body) {
                    calls.net(id, (frame.tag == tag::NET_IN).then_some(bytes));
                }
            }
            tag::CHANNEL_ANSWER => {
                if let Some((id, bytes)) = chock_guest::net_parts(&frame.body) {
                    calls.channel_answer(id, bytes);
                }
            }
            other => eprintln!("chock-guest: an unknown frame {other} from the host"),
        }
    }
    Ok(())
}
