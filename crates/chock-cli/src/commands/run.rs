//! `chock run`: the agent on a task. A thin client of the session's handle (`chock-runtime`): read
//! the task and the configuration, hand them to the builder with the answerers, start the
//! session, send the task, render its items and the summary. Choosing the provider, the keys'
//! redaction, deciding, acting and the one end rule all live in the libraries.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use chock_agent::runtime::{BuildError, SessionBuilder};
use chock_config::config::Config;
use chock_protocol::live::Ended;
use chock_protocol::log::BudgetAmount;
use chock_runtime::{Item, Observer, Op, Opening, Reply, StartError, TaskOutcome};
use chock_terminal::TerminalAnswerer;
use chock_tools::events::EventSink;

use crate::exit::{self, Exit};
use crate::say::{say, say_err};

mod detach_key;
pub(crate) mod output;

use output::{HumanSink, JsonSink, print_summary};

/// Arguments of `chock run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The task; read from standard input when absent.
    pub task: Vec<String>,
    /// The provider: a name from config.toml (or `anthropic`, `openai`, `aiand`), `demo` for the
    /// built-in offline recording, or `script:FILE` for a recording of your own.
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
    /// The model to ask for (default: config.toml's `default_model`, then the provider's `model`).
    #[arg(long)]
    pub model: Option<String>,
    /// The project (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Write events as JSON lines on standard output (schema: docs/json-events.md). Nobody is asked
    /// anything: an act the table says to ask about is refused.
    #[arg(long)]
    pub json: bool,
    /// Also print the session log's path and each decision's rule.
    #[arg(long, short)]
    pub verbose: bool,
    /// Stop after this many turns.
    #[arg(long, default_value_t = 50, value_name = "N")]
    pub max_turns: u32,
    /// Go on with an ended or interrupted session (its id or a unique prefix): the conversation is
    /// rebuilt from its log, its workspace is the one it had, and the task is a follow-up.
    #[arg(long, value_name = "SESSION")]
    pub resume: Option<String>,
    /// Start the session in the running daemon (`chock serve`) and attach this terminal to it:
    /// it goes on in the daemon if you detach (Ctrl-C) or once the task ends.
    #[arg(long, conflicts_with_all = ["json", "resume"])]
    pub daemon: bool,
    /// What the session's model calls may cost, its children's included: `$0.50`, `20000tokens`,
    /// or both (`$0.50,20000tokens`). The stricter of this and chock.toml's `[budget]` applies.
    #[arg(long, value_name = "AMOUNT", value_parser = parse_budget)]
    pub budget: Option<BudgetAmount>,
    /// Run as the child session a parent's `spawn_agent` described in FILE (internal).
    #[arg(long, value_name = "FILE", hide = true, conflicts_with_all = ["resume", "daemon", "project"])]
    pub child_spec: Option<PathBuf>,
}

/// Parses `--budget`: comma-separated `$DOLLARS`, `DOLLARSusd`, `Ntokens` (or `Ntok`).
fn parse_budget(text: &str) -> Result<BudgetAmount, String> {
    let mut amount = BudgetAmount::default();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let lower = part.to_ascii_lowercase();
        if let Some(n) = lower
            .strip_prefix('$')
            .or_else(|| lower.strip_suffix("usd"))
        {
            let usd: f64 = n
                .trim()
                .parse()
                .map_err(|_| format!("`{part}` is not a dollar amount (write $0.50)"))?;
            if !usd.is_finite() || usd <= 0.0 {
                return Err(format!("`{part}`: the dollars must be more than 0"));
            }
            amount.usd = Some(usd);
        } else if let Some(n) = lower
            .strip_suffix("tokens")
            .or_else(|| lower.strip_suffix("tok"))
        {
            let tokens: u64 = n
                .trim()
                .parse()
                .map_err(|_| format!("`{part}` is not a token count (write 20000tokens)"))?;
            if tokens == 0 {
                return Err(format!("`{part}`: the tokens must be at least 1"));
            }
            amount.tokens = Some(tokens);
        } else {
            return Err(format!(
                "`{part}`: write dollars as $0.50 and tokens as 20000tokens"
            ));
        }
    }
    if amount.usd.is_none() && amount.tokens.is_none() {
        return Err("an empty budget: write $0.50, 20000tokens, or both".into());
    }
    Ok(amount)
}

