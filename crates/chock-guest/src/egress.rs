//! The call's egress in the guest: the proxy listener the sandbox made in the call's network
//! namespace, each connection to it relayed to the host as frames. The guest resolves no name
//! and opens no socket of its own: what the call names (a proxy request for `host:port`) is
//! read by the host's broker, which decides by the policy; a refusal arrives as a stream that
//! ended.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chock_guest::{net_frame, tag};

use crate::{Writer, send};

/// The call's relayed connections, by id.
#[derive(Default, Clone)]
pub(crate) struct Relay {
    conns: Arc<Mutex<HashMap<u32, TcpStream>>>,
    next: Arc<AtomicU32>,
}

impl Relay {
    /// Accepts on `listener` until `done`, relaying each connection.
    pub(crate) fn serve(&self, listener: TcpListener, writer: Writer, done: Arc<AtomicBool>) {
        let this = self.clone();
        std::thread::spawn(move || {
            if listener.set_nonblocking(true).is_err() {
                return;
            }
            while !done.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((conn, _)) => this.open(conn, &writer),
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
    }

    fn open(&self, conn: TcpStream, writer: &Writer) {
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let Ok(reader) = conn.try_clone() else { return };
        let _ = conn.set_nonblocking(false);
        self.lock().insert(id, conn);
        if send(writer, &net_frame(tag::NET_OPEN, id, &[])).is_err() {
            return;
        }
        let writer = writer.clone();
        std::thread::spawn(move || {
            let mut reader = reader;
            let mut buf = vec![0u8; 64 << 10];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if send(&writer, &net_frame(tag::NET_OUT, id, &buf[..n])).is_err() {
                            return;
                        }
                    }
                }
            }
            let _ = send(&writer, &net_frame(tag::NET_OUT_END, id, &[]));
        });
    }

    /// Bytes from the host for connection `id`.
    pub(crate) fn data(&self, id: u32, bytes: &[u8]) {
        let mut conns = self.lock();
        if let Some(c) = conns.get_mut(&id)
            && c.write_all(bytes).is_err()
        {
            conns.remove(&id);
        }
    }

    /// The host's side of `id` ended: so does the call's.
    pub(crate) fn end(&self, id: u32) {
        if let Some(c) = self.lock().remove(&id) {
            let _ = c.shutdown(Shutdown::Write);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, TcpStream>> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }
}
