//! The microVM guest's channel to the host, as both sides read it (docs/microvm.md).
//!
//! One virtio-serial port carries everything between the host's `GuestConfiner` (chock-vm) and
//! the guest's init (this crate's binary): the shares to mount, each call's serialised plan, the
//! call's streams, its end, and a kill. Each [`Frame`] is a tag byte, a big-endian `u32` length
//! and that many bytes; a port that ends mid-frame, or a frame over [`MAX_FRAME`], is an error.
//! The guest names nothing of the host here but the paths it was told to mount.

#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

pub mod confine;

use std::io::{self, Read, Write};
use std::path::PathBuf;

use chock_sandbox::{Layer, SandboxError};
use serde::{Deserialize, Serialize};

/// The name of the virtio-serial port the guest finds its channel by (`/sys/class/virtio-ports`).
pub const PORT_NAME: &str = "chock";

/// Where the initramfs keeps the kernel modules the init loads (virtio transport, console,
/// virtiofs, overlayfs), in the order they load.
pub const MODULE_DIR: &str = "/modules";

/// The largest frame either side accepts: a plan, or a chunk of a stream.
pub const MAX_FRAME: usize = 16 << 20;

/// Frame tags. Host to guest below 100, guest to host from 100.
pub mod tag {
    /// Host: the [`super::Setup`] (JSON), once, after [`HELLO`].
    pub const SETUP: u8 = 1;
    /// Host: a call: one byte of [`super::CallStdio`], then the plan (`PreparedCall::to_wire`).
    pub const CALL: u8 = 2;
    /// Host: bytes for the call's stdin.
    pub const STDIN: u8 = 3;
    /// Host: the call's stdin is closed.
    pub const STDIN_END: u8 = 4;
    /// Host: kill the running call (every process of it).
    pub const KILL: u8 = 5;
    /// Host: bytes for one of the call's egress connections: a `u32` id, then the bytes.
    pub const NET_IN: u8 = 6;
    /// Host: the host's side of an egress connection ended (a `u32` id): a refusal is this.
    pub const NET_IN_END: u8 = 7;
    /// Host: the answer to a request on the call's host channel: a `u32` id, then the answer's
    /// datagram as the host's channel handler wrote it (empty: the host closed without one, a
    /// refusal).
    pub const CHANNEL_ANSWER: u8 = 8;
    /// Host: unmount every share (no call runs), for a snapshot of the machine; the guest
    /// answers [`SUSPENDED`] and then waits for a new [`SETUP`] (the same shares in the guest
    /// that was snapshotted, a fork's own in the guest restored from it).
    pub const SUSPEND: u8 = 9;
    /// Guest: booted; a [`super::Hello`] (JSON).
    pub const HELLO: u8 = 101;
    /// Guest: the shares are mounted; ready for calls.
    pub const READY: u8 = 102;
    /// Guest: the setup failed (words); the guest powers off.
    pub const SETUP_FAILED: u8 = 103;
    /// Guest: the call's command is executing.
    pub const STARTED: u8 = 104;
    /// Guest: the call did not start: a [`super::GuestError`] (JSON).
    pub const START_FAILED: u8 = 105;
    /// Guest: bytes of the call's stdout.
    pub const STDOUT: u8 = 106;
    /// Guest: bytes of the call's stderr.
    pub const STDERR: u8 = 107;
    /// Guest: the call's stdout ended.
    pub const STDOUT_END: u8 = 108;
    /// Guest: the call's stderr ended.
    pub const STDERR_END: u8 = 109;
    /// Guest: the call ended: a [`super::Ended`] (JSON), after both streams' ends.
    pub const ENDED: u8 = 110;
    /// Guest: the call opened an egress connection to its proxy port (a `u32` id); the host
    /// connects it to its broker's proxy, which decides by the policy what it names.
    pub const NET_OPEN: u8 = 111;
    /// Guest: bytes of an egress connection (a `u32` id, then the bytes).
    pub const NET_OUT: u8 = 112;
    /// Guest: the call's side of an egress connection ended (a `u32` id).
    pub const NET_OUT_END: u8 = 113;
    /// Guest: a request a process of the call sent on its host channel (descriptor 3): a `u32`
    /// id, then the request's datagram as it was sent. The host hands it to the session's
    /// channel handler and answers with [`CHANNEL_ANSWER`] of the same id.
    pub const CHANNEL_ASK: u8 = 114;
    /// Guest: the shares are unmounted; nothing of the host is open in the guest.
    pub const SUSPENDED: u8 = 115;
    /// Guest: a share could not be unmounted (words); the shares stay as they were.
    pub const SUSPEND_FAILED: u8 = 116;
}

