//! Subagents: a child agent session in a process of its own (`spawn_agent`), and taking its
//! changes into this session's workspace (`take_subagent`).
//!
//! A child is a separate `chock run` process running the session runtime with a log of its own,
//! the same provider configuration and a task from the parent. Its project is a snapshot of the
//! parent's workspace as it stands at the spawn (the merged view, `.git` and cache directories
//! left out, the parent's `chock.toml` copied from the file the parent's policy was read from), so
//! its own overlay workspace over that snapshot holds exactly the child's changes. Its policy is
//! that file plus the parent's ratchet at the spawn, applied before the child's first call (the
//! child can only narrow it further); its budget is the slice the parent reserved. The spawn is
//! recorded (`session.spawn`, durable) before the child's process exists; once it ends, however it
//! ends, the parent records `agent.complete` with the child's head hash, how it ended, what it
//! spent and the digest of its changes. See docs/subagents.md.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU32;

use chock_protocol::log::BudgetAmount;
use serde::{Deserialize, Serialize};

use crate::budget::Budget;

pub(crate) mod adopt;
pub(crate) mod background;
mod changes;
mod child;
mod spawn;

pub use changes::{Change, Changes, TakeSubagent, changes_of};
pub use spawn::{SpawnAgent, SpawnAgents, complete_orphans};

/// What the parent hands a child `chock run` (`--child-spec FILE`, a file in the parent's session
/// directory the parent wrote before starting it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildSpec {
    /// The id the child's session is created under (the parent's `session.spawn` names it).
    pub id: String,
    /// The parent session's id.
    pub parent: String,
    /// The hash of the parent's `session.spawn` line.
    pub parent_head: String,
    /// Generations below the top agent (1: a child of the top).
    pub depth: u32,
    /// The child's task.
    pub task: String,
    /// Its slice of the parent's budget (no field: no budget).
    pub budget: BudgetAmount,
    /// The parent's ratchet at the spawn: (`pattern`, `decision`), applied in order.
    pub ratchet: Vec<(String, String)>,
    /// The snapshot of the parent's workspace the child works on as its project.
    pub project: PathBuf,
}

impl ChildSpec {
    /// Reads a spec file.
    pub fn read(path: &Path) -> Result<ChildSpec, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read the child spec: {e}", path.display()))?;
        serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a child spec: {e}", path.display()))
    }
}

/// What a session needs to spawn children: the `chock` program, the provider and model to hand
/// on, and where this session stands in the tree.
#[derive(Debug, Clone)]
pub struct SubagentConfig {
    /// The `chock` binary each child runs.
    pub program: PathBuf,
    /// The provider's name, as config.toml names it (the child reads the same configuration).
    pub provider: String,
    /// The model.
    pub model: String,
    /// The child's turn limit.
    pub max_turns: u32,
    /// This session's depth (0: the top agent).
    pub depth: u32,
}

/// The shared state of a session's subagent tools.
#[derive(Debug)]
pub struct Subagents {
    pub(crate) config: SubagentConfig,
    pub(crate) budget: Budget,
    /// Children running now (the width bound).
    pub(crate) alive: AtomicU32,
}

impl Subagents {
    /// The subagent tools' state for a session under `budget`.
    pub fn new(config: SubagentConfig, budget: Budget) -> Arc<Self> {
        Arc::new(Self {
            config,
            budget,
            alive: AtomicU32::new(0),
        })
    }
}

/// Where the parent keeps what it made for the child `child`: its spec, its snapshot, its output.
pub fn child_dir(parent_session_dir: &Path, child: &str) -> PathBuf {
    parent_session_dir.join("children").join(child)
}

/// Offers the subagent tools to `agent`, only those someone may call: none when a child here would
/// be deeper than `[subagents] max_depth` (every spawn would be refused), `spawn_agent` and
/// `spawn_agents` only when the table does not deny `subagent.spawn`, and `take_subagent` only
/// beside them (with no child it has nothing to take).
pub fn offer(
    agent: &mut crate::agent::Agent,
    subagents: Arc<Subagents>,
) -> Result<(), chock_tools::registry::RegistryError> {
    let max_depth = agent.host().session().policy().subagents().max_depth;
    if u64::from(subagents.config.depth) >= max_depth {
        return Ok(());
    }
    let spawns = agent.offer_tool(Arc::new(SpawnAgent::new(Arc::clone(&subagents))))?;
    agent.offer_tool(Arc::new(SpawnAgents::new(Arc::clone(&subagents))))?;
    if spawns {
        agent.register_tool(Arc::new(TakeSubagent::new(subagents)))?;
    }
    Ok(())
}
