//! A whole client of the daemon, written against `chock-client` alone: it starts a session in
//! this user's daemon on a task in the current directory, prints what happens until the task is
//! over, shows the session as it stands, and ends it.
//!
//! ```text
//! chock serve &
//! cargo run -p chock-client --example watch -- "add a README" [PROVIDER]
//! ```
//!
//! The same loop reads an in-process session (`chock_runtime::SessionHandle`): the items, the
//! replies and the snapshot are the protocol's types either way.

use chock_client::{Item, Op, RemoteSession, Reply, Target};
use chock_protocol::live::{AgentEvent, cost_text};
use chock_protocol::rpc::{SessionState, StartParams};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let task = args.next().ok_or("usage: watch TASK [PROVIDER]")?;
    let provider = args.next();
    let project = std::env::current_dir()?;

    let (session, started, mut items) = RemoteSession::start(
        Target::local()?,
        StartParams {
            task,
            project: project.display().to_string(),
            provider,
            model: None,
            subscribe: true,
        },
    )
    .await?;
    println!(
        "session {} ({} {})",
        session.id(),
        started.provider,
        started.model
    );

    while let Some(item) = items.next().await? {
        match item {
            // The log's line as written: its hash chain can be checked from these bytes.
            Item::Logged(logged) => {
                let short: String = logged.line.chars().take(72).collect();
                println!("#{} {short}", logged.seq);
            }
            Item::Live { event, .. } => {
                if let AgentEvent::Text { text, .. } = event.as_ref() {
                    println!("model: {text}");
                }
            }
            Item::TaskEnded(outcome) => println!("task ended: {outcome:?}"),
            Item::Lagged { from_seq } => {
                println!("fell behind: the log goes on from #{from_seq}");
                break;
            }
            Item::State(state) => {
                println!("state: {state:?}");
                if matches!(state, SessionState::Idle | SessionState::Ended) {
                    break;
                }
            }
        }
    }
    items.close().await;

    let now = session.snapshot().await?;
    println!(
        "snapshot: {:?}, {} turns, head #{}, cost {}",
        now.state,
        now.view.turns,
        now.head.unwrap_or_default(),
        cost_text(now.view.cost_usd())
    );

    if let Reply::Ended(summary) = session.send(Op::End).await? {
        println!("ended: {}", summary.ended.as_str());
    }
    Ok(())
}
