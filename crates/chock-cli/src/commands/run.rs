//! `chock run`: the agent on a task. A thin edge over chock-agent: read the task and the
//! configuration, build the provider, open the session, wire the answerers, print events, print the
//! summary. Everything that decides or acts lives in the library.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use chock_agent::agent::{Agent, LoopLimits};
use chock_agent::approval::ApprovalBroker;
use chock_agent::approval_reviewer::ReviewerAnswerer;
use chock_agent::approval_terminal::TerminalAnswerer;
use chock_agent::config::{Config, ProviderKind};
use chock_agent::credentials::{self, ApiKey};
use chock_agent::events::{AgentEvent, EventSink};
use chock_agent::gate::Decider;
use chock_agent::host::Host;
use chock_provider::{Player, Price, PriceTable, Provider, ProviderConfig};
use chock_session::{Session, SessionOptions};
use serde_json::json;

use crate::exit::{self, Exit};

mod output;

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

/// The provider and what it needs: the model, the key to redact, and whether it is the offline player.
struct Chosen {
    provider: Arc<dyn Provider>,
    name: String,
    model: String,
    key: Option<ApiKey>,
    offline: bool,
}

fn choose_provider(config: &Config, args: &RunArgs) -> anyhow::Result<Chosen> {
    let name = args
        .provider
        .clone()
        .or_else(|| config.default_provider.clone())
        .ok_or_else(|| {
            Exit::new(
                exit::BAD_INPUT,
                "no provider: pass --provider NAME (try `--provider demo`, which needs no key), or set \
                 default_provider in config.toml (see docs/config.md)",
            )
        })?;
    if let Some(player) = Player::from_spec(&name) {
        let player = player.map_err(|e| Exit::new(exit::BAD_INPUT, e.to_string()))?;
        let model = args
            .model
            .clone()
            .or_else(|| player.recording().model.clone())
            .unwrap_or_else(|| "offline".to_string());
        return Ok(Chosen {
            provider: Arc::new(player),
            name,
            model,
            key: None,
            offline: true,
        });
    }
    let source = config
        .source
        .as_ref()
        .map_or("config.toml".to_string(), |p| p.display().to_string());
    let table = config.provider(&name).ok_or_else(|| {
        Exit::new(
            exit::BAD_INPUT,
            format!("unknown provider `{name}`: add a [providers.{name}] table to {source}, or use demo, anthropic, openai"),
        )
    })?;
    let found = credentials::find_key(&name, table.key_env.as_deref())
        .map_err(|e| Exit::new(exit::BAD_INPUT, e.to_string()))?;
    let key = found.map(|(key, _)| key);
    let needs_key = !matches!(table.kind, ProviderKind::OpenAiChat);
    if needs_key && key.is_none() {
        return Err(Exit::new(
            exit::BAD_INPUT,
            format!(
                "no key for provider `{name}`: set {} or run `chock login --provider {name}`",
                table.key_env.as_deref().unwrap_or("its key_env variable")
            ),
        )
        .into());
    }
    let secret = key.as_ref().map(|k| k.expose().to_string());
    let mut wire = match table.kind {
        ProviderKind::Anthropic => ProviderConfig::anthropic(secret.clone().unwrap_or_default()),
        ProviderKind::OpenAi => ProviderConfig::openai(secret.clone().unwrap_or_default()),
        ProviderKind::OpenAiChat | ProviderKind::AiAnd => {
            let base = table.base_url.clone().ok_or_else(|| {
                Exit::new(
                    exit::BAD_INPUT,
                    format!(
                        "{source}: providers.{name} needs base_url (kind {})",
                        table.kind.as_str()
                    ),
                )
            })?;
            if table.kind == ProviderKind::AiAnd {
                ProviderConfig::aiand(&base, secret.clone().unwrap_or_default())
            } else {
                ProviderConfig::chat_completions(&name, &base, secret.clone())
            }
        }
    };
    if let Some(base) = &table.base_url {
        wire.base_url = base.clone();
    }
    wire.name = name.clone();
    let model = args
        .model
        .clone()
        .or_else(|| {
            if config.default_provider.as_deref() == Some(name.as_str()) {
                config.default_model.clone()
            } else {
                None
            }
        })
        .or_else(|| table.model.clone())
        .or_else(|| match table.kind {
            ProviderKind::Anthropic => Some("claude-sonnet-4-5".to_string()),
            ProviderKind::OpenAi => Some("gpt-5".to_string()),
            _ => None,
        })
        .ok_or_else(|| {
            Exit::new(
                exit::BAD_INPUT,
                format!(
                    "no model for provider `{name}`: pass --model or set providers.{name}.model"
                ),
            )
        })?;
    let provider =
        chock_provider::connect(&wire).map_err(|e| Exit::new(exit::BAD_INPUT, e.to_string()))?;
    Ok(Chosen {
        provider: Arc::from(provider),
        name,
        model,
        key,
        offline: false,
    })
}

fn prices(config: &Config) -> PriceTable {
    PriceTable::with_overrides(config.prices.iter().map(|(model, p)| {
        (
            model.clone(),
            Price {
                input: p.input_per_mtok,
                output: p.output_per_mtok,
                cache_read: p.cache_read_per_mtok.unwrap_or(p.input_per_mtok),
                cache_write: p.cache_write_per_mtok.unwrap_or(p.input_per_mtok),
            },
        )
    }))
}

