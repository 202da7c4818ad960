//! The clients connected now, each with its bounded queue of frames, and the sending of one frame
//! to all of them.
//!
//! A frame is queued with `try_send`, never awaited: a client whose queue is full is too slow, and
//! is dropped (told with `client.dropped`, then disconnected) rather than allowed to grow the
//! daemon's memory or hold up the session that produced the frame.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use chock_protocol::rpc::{DropReason, Notice, Notification};
use tokio::sync::{mpsc, watch};

/// One frame, serialised once and shared by every queue it is put on.
pub(crate) type Frame = Arc<str>;

/// How many frames a client's queue holds by default.
pub const DEFAULT_QUEUE: usize = 1024;

/// The frame of `notice`.
pub(crate) fn frame(notice: &Notice) -> Frame {
    Arc::from(serde_json::to_string(&Notification::new(notice)).expect("notices serialise"))
}

/// One connected client, as the senders see it.
#[derive(Debug, Clone)]
pub(crate) struct Conn {
    pub(crate) id: u64,
    tx: mpsc::Sender<Frame>,
    kill: Arc<watch::Sender<Option<DropReason>>>,
}

impl Conn {
    /// A client's queue of `queue` frames: the handle, the receiving end its writer drains, and
    /// the signal that it is to be dropped.
    pub(crate) fn new(
        id: u64,
        queue: usize,
    ) -> (
        Conn,
        mpsc::Receiver<Frame>,
        watch::Receiver<Option<DropReason>>,
    ) {
        let (tx, rx) = mpsc::channel(queue);
        let (kill, killed) = watch::channel(None);
        (
            Conn {
                id,
                tx,
                kill: Arc::new(kill),
            },
            rx,
            killed,
        )
    }

    /// Queues `frame`; `false` when the client is gone or was just dropped for being slow.
    pub(crate) fn push(&self, frame: &Frame) -> bool {
        match self.tx.try_send(Arc::clone(frame)) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.drop_client(DropReason::TooSlow);
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }

    /// Queues `frame` once the queue has room for it and `headroom` more (a catch-up from the log,
    /// which must leave room for the live frames that come meanwhile). `false`: the client is gone.
    pub(crate) async fn push_waiting(&self, frame: Frame, headroom: usize) -> bool {
        let room = (headroom + 1).min(self.tx.max_capacity());
        let Ok(mut permits) = self.tx.reserve_many(room).await else {
            return false;
        };
        match permits.next() {
            Some(permit) => {
                permit.send(frame);
                true
            }
            None => false,
        }
    }

    /// Tells the client's writer to send `client.dropped` and close.
    pub(crate) fn drop_client(&self, reason: DropReason) {
        self.kill.send_if_modified(|r| {
            if r.is_none() {
                *r = Some(reason);
                true
            } else {
                false
            }
        });
    }

    /// Whether it was dropped or went away.
    pub(crate) fn is_gone(&self) -> bool {
        self.tx.is_closed() || self.kill.borrow().is_some()
    }

    /// The queue's bound.
    pub(crate) fn queue(&self) -> usize {
        self.tx.max_capacity()
    }
}

/// Every connected client.
#[derive(Debug, Default)]
pub(crate) struct Hub {
    next: AtomicU64,
    conns: Mutex<HashMap<u64, Conn>>,
}

impl Hub {
    /// A new client with a queue of `queue` frames.
    pub(crate) fn join(
        &self,
        queue: usize,
    ) -> (
        Conn,
        mpsc::Receiver<Frame>,
        watch::Receiver<Option<DropReason>>,
    ) {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let (conn, rx, killed) = Conn::new(id, queue);
        self.lock().insert(id, conn.clone());
        (conn, rx, killed)
    }

    /// The client left.
    pub(crate) fn leave(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Sends `notice` to every client.
    pub(crate) fn broadcast(&self, notice: &Notice) {
        let frame = frame(notice);
        let conns: Vec<Conn> = self.lock().values().cloned().collect();
        for conn in conns {
            conn.push(&frame);
        }
    }

    /// Drops every client (the daemon stops).
    pub(crate) fn drop_all(&self, reason: DropReason) {
        for conn in self.lock().values() {
            conn.drop_client(reason);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Conn>> {
        self.conns.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