/// `chock -- TASK WORDS`, or bare `chock`.
pub fn run_task_words(words: Vec<String>) -> anyhow::Result<ExitCode> {
    if words.is_empty() && std::io::stdin().is_terminal() {
        return Err(Exit::new(
            exit::BAD_INPUT,
            "no task given: write `chock run \"TASK\"`, `chock -- TASK WORDS`, or pipe the task on standard input",
        )
        .into());
    }
    run(&RunArgs {
        task: words,
        provider: None,
        model: None,
        project: None,
        json: false,
        verbose: false,
        max_turns: 50,
        resume: None,
        daemon: false,
        budget: None,
        child_spec: None,
    })
}

fn read_task(words: &[String]) -> anyhow::Result<String> {
    let task = if words.is_empty() {
        if std::io::stdin().is_terminal() {
            return Err(Exit::new(
                exit::BAD_INPUT,
                "no task given: pass it as an argument or on standard input",
            )
            .into());
        }
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading the task from standard input")?;
        text
    } else {
        words.join(" ")
    };
    let task = task.trim().to_string();
    if task.is_empty() {
        return Err(Exit::new(exit::BAD_INPUT, "the task is empty").into());
    }
    Ok(task)
}

fn build_error(err: &BuildError) -> Exit {
    let status = if err.is_bad_input() {
        exit::BAD_INPUT
    } else {
        exit::FAILURE
    };
    Exit::new(status, err.to_string())
}