pub fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let task = read_task(&args.task)?;
    let config = Config::load().map_err(|e| Exit::new(exit::BAD_INPUT, e.to_string()))?;
    let chosen = choose_provider(&config, args)?;
    let project = match &args.project {
        Some(p) => p.clone(),
        None => std::env::current_dir().context("the current directory")?,
    };
    let header = chock_log::SessionHeader {
        command: Some("run".into()),
        provider: Some(chosen.name.clone()),
        model: Some(chosen.model.clone()),
        ..Default::default()
    };
    let session = Session::open(
        &project,
        SessionOptions {
            header,
            withheld_env: config.key_env_names(),
            ..SessionOptions::default()
        },
    )
    .map_err(|e| {
        let status = match &e {
            chock_session::SessionError::Policy(_)
            | chock_session::SessionError::Project { .. } => exit::BAD_INPUT,
            _ => exit::FAILURE,
        };
        Exit::new(status, e.to_string())
    })?;
    let log = session.log().clone();
    if let Some(key) = &chosen.key {
        log.add_secret(key.expose())
            .context("adding the key to the log's redaction funnel")?;
    }
    // Every other configured key too (another provider's, the search backend's): none should ever
    // appear, but if one does — a page echoing it, a tool's error — the log never holds it. A value too
    // short to redact safely is skipped here (the log refuses it); it is withheld from calls all the same.
    for name in config.key_env_names() {
        if let Some(value) = std::env::var(&name).ok().filter(|v| !v.trim().is_empty()) {
            let _ = log.add_secret(&value);
        }
    }
    let id = log.id().as_str().to_string();
    let sink: Arc<dyn EventSink> = if args.json {
        Arc::new(JsonSink)
    } else {
        Arc::new(HumanSink {
            verbose: args.verbose,
            at_line_start: Mutex::new(true),
        })
    };
    if args.json {
        sink.emit(&AgentEvent::SessionStarted {
            session: id.clone(),
            log_dir: log.dir().display().to_string(),
            project: session.project().display().to_string(),
            provider: chosen.name.clone(),
            model: chosen.model.clone(),
        });
    } else {
        println!(
            "chock: session {id} (provider {}, model {})",
            chosen.name, chosen.model
        );
        if args.verbose {
            println!(
                "chock: log {}",
                log.dir().join(chock_log::LOG_FILE).display()
            );
        }
    }
    let mut broker = ApprovalBroker::new();
    if !args.json
        && let Some(terminal) = TerminalAnswerer::stdin_if_terminal()
    {
        broker = broker.with(Arc::new(terminal));
    }
    if !chosen.offline {
        broker = broker.with(Arc::new(ReviewerAnswerer::new(
            Arc::clone(&chosen.provider),
            &chosen.model,
            &task,
        )));
    }
    let policy = session.shared_policy();
    let decider = Decider {
        log: log.clone(),
        policy,
        broker,
        sink: Arc::clone(&sink),
        counts: Arc::default(),
    };
    let mut network = chock_broker::BrokerConfig::default();
    if let Some(search) = &config.web_search {
        network.search = Some(
            chock_broker::SearchConfig::from_parts(
                &search.backend,
                search.url.as_deref(),
                search.key_env.as_deref(),
            )
            .map_err(|e| Exit::new(exit::BAD_INPUT, format!("config.toml [web_search]: {e}")))?,
        );
    }
    let host = Arc::new(Host::new(session).with_network(network));
    let limits = LoopLimits {
        model: chosen.model.clone(),
        max_turns: args.max_turns,
        ..LoopLimits::default()
    };
    let mut agent = Agent::new(
        host,
        chosen.provider,
        decider,
        Arc::clone(&sink),
        limits,
        prices(&config),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    // Ctrl-C ends the session as a record: the loop is dropped where it stands (a confined call's
    // processes die with their sandbox), `session.end` says it was interrupted, and the work so far
    // stays reviewable.
    let outcome = runtime.block_on(async {
        tokio::select! {
            outcome = agent.run(&task) => Some(outcome),
            _ = tokio::signal::ctrl_c() => None,
        }
    });
    let Some(outcome) = outcome else {
        drop(agent);
        let _ = log.append(
            chock_log::EventKind::SessionEnd,
            None,
            json!({ "summary": { "session": id, "ended": "interrupted" } }),
        );
        runtime.shutdown_timeout(std::time::Duration::from_millis(200));
        eprintln!("\nchock: interrupted; what the session did so far: chock diff {id}");
        return Ok(ExitCode::from(130));
    };
    match outcome {
        Ok(summary) => {
            if !args.json {
                print_summary(&summary);
            }
            Ok(if summary.ended == "done" {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(exit::FAILURE)
            })
        }
        Err(err) => {
            if !args.json {
                eprintln!("chock: the session {id} stopped: {err}");
                eprintln!(
                    "chock: what it did so far: chock diff {id}; its log: chock sessions show {id}"
                );
            }
            Err(Exit::new(exit::FAILURE, err.to_string()).into())
        }
    }
}
