//! Making a session from configuration and flags: the provider and model, every configured key
//! into the log's redaction funnel, the answerers, the network and search configuration. The
//! command line only parses arguments and hands them here.

use std::path::PathBuf;
use std::sync::Arc;

use chock_session::{Session, SessionOptions};

use chock_protocol::log::{BudgetAmount, Note};

use crate::agent::{Agent, LoopLimits};
use crate::approval::{Answerer, ApprovalBroker};
use crate::approval_reviewer::{ReviewContext, ReviewerAnswerer};
use crate::booking::OffTurnTally;
use crate::budget::{Budget, stricter};
use crate::subagent::{ChildSpec, SubagentConfig, Subagents};
use chock_config::config::Config;
use chock_tools::events::{EventSink, NoEvents};
use chock_tools::gate::Decider;
use chock_tools::host::Host;
use chock_tools::tool::DynTool;

use super::SessionRuntime;
use super::background::LeftBackground;
pub use super::build_error::BuildError;
pub use super::choose::Chosen;
use super::choose::{choose_provider, prices};
use super::resume::Reopened;

/// Everything a session is made from.
pub struct SessionBuilder {
    config: Config,
    provider: Option<String>,
    model: Option<String>,
    project: Option<PathBuf>,
    sessions_root: Option<PathBuf>,
    memory_root: Option<PathBuf>,
    max_turns: u32,
    sink: Arc<dyn EventSink>,
    people: Vec<Arc<dyn Answerer>>,
    review: ReviewContext,
    off_turn: OffTurnTally,
    tools: Vec<Arc<dyn DynTool>>,
    budget: BudgetAmount,
    subagent_program: Option<PathBuf>,
    child: Option<ChildSpec>,
    /// MCP servers beyond chock.toml's and config.toml's (an editor's, through ACP).
    mcp_extra: Vec<chock_mcp::Configured>,
    /// The MCP trust file (default `$XDG_DATA_HOME/chock/mcp-trust.json`).
    mcp_trust: Option<PathBuf>,
}

impl std::fmt::Debug for SessionBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionBuilder")
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("project", &self.project)
            .finish_non_exhaustive()
    }
}

impl SessionBuilder {
    /// A builder over `config` (config.toml as loaded).
    pub fn new(config: Config) -> Self {
        Self {
            config,
            provider: None,
            model: None,
            project: None,
            sessions_root: None,
            memory_root: None,
            max_turns: LoopLimits::default().max_turns,
            sink: Arc::new(NoEvents),
            people: Vec::new(),
            review: ReviewContext::default(),
            off_turn: OffTurnTally::default(),
            tools: Vec::new(),
            budget: BudgetAmount::default(),
            subagent_program: None,
            child: None,
            mcp_extra: Vec::new(),
            mcp_trust: None,
        }
    }

    /// A budget for the session's model calls (`--budget`): the stricter of it and chock.toml's
    /// `[budget]` applies. A resumed session keeps the budget its log recorded (lowered to this
    /// when this is stricter).
    #[must_use]
    pub fn budget(mut self, budget: BudgetAmount) -> Self {
        self.budget = budget;
        self
    }

    /// Lets the agent spawn child sessions (`spawn_agent`, `take_subagent`), each a run of
    /// `program` (the `chock` binary), bounded by `[subagents]`.
    #[must_use]
    pub fn subagents(mut self, program: PathBuf) -> Self {
        self.subagent_program = Some(program);
        self
    }

    /// Makes this session the child `spec` describes (`chock run --child-spec`): created under the
    /// id its parent chose, on the parent's snapshot, under the parent's ratchet and the slice of
    /// its budget.
    #[must_use]
    pub fn child(mut self, spec: ChildSpec) -> Self {
        self.project = Some(spec.project.clone());
        self.child = Some(spec);
        self
    }

    /// Where the MCP trust file is (default `$XDG_DATA_HOME/chock/mcp-trust.json`).
    #[must_use]
    pub fn mcp_trust_file(mut self, path: PathBuf) -> Self {
        self.mcp_trust = Some(path);
        self
    }

    /// MCP servers an editor passed (ACP `session/new`): started under the same confinement as
    /// chock.toml's and config.toml's, their calls decided the same way.
    #[must_use]
    pub fn mcp_servers(mut self, servers: Vec<chock_mcp::Configured>) -> Self {
        self.mcp_extra.extend(servers);
        self
    }

