//! The daemon's acts on a session's workspace and log: its diff, an apply or undo settled and
//! written through a pipeline (the session's own when it runs here), a fork, a verify.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

use chock_decide::{ApprovalBroker, Pipeline};
use chock_log::Log;
use chock_protocol::rpc::{Applied, ErrorKind, ReviewDiff, RpcError, Verified};

use super::{Daemon, internal, lock};
use crate::session::forward_questions;
use chock_runtime::review;

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

    pub(super) async fn apply(
        &self,
        session: &str,
        selection: chock_protocol::rpc::Selection,
        digest: String,
    ) -> Result<Applied, RpcError> {
        let (id, dir) = self.resolve(session)?;
        let plan_dir = dir.clone();
        let plan =
            tokio::task::spawn_blocking(move || review::plan_apply(&plan_dir, &selection, &digest))
                .await
                .map_err(internal)??;
        self.settle_and_write(&id, &dir, plan, "apply").await
    }

    pub(super) async fn undo(&self, apply_id: &str) -> Result<Applied, RpcError> {
        let root = self.opts.sessions_root.clone();
        let apply = apply_id.to_string();
        let (plan, dir) = tokio::task::spawn_blocking(move || {
            let plan = chock_workspace::plan_undo(&root, &apply)?;
            let dir = chock_workspace::session_dir_of_apply(&root, &apply)?;
            Ok::<_, chock_workspace::WorkspaceError>((plan, dir))
        })
        .await
        .map_err(internal)?
        .map_err(|e| review::workspace_error(&e))?;
        let id = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.settle_and_write(&id, &dir, plan, "undo").await
    }

    /// Settles and writes `plan` through the session's own pipeline when it runs here; else
    /// through one over its log and its project's table, whose questions go to the clients as a
    /// running session's do.
    pub(super) async fn settle_and_write(
        &self,
        id: &str,
        dir: &Path,
        plan: chock_workspace::ApplyPlan,
        verb: &str,
    ) -> Result<Applied, RpcError> {
        if let Some((pipeline, log)) = self.owned_session(id).and_then(|s| s.acts()) {
            return review::carry_out(plan, &pipeline, &log, verb).await;
        }
        let log = Log::open(dir).map_err(|e| {
            RpcError::new(
                ErrorKind::NotRunning,
                format!("cannot record in the log of session {id}: {e}"),
            )
        })?;
        let policy = chock_policy::Policy::load(plan.project())
            .map_err(|e| RpcError::new(ErrorKind::BadInput, e.to_string()))?;
        let broker = ApprovalBroker::new();
        let pipeline = Pipeline::new(log.clone(), Arc::new(RwLock::new(policy)), broker.clone());
        let attached = broker.attach("daemon");
        // The forwarder ends by itself once the broker is gone (its last notice sent).
        let _forwarder = forward_questions(
            Arc::clone(&self.hub),
            id.to_string(),
            dir.to_path_buf(),
            &pipeline,
        );
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
        let header = chock_log::SessionHeader {
            command: Some("fork".into()),
            ..Default::default()
        };
        let forked = tokio::task::spawn_blocking(move || chock_session::fork(&dir, turn, header))
            .await
            .map_err(internal)?
            .map_err(|e| match e {
                chock_session::SessionError::Fork(refusal) => {
                    RpcError::new(ErrorKind::BadInput, format!("cannot fork: {refusal}"))
                }
                other => internal(format!("cannot fork: {other}")),
            })?;
        Ok(chock_protocol::rpc::ForkMade {
            session: forked.id.to_string(),
            origin: forked.origin,
        })
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
