//! Files a session writes whose durability no act waits on: a turn's record and the blobs it
//! names. Each is written and renamed into place at once (so any reader, a fork among them, finds
//! it), then `fsync`ed with its directory on a thread of its own, in the order written.
//!
//! A turn record used to be synced before its turn could end: about 1.2 ms of every tool call's
//! turn on this machine's disk, for a file the session's next act does not depend on. The log's
//! `turn.end` that names the record is itself a grouped line (`EventKind::durability`), made
//! durable by the next act's decision; so a crash loses, at worst, the last turn's record along
//! with its `turn.end`, and a fork from a turn whose record did not survive says so (the record
//! is missing, or does not have the digest the log names). [`LateSync::flush`] waits until every
//! file given so far is durable; a workspace's drop flushes.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::error::{Result, WorkspaceError};
use crate::meta::tmp_sibling;

enum Job {
    /// `fsync` the file, then its directory (its new name).
    Sync { file: File, path: PathBuf },
    /// Answer once every job before this one is done.
    Flush(Sender<()>),
}

/// The thread that syncs, started with the first file; see the module.
#[derive(Debug, Default)]
pub(crate) struct LateSync {
    inner: Mutex<Option<Worker>>,
    /// The first sync that failed, kept for [`LateSync::flush`] to report.
    failed: Arc<Mutex<Option<WorkspaceError>>>,
}

#[derive(Debug)]
struct Worker {
    jobs: Sender<Job>,
    thread: JoinHandle<()>,
}

impl LateSync {
    /// Writes `bytes` to `path` (through a sibling renamed into place: a reader sees the whole
    /// file or none) and queues its sync. Without a thread to sync on, it is synced here.
    pub(crate) fn write(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        let tmp = tmp_sibling(path, "tmp");
        let mut file = File::create(&tmp).map_err(|e| WorkspaceError::io("create", &tmp, e))?;
        file.write_all(bytes)
            .map_err(|e| WorkspaceError::io("write", &tmp, e))?;
        std::fs::rename(&tmp, path)
            .map_err(|e| WorkspaceError::io("rename into place", path, e))?;
        let job = Job::Sync {
            file,
            path: path.to_path_buf(),
        };
        if let Err(Job::Sync { file, path }) = self.send(job) {
            return sync_one(&file, &path);
        }
        Ok(())
    }

    /// Waits until every file written so far is durable; the first sync that failed, if any.
    pub(crate) fn flush(&self) -> Result<()> {
        let (done, wait) = channel();
        if self.send(Job::Flush(done)).is_ok() {
            // A worker that is gone has done all it will: what failed is recorded.
            let _ = wait.recv();
        }
        match self
            .failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Hands `job` to the worker (started now if there is none); the job back when no thread
    /// could take it.
    fn send(&self, job: Job) -> std::result::Result<(), Job> {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if inner.is_none() {
            if matches!(job, Job::Flush(_)) {
                return Err(job);
            }
            let (jobs, queue) = channel();
            let failed = Arc::clone(&self.failed);
            let spawned = std::thread::Builder::new()
                .name("chock-late-sync".into())
                .spawn(move || work(&queue, &failed));
            match spawned {
                Ok(thread) => *inner = Some(Worker { jobs, thread }),
                Err(_) => return Err(job),
            }
        }
        let Some(worker) = inner.as_ref() else {
            return Err(job);
        };
        worker.jobs.send(job).map_err(|e| e.0)
    }
}

impl Drop for LateSync {
    /// Every queued file is synced before the workspace is gone (errors are the flush's to tell;
    /// nobody is left to hear one here).
    fn drop(&mut self) {
        let worker = self
            .inner
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(Worker { jobs, thread }) = worker {
            drop(jobs);
            let _ = thread.join();
        }
    }
}

fn work(queue: &Receiver<Job>, failed: &Mutex<Option<WorkspaceError>>) {
    for job in queue {
        match job {
            Job::Sync { file, path } => {
                if let Err(e) = sync_one(&file, &path) {
                    failed
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .get_or_insert(e);
                }
            }
            Job::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}

fn sync_one(file: &File, path: &Path) -> Result<()> {
    file.sync_all()
        .map_err(|e| WorkspaceError::io("fsync", path, e))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| WorkspaceError::io("fsync", dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_file_is_readable_at_once_and_flush_waits_for_its_sync() {
        let dir = tempfile::tempdir().unwrap();
        let late = LateSync::default();
        for n in 0..20 {
            let path = dir.path().join(format!("{n}.json"));
            late.write(&path, format!("record {n}").as_bytes()).unwrap();
            assert_eq!(
                std::fs::read_to_string(&path).unwrap(),
                format!("record {n}")
            );
        }
        late.flush().unwrap();
        // No staging sibling is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 20, "{names:?}");
        assert!(names.iter().all(|n| n.ends_with(".json")), "{names:?}");
    }

    #[test]
    fn a_write_into_a_missing_directory_fails_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let late = LateSync::default();
        let path = dir.path().join("gone").join("1.json");
        let err = late.write(&path, b"x").unwrap_err().to_string();
        assert!(err.contains("gone"), "{err}");
        late.flush().unwrap();
    }
}