    /// The provider's name (default: config.toml's `default_provider`).
    #[must_use]
    pub fn provider(mut self, name: Option<String>) -> Self {
        self.provider = name;
        self
    }

    /// The model (default: config.toml's `default_model`, then the provider's `model`).
    #[must_use]
    pub fn model(mut self, model: Option<String>) -> Self {
        self.model = model;
        self
    }

    /// The project (default: the current directory).
    #[must_use]
    pub fn project(mut self, project: Option<PathBuf>) -> Self {
        self.project = project;
        self
    }

    /// Where session directories live (default: the user's state directory).
    #[must_use]
    pub fn sessions_root(mut self, root: Option<PathBuf>) -> Self {
        self.sessions_root = root;
        self
    }

    /// Where the project's notes are kept (default: under Chock's data directory,
    /// docs/memory.md).
    #[must_use]
    pub fn memory_root(mut self, root: Option<PathBuf>) -> Self {
        self.memory_root = root;
        self
    }

    /// At most this many turns per task.
    #[must_use]
    pub fn max_turns(mut self, turns: u32) -> Self {
        self.max_turns = turns;
        self
    }

    /// Where live events go.
    #[must_use]
    pub fn sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.sink = sink;
        self
    }

    /// A person who answers questions (a terminal, a client). Several may be attached: the first
    /// valid answer wins. With none, every question is refused.
    #[must_use]
    pub fn person(mut self, answerer: Arc<dyn Answerer>) -> Self {
        self.people.push(answerer);
        self
    }

    /// Tells the reviewer model the session's task before it is submitted (a subagent's spec
    /// names it). The reviewer (the session's own provider: every session of a network provider
    /// has one, and one of a recording that answers reviews) is told every task and follow-up the
    /// runtime is given anyway.
    #[must_use]
    pub fn reviewer_for(self, task: &str) -> Self {
        self.review.told(task);
        self
    }

    /// A tool beyond the built-in ones (an MCP server's, a plugin's, `spawn_agent`): registered
    /// under its own name and action names, decided through the same pipeline as every call.
    #[must_use]
    pub fn tool(mut self, tool: Arc<dyn DynTool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// The provider and model this builder would use (for a header before the session opens).
    pub fn choose(&self) -> Result<Chosen, BuildError> {
        choose_provider(&self.config, self.provider.clone(), self.model.clone())
    }

    /// Opens a new session and returns its runtime, idle until the first input. Its MCP servers
    /// start when [`SessionRuntime::start_mcp`] is awaited.
    pub fn build(self) -> Result<SessionRuntime, BuildError> {
        let chosen = self.choose()?;
        let project = match &self.project {
            Some(p) => p.clone(),
            None => {
                std::env::current_dir().map_err(|source| chock_session::SessionError::Project {
                    path: PathBuf::from("."),
                    source,
                })?
            }
        };
        let mut header = chock_log::SessionHeader {
            command: Some("run".into()),
            provider: Some(chosen.name.clone()),
            model: Some(chosen.model.clone()),
            ..Default::default()
        };
        if let Some(spec) = &self.child {
            header.id = Some(chock_log::SessionId::parse(&spec.id)?);
            header.parent = Some(chock_log::SessionId::parse(&spec.parent)?);
        }
        let session = Session::open(
            &project,
            SessionOptions {
                sessions_root: self.sessions_root.clone(),
                header,
                withheld_env: self.config.key_env_names(),
                // The agent's work is reviewed and applied: its workspace keeps the record.
                scratch: false,
                // The agent's calls overlap (a background command, a service): one shared instance.
                calls: chock_session::Calls::Overlapping,
                // git inside its calls goes through the shim installed beside `chock`.
                git_shim: chock_session::git_shim::installed(),
            },
        )?;
        let log = session.log().clone();
        let mut depth = 0;
        let mut limit = stricter(self.budget, from_config(*session.policy().budget()));
        if let Some(spec) = &self.child {
            depth = spec.depth;
            limit = stricter(limit, spec.budget);
            // The parent's narrowings, before anything is decided here: the child starts where
            // its parent stood, can only narrow further, and cannot widen what it inherited.
            inherit(&session, &spec.ratchet)?;
            log.record(
                None,
                Note::Spawned {
                    parent: spec.parent.clone(),
                    parent_head: spec.parent_head.clone(),
                    depth: spec.depth,
                    ratchet: spec.ratchet.clone(),
                },
            )?;
        }
        let budget = Budget::new(limit);
        if budget.is_limited() {
            log.record(None, Note::Budget { limit })?;
        }
        let agent = self.agent(session, &chosen, budget, depth)?;
        let mcp = super::mcp::pending(
            &agent,
            &self.config,
            &self.mcp_extra,
            self.mcp_trust.as_deref(),
            || self.off_turn(&chosen, agent.log(), agent.budget()),
        )?;
        let mut runtime = SessionRuntime::new(agent, chosen, self.review, self.off_turn);
        runtime.mcp = mcp;
        Ok(runtime)
    }

    /// Opens the ended or crashed session in `session_dir` again: its log goes on, its workspace
    /// is the one it had, and the conversation is rebuilt from the log's typed events. The
    /// background commands the last process left are taken up as an adopt takes them up
    /// (`super::background`): those its keeper still keeps run on and are followed here, and
    /// the end of any other whose end was never recorded is logged as unknown. Called within a
    /// tokio runtime (as `chock_runtime::start` calls it): each followed command's waiter is a
    /// task of that runtime.
    pub fn resume(self, session_dir: &std::path::Path) -> Result<SessionRuntime, BuildError> {
        let r = self.reopen(session_dir)?;
        let own = chock_log::read_events(session_dir)?;
        let mut runtime =
            SessionRuntime::resumed(r.agent, r.chosen, r.review, r.off_turn, &r.events)?;
        runtime.mcp = r.mcp;
        let background = LeftBackground::take_up(runtime.agent.toolbox(), &own);
        background.record_lost(runtime.agent.log())?;
        background.follow(runtime.agent.toolbox(), session_dir)?;
        super::background::take_up_children(&runtime, &own, &r.orphans_completed);
        Ok(runtime)
    }

    /// The session in `session_dir` opened again (its log, workspace, policy, budget), with its
    /// lineage's events to rebuild the conversation from.
    pub(super) fn reopen(self, session_dir: &std::path::Path) -> Result<Reopened, BuildError> {
        let chosen = self.choose()?;
        let session = Session::reopen(
            session_dir,
            SessionOptions {
                sessions_root: self.sessions_root.clone(),
                withheld_env: self.config.key_env_names(),
                git_shim: chock_session::git_shim::installed(),
                ..SessionOptions::default()
            },
        )?;
        let mut events = chock_log::read_events(session_dir)?;
        // What was spent and promised comes from the log: a slice handed to a child is not
        // handed out again.
        let budget = Budget::from_log(&events, None);
        // A child that outlived this session's last run (it died while the child ran) gets its
        // `agent.complete` now, and what it spent is booked; one still running stays reserved.
        let orphans_completed = crate::subagent::complete_orphans(session.log(), &events, &budget)?;
        if !orphans_completed.is_empty() {
            session.log().sync()?;
            events = chock_log::read_events(session_dir)?;
        }
        let limit = stricter(self.budget, from_config(*session.policy().budget()));
        if limit != budget.limit() && (limit.usd.is_some() || limit.tokens.is_some()) {
            budget.restrict_limit(limit);
            session.log().record(
                None,
                Note::Budget {
                    limit: budget.limit(),
                },
            )?;
        }
        let spawned = events.iter().find_map(|e| match e.payload() {
            Ok(chock_protocol::EventData::Note(Note::Spawned { depth, ratchet, .. })) => {
                Some((depth, ratchet))
            }
            _ => None,
        });
        let depth = spawned.as_ref().map_or(0, |(depth, _)| *depth);
        if let Some((_, ratchet)) = &spawned {
            // A resumed child is bound by what it inherited, again before anything is decided.
            inherit(&session, ratchet)?;
        }
        let agent = self.agent(session, &chosen, budget, depth)?;
        let mcp = super::mcp::pending(
            &agent,
            &self.config,
            &self.mcp_extra,
            self.mcp_trust.as_deref(),
            || self.off_turn(&chosen, agent.log(), agent.budget()),
        )?;
        // A fork's conversation is its parent's up to the turn it forked at, then its own (what
        // was spent and promised above is this session's own).
        let events = chock_log::read_lineage(session_dir)?;
        Ok(Reopened {
            agent,
            chosen,
            review: self.review,
            off_turn: self.off_turn,
            events,
            orphans_completed,
            mcp,
        })
    }

    /// The agent over `session`: keys into the redaction funnel, answerers, network.
    /// The session's account for model calls outside the turns (the reviewer's, sampling).
    fn off_turn(
        &self,
        chosen: &Chosen,
        log: &chock_log::Log,
        budget: &Budget,
    ) -> crate::booking::OffTurn {
        crate::booking::OffTurn {
            provider: Arc::clone(&chosen.provider),
            model: chosen.model.clone(),
            prices: prices(&self.config),
            log: log.clone(),
            budget: budget.clone(),
            tally: self.off_turn.clone(),
        }
    }

    fn agent(
        &self,
        session: Session,
        chosen: &Chosen,
        budget: Budget,
        depth: u32,
    ) -> Result<Agent, BuildError> {
        let log = session.log().clone();
        if let Some(key) = &chosen.key {
            log.add_secret(key.expose())?;
        }
        // Every other configured key too (another provider's, the search backend's): none should
        // ever appear, but if one does — a page echoing it, a tool's error — the log never holds
        // it. A value too short to redact safely is skipped (the log refuses it); it is withheld
        // from calls all the same.
        for name in self.config.key_env_names() {
            if let Some(value) = std::env::var(&name).ok().filter(|v| !v.trim().is_empty()) {
                let _ = log.add_secret(&value);
            }
        }
        let mut broker = ApprovalBroker::new();
        for person in &self.people {
            broker = broker.with(Arc::clone(person));
        }
        if chosen.reviews {
            broker = broker.with(Arc::new(ReviewerAnswerer::for_session(
                self.off_turn(chosen, &log, &budget),
                self.review.clone(),
            )));
        }
        let decider = Decider {
            log: log.clone(),
            policy: session.shared_policy(),
            broker,
            sink: Arc::clone(&self.sink),
            counts: Arc::default(),
            turn: Arc::default(),
        };
        let mut network = chock_broker::BrokerConfig::default();
        if let Some(search) = &self.config.web_search {
            network.search = Some(
                chock_broker::SearchConfig::from_parts(
                    &search.backend,
                    search.url.as_deref(),
                    search.key_env.as_deref(),
                )
                .map_err(|e| BuildError::Search(e.to_string()))?,
            );
        }
        // The project's plugins: pinned, compiled, their imports decided before they are linked.
        let plugins = chock_tools::plugin::load_all(session.project(), session.policy())?;
        let host = Arc::new(
            Host::new(session)
                .with_network(network)
                .with_memory_root(self.memory_root.clone()),
        );
        let limits = LoopLimits {
            model: chosen.model.clone(),
            max_turns: self.max_turns,
            ..LoopLimits::default()
        };
        let mut agent = Agent::new(
            host,
            Arc::clone(&chosen.provider),
            decider,
            Arc::clone(&self.sink),
            limits,
            prices(&self.config),
        );
        agent.set_budget(budget.clone());
        if let Some(program) = &self.subagent_program {
            let subagents = Subagents::new(
                SubagentConfig {
                    program: program.clone(),
                    provider: chosen.name.clone(),
                    model: chosen.model.clone(),
                    max_turns: self.max_turns,
                    depth,
                },
                budget,
            );
            crate::subagent::offer(&mut agent, subagents)?;
        }
        for tool in self.tools.iter().chain(&plugins) {
            agent.offer_tool(Arc::clone(tool))?;
        }
        // Asking for a program needs nix on the host, and a table that lets `nix.build` exist.
        if agent.host().session().has_nix() {
            agent.offer_tool(Arc::new(chock_tools::builtin::ProvisionProgram))?;
        }
        Ok(agent)
    }
}

fn from_config(config: chock_policy::BudgetConfig) -> BudgetAmount {
    BudgetAmount {
        usd: config.usd,
        tokens: config.tokens,
    }
}

/// Applies a parent's ratchet to `session` as inherited restrictions.
fn inherit(session: &Session, ratchet: &[(String, String)]) -> Result<(), BuildError> {
    let policy = session.shared_policy();
    let mut policy = policy
        .write()
        .map_err(|_| BuildError::Child("the policy lock is poisoned".into()))?;
    for (pattern, decision) in ratchet {
        let decision = chock_policy::Decision::from_name(decision).ok_or_else(|| {
            BuildError::Child(format!("the ratchet decision `{decision}` is not one"))
        })?;
        policy
            .inherit(pattern, decision)
            .map_err(|e| BuildError::Child(format!("the ratchet on {pattern}: {e}")))?;
    }
    Ok(())
}
