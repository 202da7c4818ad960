//! Background commands kept by the session's keeper (`chock_sandbox::keeper`, docs/handover.md):
//! the owner hands each one over once it started, and records its output as the keeper sends it
//! — in `background/<handle>.stdout` and `.stderr` of the session's directory, whose lengths
//! are where the recording stands — and its end. A new owner follows the same command from those
//! lengths, so no byte is recorded twice or lost across a handover.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use chock_sandbox::keeper::{self, Follow, Frame, KeeperLink};
use chock_sandbox::{BoxFuture, ExitStatus, KeptCall};
use chock_session::{Keep, KeptEnd, OutputSink, Stream};

/// The session's keeper, as its owner reaches it: started at the first background command, or
/// found running when the session was taken over.
pub(crate) struct Keeper {
    /// The session's directory (the keeper's socket, the output records).
    dir: PathBuf,
    link: Mutex<Option<Arc<KeeperLink>>>,
    /// Set when this owner lets the session go: its followers stop, recording nothing more.
    released: std::sync::atomic::AtomicBool,
    /// Copies of each following connection, to stop them at the release.
    follows: Mutex<Vec<Follow>>,
    /// A keeper that could not be started was noted in the log (once a session).
    noted_unavailable: std::sync::atomic::AtomicBool,
}

impl Keeper {
    pub(crate) fn new(dir: &Path) -> Keeper {
        Keeper {
            dir: dir.to_path_buf(),
            link: Mutex::new(None),
            released: std::sync::atomic::AtomicBool::new(false),
            follows: Mutex::new(Vec::new()),
            noted_unavailable: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The keeper, started now if there is none: `Ok(None)` when the keeper program is not
    /// installed beside this one (the command then lives in this process, as before); an error
    /// says why an installed keeper could not be started (or confine itself), for the caller to
    /// record before the command runs in this process instead.
    pub(crate) fn link(&self) -> Result<Option<Arc<KeeperLink>>, String> {
        let mut link = self
            .link
            .lock()
            .map_err(|_| "the keeper's lock was poisoned".to_string())?;
        if let Some(l) = link.as_ref() {
            return Ok(Some(Arc::clone(l)));
        }
        let Some(program) = std::env::current_exe()
            .ok()
            .map(|exe| exe.with_file_name(keeper::BINARY))
            .filter(|p| p.is_file())
        else {
            return Ok(None);
        };
        let started = Arc::new(keeper::start(&program, &self.dir).map_err(|e| e.to_string())?);
        *link = Some(Arc::clone(&started));
        Ok(Some(started))
    }

    /// Whether this is the first time this session notes its keeper unavailable.
    pub(crate) fn first_unavailable(&self) -> bool {
        !self
            .noted_unavailable
            .swap(true, std::sync::atomic::Ordering::SeqCst)
    }

    /// A new owner's hold on the keeper the old owner left, and the handles it keeps (none
    /// when no keeper runs).
    pub(crate) fn take_up(&self) -> Vec<String> {
        match keeper::connect(&self.dir) {
            Ok(Some((link, handles))) => {
                if let Ok(mut l) = self.link.lock() {
                    *l = Some(Arc::new(link));
                }
                handles
            }
            _ => Vec::new(),
        }
    }

    /// The session ends: the keeper ends too.
    pub(crate) fn finish(&self) {
        let link = self.link.lock().ok().and_then(|mut l| l.take());
        if let Some(link) = link {
            link.finish();
        }
    }

    /// This owner lets the session go: its followers stop where they are (what they recorded
    /// stays; the keeper holds the rest for the next owner) and record no end.
    pub(crate) fn release(&self) {
        self.released
            .store(true, std::sync::atomic::Ordering::SeqCst);
        if let Ok(follows) = self.follows.lock() {
            for f in follows.iter() {
                f.stop();
            }
        }
    }

    pub(crate) fn released(&self) -> bool {
        self.released.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn watch(&self, follow: &Follow) {
        if let (Ok(copy), Ok(mut follows)) = (follow.try_clone(), self.follows.lock()) {
            if self.released() {
                copy.stop();
            }
            follows.push(copy);
        }
    }

    /// Follows the kept call `handle` on this thread (blocking) from where its record stands,
    /// recording its output into the session's directory and sending it to `live`, until its
    /// end: the end, the record, and the connection (to say the end is recorded). `link` is the
    /// keeper; `started`, when this owner hands the call over now; otherwise `on_followed` is
    /// given what the keeper gives of the call (its pidfd and doors) before any output.
    pub(crate) fn follow_blocking(
        &self,
        link: &KeeperLink,
        handle: &str,
        started: Option<KeptCall>,
        live: &dyn OutputSink,
        on_followed: &mut dyn FnMut(keeper::Followed),
    ) -> std::io::Result<(ExitStatus, Record, Follow)> {
        let mut record = Record::open(&self.dir, handle)?;
        let follow = match started {
            Some(call) => keeper::keep(link, handle, call)?,
            None => {
                let (follow, followed) = keeper::follow(link, handle, record.lens)?;
                on_followed(followed);
                follow
            }
        };
        self.watch(&follow);
        loop {
            if self.released() {
                return Err(std::io::Error::other("the session was let go"));
            }
            match follow.next()? {
                Some(Frame::Out {
                    stream,
                    offset,
                    bytes,
                }) => {
                    let new = record.write(stream, offset, &bytes)?;
                    if !new.is_empty() {
                        let s = if stream == 0 {
                            Stream::Stdout
                        } else {
                            Stream::Stderr
                        };
                        live.write(s, new);
                    }
                    follow.ack(stream, record.lens[usize::from(stream.min(1))])?;
                }
                Some(Frame::End { status, timed_out }) => {
                    return Ok((exit_status(status, timed_out), record, follow));
                }
                None => {
                    return Err(std::io::Error::other(
                        "the session's keeper ended before the command did",
                    ));
                }
            }
        }
    }
}

/// The command's status from the wait status its init wrote (`None`: killed before it could).
fn exit_status(status: Option<i32>, timed_out: bool) -> ExitStatus {
    match status {
        _ if timed_out => ExitStatus::TimedOut,
        Some(ws) if ws & 0x7f == 0 => ExitStatus::Exited((ws >> 8) & 0xff),
        Some(ws) => ExitStatus::Signaled(ws & 0x7f),
        None => ExitStatus::Signaled(9),
    }
}

/// A kept command's output as recorded in the session's directory: the file of each stream,
/// appended to only, and its length, which is the offset the recording has reached.
pub(crate) struct Record {
    files: [File; 2],
    pub(crate) lens: [u64; 2],
}

/// Where the output of background command `handle` is recorded.
pub(crate) fn record_paths(dir: &Path, handle: &str) -> [PathBuf; 2] {
    let bg = dir.join("background");
    [
        bg.join(format!("{handle}.stdout")),
        bg.join(format!("{handle}.stderr")),
    ]
}

impl Record {
    fn open(dir: &Path, handle: &str) -> std::io::Result<Record> {
        let paths = record_paths(dir, handle);
        if let Some(parent) = paths[0].parent() {
            std::fs::create_dir_all(parent)?;
        }
        let open = |p: &Path| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .read(true)
                .open(p)
        };
        let files = [open(&paths[0])?, open(&paths[1])?];
        let lens = [files[0].metadata()?.len(), files[1].metadata()?.len()];
        Ok(Record { files, lens })
    }

    /// Records `bytes` of `stream` that start at `offset`: only the part past what is recorded
    /// (a byte is never written twice); a gap before them is an error (a byte would be lost).
    /// Returns the part written.
    fn write<'a>(&mut self, stream: u8, offset: u64, bytes: &'a [u8]) -> std::io::Result<&'a [u8]> {
        let s = usize::from(stream.min(1));
        let have = self.lens[s];
        if offset > have {
            return Err(std::io::Error::other(format!(
                "the keeper sent bytes from {offset}, but only {have} are recorded"
            )));
        }
        let skip = usize::try_from(have - offset)
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        let new = &bytes[skip..];
        self.files[s].write_all(new)?;
        self.lens[s] += new.len() as u64;
        Ok(new)
    }

