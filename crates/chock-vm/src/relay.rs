//! The host's end of a guest call's egress (step 3 of docs/microvm.md): each connection the
//! call opens to its proxy port in the guest arrives as frames and is connected here to the
//! listener the session's broker serves ([`chock_sandbox::CallHandle::take_egress`]). The broker
//! reads what the call names (`CONNECT host:port`, or a URL), decides by the policy, resolves,
//! checks and connects; a refusal arrives in the guest as a stream that ended.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

use chock_guest::{net_frame, tag};

use crate::machine::send;

/// The connections of one call, by the guest's id.
#[derive(Debug)]
pub(crate) struct HostRelay {
    broker: SocketAddr,
    writer: Arc<Mutex<UnixStream>>,
    conns: HashMap<u32, TcpStream>,
}

impl HostRelay {
    /// A relay to the broker's listener at `broker`, answering on `writer`.
    pub(crate) fn new(broker: SocketAddr, writer: Arc<Mutex<UnixStream>>) -> HostRelay {
        HostRelay {
            broker,
            writer,
            conns: HashMap::new(),
        }
    }

    /// Handles one egress frame from the guest.
    pub(crate) fn frame(&mut self, tag_: u8, body: &[u8]) {
        let Some((id, bytes)) = chock_guest::net_parts(body) else {
            return;
        };
        match tag_ {
            tag::NET_OPEN => self.open(id),
            tag::NET_OUT => {
                if let Some(c) = self.conns.get_mut(&id)
                    && c.write_all(bytes).is_err()
                {
                    self.conns.remove(&id);
                    let _ = send(&self.writer, &net_frame(tag::NET_IN_END, id, &[]));
                }
            }
            tag::NET_OUT_END => {
                if let Some(c) = self.conns.remove(&id) {
                    let _ = c.shutdown(Shutdown::Write);
                }
            }
            _ => {}
        }
    }

    fn open(&mut self, id: u32) {
        let refused = || {
            let _ = send(&self.writer, &net_frame(tag::NET_IN_END, id, &[]));
        };
        let Ok(conn) = TcpStream::connect(self.broker) else {
            return refused();
        };
        let Ok(mut reader) = conn.try_clone() else {
            return refused();
        };
        self.conns.insert(id, conn);
        let writer = self.writer.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 << 10];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if send(&writer, &net_frame(tag::NET_IN, id, &buf[..n])).is_err() {
                            return;
                        }
                    }
                }
            }
            let _ = send(&writer, &net_frame(tag::NET_IN_END, id, &[]));
        });
    }
}
