//! The daemon's acts on a session's workspace and log: its diff, an apply or undo settled and
//! written through a pipeline (the session's own when it runs here), a fork, a verify.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

use chock_decide::{ApprovalBroker, Pipeline};
use chock_log::{Event, LineTap, Log};
use chock_protocol::rpc::{Applied, ErrorKind, ReviewDiff, RpcError, Verified};
use chock_protocol::view::{OpenQuestion, SessionView};
use chock_runtime::{Op, review};

use super::{Daemon, internal, lock};
use crate::session::{Asks, forward};

impl Daemon {
    pub(super) async fn diff(
        &self,
        session: &str,
        selection: chock_protocol::rpc::Selection,
    ) -> Result<ReviewDiff, RpcError> {
        let (id, dir) = self.resolve(session)?;
        tokio::task::spawn_blocking(move || review::diff(&id, &dir, &selection))
            .await
            .map_err(internal)?
    }

    /// `review.apply`: through the session's handle when it runs here (its own pipeline and
    /// log), else settled through a pipeline over its log.
    pub(super) async fn apply(
        &self,
        session: &str,
        selection: chock_protocol::rpc::Selection,
        digest: String,
    ) -> Result<Applied, RpcError> {
        let (id, dir) = self.resolve(session)?;
        if let Some(owned) = self.owned_session(&id) {
            return owned.review(Op::Apply { selection, digest }).await;
        }
        let plan_dir = dir.clone();
        let plan =
            tokio::task::spawn_blocking(move || review::plan_apply(&plan_dir, &selection, &digest))
                .await
                .map_err(internal)??;
        self.settle_and_write(&id, &dir, plan, "apply").await
    }

    /// `review.undo`: through the handle of the session that made the apply when it runs here,
    /// else as an apply of a session that does not run here is.
    pub(super) async fn undo(&self, apply_id: &str) -> Result<Applied, RpcError> {
        let root = self.opts.sessions_root.clone();
        let apply = apply_id.to_string();
        let dir = tokio::task::spawn_blocking(move || {
            chock_workspace::session_dir_of_apply(&root, &apply)
        })
        .await
        .map_err(internal)?
        .map_err(|e| review::workspace_error(&e))?;
        let id = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Some(owned) = self.owned_session(&id) {
            return owned
                .review(Op::Undo {
                    apply_id: apply_id.to_string(),
                })
                .await;
        }
        let root = self.opts.sessions_root.clone();
        let apply = apply_id.to_string();
        let plan = tokio::task::spawn_blocking(move || chock_workspace::plan_undo(&root, &apply))
            .await
            .map_err(internal)?
            .map_err(|e| review::workspace_error(&e))?;
        self.settle_and_write(&id, &dir, plan, "undo").await
    }

    /// Settles and writes `plan` for a session that does not run here: through a pipeline over
    /// its log and its project's table, whose questions go to the clients as a running session's
    /// do (the asks followed through the log's tap, not read back from the file).
    async fn settle_and_write(
        &self,
        id: &str,
        dir: &Path,
        plan: chock_workspace::ApplyPlan,
        verb: &str,
    ) -> Result<Applied, RpcError> {
        let log = Log::open(dir).map_err(|e| {
            RpcError::new(
                ErrorKind::NotRunning,
                format!("cannot record in the log of session {id}: {e}"),
            )
        })?;
        let asks = Arc::new(ReviewAsks::default());
        log.tap(Arc::clone(&asks) as Arc<dyn LineTap>)
            .map_err(|e| RpcError::new(ErrorKind::Internal, e.to_string()))?;
        let policy = chock_policy::Policy::load(plan.project())
            .map_err(|e| RpcError::new(ErrorKind::BadInput, e.to_string()))?;
        let broker = ApprovalBroker::new();
        let pipeline = Pipeline::new(log.clone(), Arc::new(RwLock::new(policy)), broker.clone());
        let attached = broker.attach("daemon");
        // The forwarder ends by itself once the broker is gone (its last notice sent).
        tokio::spawn(forward(
            asks,
            broker.subscribe(),
            Arc::clone(&self.hub),
            id.to_string(),
        ));
        // Taken out again however this ends: returned, or dropped with its client gone.
        let _review = Review::register(&self.reviews, id, broker);
        let outcome = review::carry_out(plan, &pipeline, &log, verb).await;
        drop(attached);
        outcome
    }

    /// `sessions.fork`: the fork is made beside its parent and left closed.
    pub(super) async fn fork(
        &self,
        session: &str,
        turn: u32,
    ) -> Result<chock_protocol::rpc::ForkMade, RpcError> {
        let (_, dir) = self.resolve(session)?;
        review::fork(dir, turn).await
    }

    pub(super) async fn verify(&self, session: &str) -> Result<Verified, RpcError> {
        let (id, dir) = self.resolve(session)?;
        tokio::task::spawn_blocking(move || review::verify(&id, &dir))
            .await
            .map_err(internal)?
    }
}

/// A review of a session that does not run here, registered for its answers while it waits; the
/// registration goes with it, whether it returns or its future is dropped (its client left).
struct Review<'a> {
    reviews: &'a Mutex<HashMap<String, ApprovalBroker>>,
    id: String,
}

impl<'a> Review<'a> {
    fn register(
        reviews: &'a Mutex<HashMap<String, ApprovalBroker>>,
        id: &str,
        broker: ApprovalBroker,
    ) -> Review<'a> {
        lock(reviews).insert(id.to_string(), broker);
        Review {
            reviews,
            id: id.to_string(),
        }
    }
}

impl Drop for Review<'_> {
    fn drop(&mut self) {
        lock(self.reviews).remove(&self.id);
    }
}

/// The asks a review of a session that does not run here writes, folded as its log writes them
/// (the log's tap): where its question forwarder finds them.
#[derive(Debug, Default)]
struct ReviewAsks(Mutex<SessionView>);

impl LineTap for ReviewAsks {
    fn line(&self, _seq: u64, line: &str) {
        if let Ok(event) = serde_json::from_str::<Event>(line) {
            lock(&self.0).apply(event.at(), event.payload().ok().as_ref());
        }
    }
}

impl Asks for Arc<ReviewAsks> {
    fn logged(&self, id: &str) -> Option<OpenQuestion> {
        lock(&self.0)
            .questions
            .iter()
            .find(|q| q.question == id)
            .cloned()
    }

    fn mark(&self, _id: &str, _open: bool) {}
}