    /// The output recorded, up to `limit` bytes a stream (and whether that cut it).
    pub(crate) fn read_back(&mut self, limit: usize) -> (Vec<u8>, Vec<u8>, bool) {
        let read = |f: &mut File| {
            let mut kept = Vec::new();
            let _ = f.rewind();
            let _ = f.take(limit as u64).read_to_end(&mut kept);
            kept
        };
        let [out, err] = &mut self.files;
        let (o, e) = (read(out), read(err));
        let cut = self.lens.iter().any(|l| *l > limit as u64);
        (o, e, cut)
    }
}

/// Hands a background command to the keeper and follows it ([`chock_session::Keep`]).
pub(crate) struct Handing {
    pub(crate) keeper: Arc<Keeper>,
    pub(crate) link: Arc<KeeperLink>,
    pub(crate) handle: String,
    pub(crate) live: Arc<dyn OutputSink>,
    pub(crate) limit: usize,
    /// The following connection once the end arrived: told when the end is in the log.
    pub(crate) ended: Arc<Mutex<Option<Follow>>>,
    /// Held while the output is recorded: the log's lock says who owns the session, so no
    /// next owner records the same command while this process still does.
    pub(crate) log: chock_log::Log,
}

impl Keep for Handing {
    fn follow(
        &self,
        _call_id: &str,
        kept: KeptCall,
    ) -> BoxFuture<'static, std::io::Result<KeptEnd>> {
        let keeper = Arc::clone(&self.keeper);
        let link = Arc::clone(&self.link);
        let handle = self.handle.clone();
        let live = Arc::clone(&self.live);
        let limit = self.limit;
        let ended = Arc::clone(&self.ended);
        let held = self.log.clone();
        let task = tokio::task::spawn_blocking(move || {
            let _held = held;
            let (status, mut record, follow) =
                keeper.follow_blocking(&link, &handle, Some(kept), &*live, &mut |_| {})?;
            if let Ok(mut e) = ended.lock() {
                *e = Some(follow);
            }
            let (stdout, stderr, truncated) = record.read_back(limit);
            Ok(KeptEnd {
                status,
                stdout,
                stderr,
                truncated,
            })
        });
        Box::pin(async move { task.await.map_err(std::io::Error::other)? })
    }
}