#[allow(
    clippy::disallowed_methods,
    reason = "`chock run`'s runtime, which drives the session: the binary's edge"
)]
pub fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let task = read_task(&args.task)?;
    if args.daemon {
        return super::attach::run_in_daemon(args, task);
    }
    let config = Config::load().map_err(|e| Exit::new(exit::BAD_INPUT, e.to_string()))?;
    let sink: Arc<dyn EventSink> = if args.json {
        Arc::new(JsonSink)
    } else {
        Arc::new(HumanSink {
            verbose: args.verbose,
            at_line_start: Mutex::new(true),
        })
    };
    let mut builder = SessionBuilder::new(config)
        .provider(args.provider.clone())
        .model(args.model.clone())
        .project(args.project.clone())
        .max_turns(args.max_turns)
        .reviewer_for(&task);
    if let Some(budget) = args.budget {
        builder = builder.budget(budget);
    }
    // A child's children are more runs of this same binary.
    if let Ok(program) = std::env::current_exe() {
        builder = builder.subagents(program);
    }
    if let Some(path) = &args.child_spec {
        let spec = chock_agent::subagent::ChildSpec::read(path)
            .map_err(|e| Exit::new(exit::BAD_INPUT, e))?;
        builder = builder.child(spec);
    }
    let at_a_terminal = !args.json && args.child_spec.is_none();
    if at_a_terminal && let Some(terminal) = TerminalAnswerer::stdin_if_terminal() {
        builder = builder.person(Arc::new(terminal));
    }
    let opening = match &args.resume {
        Some(query) => {
            let root =
                chock_log::sessions_root().map_err(|e| Exit::new(exit::FAILURE, e.to_string()))?;
            let dir = chock_log::find_session(&root, query)
                .map_err(|e| Exit::new(exit::BAD_INPUT, e.to_string()))?;
            Opening::Resume(dir)
        }
        None => Opening::New,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    // The renderer sees every item on the thread that made it, so what it printed is on the
    // screen before a terminal question asked on that thread.
    let render: Arc<dyn Observer> = Arc::new(Render(Arc::clone(&sink)));
    // `chock detach` (the daemon's adopt) asks this process to let go of its session with
    // SIGUSR1: taken from before the session's log exists, so the signal never ends the process.
    let mut let_go = runtime
        .block_on(async {
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())
        })
        .context("listening for SIGUSR1")?;
    // Ctrl-\ at a terminal hands the session to the daemon (`detach_key`); a subagent's run,
    // in its parent's process group, only swallows it.
    let detach_key = if args.child_spec.is_some() {
        runtime
            .block_on(async { detach_key::swallow() })
            .context("listening for SIGQUIT")?;
        None
    } else if at_a_terminal && std::io::stdin().is_terminal() {
        Some(
            runtime
                .block_on(async { detach_key::listen() })
                .context("listening for SIGQUIT")?,
        )
    } else {
        None
    };
    let session = runtime
        .block_on(chock_runtime::start(builder, opening, Some(render)))
        .map_err(|e| start_error(&e))?;
    let id = session.id().to_string();
    if !args.json {
        say!(
            "chock: session {id} (provider {}, model {})",
            session.provider(),
            session.model()
        );
        if args.verbose {
            say!(
                "chock: log {}",
                session.dir().join(chock_log::LOG_FILE).display()
            );
        }
    }
    // Ctrl-C interrupts the turn: the model stream stops, a running command's process tree is
    // killed, the log says so, and the session ends as a record whose work so far stays
    // reviewable.
    let outcome = runtime.block_on(async {
        let interrupter = session.clone();
        let watch = tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                let _ = interrupter.send(Op::Interrupt).await;
            }
        });
        let handing = session.clone();
        let detach = tokio::spawn(async move {
            while let_go.recv().await.is_some() {
                // A task that ended first is this process's to end: `chock run` has no idle
                // session to hand over.
                if handing.hand_over().await.handed_over() {
                    return;
                }
            }
        });
        let key = detach_key.map(|presses| tokio::spawn(detach_key::watch(presses, id.clone())));
        let mut items = session.subscribe_live();
        let ended = session.last_task().map_or(0, |(n, _)| n);
        let sent = session.send(Op::UserInput { text: task }).await;
        let outcome = match sent {
            Ok(_) => task_outcome(&session, &mut items, ended).await,
            Err(e) => TaskOutcome::Failed(e.to_string()),
        };
        watch.abort();
        detach.abort();
        if let Some(key) = key {
            key.abort();
        }
        match outcome {
            TaskOutcome::Ended(end) => match session.send(Op::End).await {
                Ok(Reply::Ended(summary)) => Ok(Some((end, summary))),
                Ok(other) => Err(format!("the end was answered {other:?}")),
                Err(e) => Err(e.to_string()),
            },
            TaskOutcome::HandedOver => Ok(None),
            TaskOutcome::Failed(why) => Err(why),
        }
    });
    let outcome = match outcome {
        Ok(None) => {
            // Another process writes the session from here; a call this one still runs (a
            // question's thread) is left behind.
            runtime.shutdown_timeout(std::time::Duration::from_millis(200));
            say_err!();
            say_err!(
                "chock: session {id} was handed over; follow it: {}",
                chock_client::handover::how_to_follow(&id)
            );
            return Ok(ExitCode::SUCCESS);
        }
        Ok(Some(ended)) => Ok(ended),
        Err(e) => Err(e),
    };
    match outcome {
        Ok((Ended::Interrupted, _)) => {
            runtime.shutdown_timeout(std::time::Duration::from_millis(200));
            say_err!();
            say_err!("chock: interrupted; what the session did so far: chock diff {id}");
            Ok(ExitCode::from(130))
        }
        Ok((_, summary)) => {
            if !args.json {
                print_summary(&summary);
            }
            Ok(ExitCode::from(exit::of_session(&summary.ended)))
        }
        Err(err) => {
            // A task that failed (a panic in the loop among them) may leave a blocking thread
            // behind: the process ends without waiting for it.
            runtime.shutdown_timeout(std::time::Duration::from_millis(200));
            if !args.json {
                say_err!("chock: the session {id} stopped: {err}");
                say_err!(
                    "chock: what it did so far: chock diff {id}; its log: chock sessions show {id}"
                );
            }
            Err(Exit::new(exit::FAILURE, err).into())
        }
    }
}

/// Waits on `items` for the end of the task running now, the `ended`+1th of the session. A
/// subscription that fell behind is taken up again; a task that ended meanwhile is read from the
/// session.
async fn task_outcome(
    session: &chock_runtime::SessionHandle,
    items: &mut chock_runtime::Subscription,
    ended: u64,
) -> TaskOutcome {
    loop {
        match items.next().await {
            Some(Item::TaskEnded(outcome)) => return outcome,
            Some(Item::Lagged { .. }) => {
                *items = session.subscribe_live();
                if let Some((n, outcome)) = session.last_task()
                    && n > ended
                {
                    return outcome;
                }
            }
            Some(_) => {}
            None => break,
        }
    }
    TaskOutcome::Failed("the session ended without saying how its task went".into())
}

/// The terminal or JSON renderer, as an observer of the session's items.
struct Render(Arc<dyn EventSink>);

impl Observer for Render {
    fn item(&self, item: &Item) {
        if let Item::Live { event, .. } = item {
            self.0.emit(event);
        }
    }
}

fn start_error(err: &StartError) -> Exit {
    match err {
        StartError::Build(e) => build_error(e),
        other => Exit::new(exit::FAILURE, other.to_string()),
    }
}