/// One frame on the channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// What it is ([`tag`]).
    pub tag: u8,
    /// Its bytes.
    pub body: Vec<u8>,
}

impl Frame {
    /// A frame of `tag` with `body`.
    pub fn new(tag: u8, body: impl Into<Vec<u8>>) -> Frame {
        Frame {
            tag,
            body: body.into(),
        }
    }

    /// A frame whose body is `value` as JSON.
    pub fn json(tag: u8, value: &impl Serialize) -> Frame {
        Frame::new(tag, serde_json::to_vec(value).unwrap_or_default())
    }

    /// The body read as JSON.
    pub fn parse<T: for<'de> Deserialize<'de>>(&self) -> io::Result<T> {
        serde_json::from_slice(&self.body).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("frame {}: {e}", self.tag),
            )
        })
    }

    /// Writes the frame whole (one `write_all`, so frames from several threads sharing a locked
    /// writer never interleave).
    pub fn write_to(&self, w: &mut impl Write) -> io::Result<()> {
        if self.body.len() > MAX_FRAME {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "frame over the channel's limit",
            ));
        }
        let mut buf = Vec::with_capacity(5 + self.body.len());
        buf.push(self.tag);
        buf.extend_from_slice(&u32::try_from(self.body.len()).unwrap_or(0).to_be_bytes());
        buf.extend_from_slice(&self.body);
        w.write_all(&buf)?;
        w.flush()
    }

    /// Reads one frame; `None` at a clean end of the channel (between frames).
    pub fn read_from(r: &mut impl Read) -> io::Result<Option<Frame>> {
        let mut head = [0u8; 5];
        let mut got = 0;
        while got < head.len() {
            match r.read(&mut head[got..]) {
                Ok(0) if got == 0 => return Ok(None),
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if len > MAX_FRAME {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a frame of {len} bytes is over the channel's limit"),
            ));
        }
        let mut body = vec![0u8; len];
        r.read_exact(&mut body)?;
        Ok(Some(Frame { tag: head[0], body }))
    }
}

/// A frame for egress connection (or host channel request) `id`: the id, then `bytes`.
pub fn net_frame(tag: u8, id: u32, bytes: &[u8]) -> Frame {
    let mut body = id.to_be_bytes().to_vec();
    body.extend_from_slice(bytes);
    Frame::new(tag, body)
}

/// The id and bytes of an egress or host channel frame.
pub fn net_parts(body: &[u8]) -> Option<(u32, &[u8])> {
    let (id, rest) = body.split_first_chunk::<4>()?;
    Some((u32::from_be_bytes(*id), rest))
}

/// What the guest says once it has booted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The guest kernel's release (`uname -r`).
    pub kernel: String,
    /// The guest's network interfaces, as its init sees them before any call (`lo` alone: the
    /// machine has no network device).
    #[serde(default)]
    pub interfaces: Vec<String>,
    /// The virtio device ids on the guest's bus (1 would be a network card).
    #[serde(default)]
    pub virtio_devices: Vec<u32>,
}

/// How a share crosses into the guest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShareFs {
    /// virtiofs (a vhost-user server per share): what a guest that is never snapshotted uses.
    #[default]
    Virtiofs,
    /// virtio-9p served by the monitor itself: a guest whose shares are unmounted can be
    /// migrated to a file (QEMU 7.2 cannot migrate a vhost-user-fs device at all).
    NineP,
}

/// A host directory shared into the guest by virtiofs or virtio-9p, mounted at the same path
/// there, so a plan's paths mean the same inside the guest.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Share {
    /// The virtiofs tag.
    pub tag: String,
    /// Where it is mounted in the guest (the host path it shows).
    pub path: PathBuf,
    /// Mounted read-only (the host side is read-only too: its server sees a read-only bind).
    pub read_only: bool,
    /// The device it is on.
    #[serde(default)]
    pub fs: ShareFs,
}

