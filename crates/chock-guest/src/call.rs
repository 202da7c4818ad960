//! One call at a time in the guest, run by the same driver as on the host.

use std::fs::File;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

use chock_guest::{CallStdio, Ended, Frame, GuestError, tag};
use chock_sandbox::{Killer, PreparedCall, SandboxError, StdioMode};

use crate::{Writer, send};

/// The running call's stdin and killer, for the frames that reach it.
#[derive(Default, Clone)]
pub(crate) struct Calls(Arc<Mutex<Running>>);

#[derive(Default)]
struct Running {
    killer: Option<Killer>,
    stdin: Option<File>,
    relay: Option<crate::egress::Relay>,
    channel: Option<crate::channel::Channel>,
}

impl Calls {
    /// Starts the call in `body` (the stdio byte, then the plan) on a thread of its own; what
    /// becomes of it is sent back as frames.
    pub(crate) fn start(&self, body: &[u8], writer: &Writer) {
        let this = self.clone();
        let writer = writer.clone();
        let body = body.to_vec();
        std::thread::spawn(move || {
            if let Err(e) = this.run(&body, &writer) {
                let _ = send(
                    &writer,
                    &Frame::json(tag::START_FAILED, &GuestError::from(&e)),
                );
            }
        });
    }

    fn run(&self, body: &[u8], writer: &Writer) -> Result<(), SandboxError> {
        let (mode, plan) = body
            .split_first()
            .and_then(|(b, plan)| Some((CallStdio::from_byte(*b)?, plan)))
            .ok_or_else(|| SandboxError::Plan("a call frame without its stdio byte".into()))?;
        let call = PreparedCall::from_wire(plan)?;
        let stdio = match mode {
            CallStdio::Piped => StdioMode::Piped,
            CallStdio::Duplex => StdioMode::Duplex,
            CallStdio::Null => StdioMode::Null,
        };
        let mut child = chock_sandbox::spawn(call.plan(), stdio)?;
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        {
            let mut running = self.lock();
            running.killer = Some(child.killer()?);
            running.stdin = child.take_stdin();
            if let Some(listener) = child.proxy_listener() {
                let relay = crate::egress::Relay::default();
                relay.serve(listener, writer.clone(), done.clone());
                running.relay = Some(relay);
            }
            if let Some(host_end) = child.host_channel() {
                let channel = crate::channel::Channel::default();
                channel.serve(host_end, writer.clone());
                running.channel = Some(channel);
            }
        }
        let _ = send(writer, &Frame::new(tag::STARTED, Vec::new()));
        let pumps = [
            child
                .take_stdout()
                .map(|f| pump(f, tag::STDOUT, tag::STDOUT_END, writer)),
            child
                .take_stderr()
                .map(|f| pump(f, tag::STDERR, tag::STDERR_END, writer)),
        ];
        let ended: Ended = child.wait().map_err(|e| GuestError::from(&e));
        for pump in pumps.into_iter().flatten() {
            let _ = pump.join();
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        *self.lock() = Running::default();
        let _ = send(writer, &Frame::json(tag::ENDED, &ended));
        Ok(())
    }

    /// Writes to the running call's stdin, or closes it (`None`).
    pub(crate) fn stdin(&self, bytes: Option<&[u8]>) {
        let mut running = self.lock();
        match bytes {
            Some(b) => {
                if let Some(stdin) = running.stdin.as_mut()
                    && stdin.write_all(b).is_err()
                {
                    running.stdin = None;
                }
            }
            None => running.stdin = None,
        }
    }

    /// Bytes from the host for egress connection `id`, or its end (`None`).
    pub(crate) fn net(&self, id: u32, bytes: Option<&[u8]>) {
        let relay = self.lock().relay.clone();
        match (relay, bytes) {
            (Some(r), Some(b)) => r.data(id, b),
            (Some(r), None) => r.end(id),
            (None, _) => {}
        }
    }

    /// The host's answer to request `id` on the running call's host channel.
    pub(crate) fn channel_answer(&self, id: u32, bytes: &[u8]) {
        let channel = self.lock().channel.clone();
        if let Some(c) = channel {
            c.answer(id, bytes);
        }
    }

    /// Kills every process of the running call.
    pub(crate) fn kill(&self) {
        if let Some(k) = self.lock().killer.as_ref() {
            k.kill();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Running> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Sends what `from` gives as `data` frames, then one `end` frame.
fn pump(mut from: File, data: u8, end: u8, writer: &Writer) -> std::thread::JoinHandle<()> {
    let writer = writer.clone();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match from.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if send(&writer, &Frame::new(data, buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = send(&writer, &Frame::new(end, Vec::new()));
    })
}