/// What the host tells a booted guest to mount before any call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setup {
    /// The shares, in order (a parent before what lies inside it).
    pub shares: Vec<Share>,
    /// The host's wall clock (seconds and nanoseconds since the epoch), which the guest sets
    /// its own to: a guest restored from a snapshot would otherwise run on the snapshot's time.
    #[serde(default)]
    pub now: Option<(i64, u32)>,
}

/// How a call's standard streams cross the channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum CallStdio {
    /// stdin is /dev/null; stdout and stderr come back.
    Piped = 1,
    /// stdin is sent too.
    Duplex = 2,
    /// Nothing crosses.
    Null = 3,
}

impl CallStdio {
    /// The mode with this wire byte.
    pub fn from_byte(b: u8) -> Option<CallStdio> {
        [CallStdio::Piped, CallStdio::Duplex, CallStdio::Null]
            .into_iter()
            .find(|m| *m as u8 == b)
    }
}

/// A [`SandboxError`] as it crosses the channel (the guest's driver fails exactly as the host's
/// would, and the host hands the same error to its caller).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GuestError {
    /// [`SandboxError::Layer`].
    Layer {
        /// The layer.
        layer: Layer,
        /// Why.
        reason: String,
        /// What to do.
        hint: String,
    },
    /// [`SandboxError::Plan`].
    Plan {
        /// Why.
        reason: String,
    },
    /// [`SandboxError::Exec`].
    Exec {
        /// `argv[0]`.
        program: String,
        /// What execve said.
        reason: String,
        /// ENOENT.
        not_found: bool,
    },
    /// [`SandboxError::Host`], the guest's init being the host of its sandbox.
    Host {
        /// What the guest's init was doing.
        what: String,
        /// What its kernel said.
        reason: String,
    },
}

impl From<&SandboxError> for GuestError {
    fn from(e: &SandboxError) -> GuestError {
        match e {
            SandboxError::Layer {
                layer,
                reason,
                hint,
            } => GuestError::Layer {
                layer: *layer,
                reason: reason.clone(),
                hint: hint.clone(),
            },
            SandboxError::Plan(reason) => GuestError::Plan {
                reason: reason.clone(),
            },
            SandboxError::Exec {
                program,
                reason,
                not_found,
            } => GuestError::Exec {
                program: program.clone(),
                reason: reason.clone(),
                not_found: *not_found,
            },
            SandboxError::Host { what, source } => GuestError::Host {
                what: what.clone(),
                reason: source.to_string(),
            },
        }
    }
}

impl From<GuestError> for SandboxError {
    fn from(e: GuestError) -> SandboxError {
        match e {
            GuestError::Layer {
                layer,
                reason,
                hint,
            } => SandboxError::Layer {
                layer,
                reason: format!("in the microVM guest: {reason}"),
                hint,
            },
            GuestError::Plan { reason } => SandboxError::Plan(reason),
            GuestError::Exec {
                program,
                reason,
                not_found,
            } => SandboxError::Exec {
                program,
                reason,
                not_found,
            },
            GuestError::Host { what, reason } => SandboxError::Host {
                what: format!("in the microVM guest: {what}"),
                source: io::Error::other(reason),
            },
        }
    }
}

/// How a call in the guest ended: its outcome, or the error its wait gave.
pub type Ended = Result<chock_sandbox::Outcome, GuestError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_a_cut_frame_is_an_error() {
        let mut buf = Vec::new();
        Frame::new(tag::STDOUT, b"hello".to_vec())
            .write_to(&mut buf)
            .unwrap();
        Frame::json(
            tag::HELLO,
            &Hello {
                kernel: "6.1".into(),
                interfaces: vec!["lo".into()],
                virtio_devices: vec![3],
            },
        )
        .write_to(&mut buf)
        .unwrap();
        let mut r = &buf[..];
        let a = Frame::read_from(&mut r).unwrap().unwrap();
        assert_eq!(a, Frame::new(tag::STDOUT, b"hello".to_vec()));
        let b: Hello = Frame::read_from(&mut r).unwrap().unwrap().parse().unwrap();
        assert_eq!(b.kernel, "6.1");
        assert!(Frame::read_from(&mut r).unwrap().is_none());
        let mut cut = &buf[..7];
        assert!(Frame::read_from(&mut cut).is_err());
    }

    #[test]
    fn an_oversized_length_is_refused_before_reading_it() {
        let mut head = vec![tag::STDOUT];
        head.extend_from_slice(&u32::MAX.to_be_bytes());
        let err = Frame::read_from(&mut &head[..]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
