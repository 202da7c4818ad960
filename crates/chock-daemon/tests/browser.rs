//! The browser UI in a real browser: Debian's chromium, driven through chromedriver (WebDriver),
//! against the real `chock serve --host` binary in a hermetic world. A person's whole path: the
//! one-time login link (the token kept in the page's own storage: another local server the
//! browser then visits receives no cookie, and the page stays signed in), a session started from the page on a recording whose write the project's
//! policy asks about, the question answered in the page (and who answered shown), the result
//! streaming in, review with ONE hunk of two selected and applied (the real project holds exactly
//! that hunk, and the log's apply carries the digest the page showed), a reload (the page rebuilds
//! from the log), the undo (the project is back), and the log's chain verified. Screenshots go to
//! `<target>/test-artifacts/` (`browser.png` is the review after the apply).
//!
//! Then two follow-ups from the page: one whose write is answered at another client (the unix
//! socket, as a terminal would), the page naming that client as who answered; one whose long
//! command is interrupted from the page.
//!
//! Built only with the crate's `browser` feature (`.ci/run` tests with `--all-features`).
//! Without chromium or chromedriver the test then fails in CI (`CI=true`) and is skipped
//! elsewhere, counted by `chock_test_support::requires`.

mod browser_support;

use browser_support::page::*;
use browser_support::*;
use chock_client::DaemonClient;
use chock_protocol::log::AnswerKind;
use chock_protocol::rpc::{AnswerParams, Call, Done, Pending, PendingParams};
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

/// The project's README: twenty numbered lines, some replaced.
fn readme(changed: &[(usize, &str)]) -> String {
    (1..=20)
        .map(|n| match changed.iter().find(|(at, _)| *at == n) {
            Some((_, text)) => format!("{text}\n"),
            None => format!("line {n}\n"),
        })
        .collect()
}

/// The recording: a plan, a write the policy asks about (two hunks far apart), a command whose
/// output streams, and closing words holding markup that must show as text.
fn recording() -> String {
    let edited = readme(&[(2, "line two, changed"), (18, "line eighteen, changed")]);
    format!(
        r#"name = "browser"
[[turn]]
text = "I'll plan, then edit README.md. <b id=\"injected\">not bold</b>"
[[turn.call]]
tool = "update_plan"
input = {{ steps = [{{ step = "Edit README.md", status = "in_progress" }}, {{ step = "Check the edit", status = "pending" }}] }}
[[turn.call]]
tool = "write_file"
input = {{ path = "README.md", content = {content} }}
expect = {{ is_error = false }}

[[turn]]
text = "Checking the result."
[[turn.call]]
tool = "run_command"
input = {{ command = "grep -n changed README.md" }}

[[turn]]
text = "Done: two lines of README.md changed."

[[turn]]
text = "Writing the notes you asked for."
[[turn.call]]
tool = "write_file"
input = {{ path = "NOTES.md", content = "notes\n" }}

[[turn]]
text = "Notes written."

[[turn]]
text = "Running the long check."
[[turn.call]]
tool = "run_command"
input = {{ command = "sleep 120" }}

[[turn]]
text = "Not reached: the long check was interrupted."
"#,
        content = serde_json::to_string(&edited).unwrap()
    )
}

/// Answers the open question about `action` in the page, "Yes, once", checks what it shows, and
/// waits for the resolved notice naming who answered (this page: `web:…`).
async fn answer(c: &Client, action: &str, shows: &str) -> Step<String> {
    let card = format!("#approval-list article.approval[data-action=\"{action}\"]");
    let what = text(c, &format!("{card} pre.what")).await?;
    if !what.contains(shows) {
        return Err(format!(
            "the {action} question shows {what:?}, not {shows:?}"
        ));
    }
    let question = attr(c, &card, "data-question").await?;
    click(c, &format!("{card} button[data-answer=\"allow_once\"]")).await?;
    let resolved =
        format!("#approval-history li[data-question=\"{question}\"][data-answer=\"allow_once\"]");
    let by = attr(c, &resolved, "data-resolved-by").await?;
    if !by.starts_with("web:") {
        return Err(format!(
            "the question was answered by {by:?}, not by this page"
        ));
    }
    Ok(question)
}

/// Answers the session's next open question over the unix socket, as a terminal client would,
/// and returns the name the daemon gives that client.
async fn answer_from_the_socket(world: &World, session: &str) -> Step<String> {
    let socket = world.runtime.join("chock/daemon.sock");
    let mut client = DaemonClient::unix(&socket)
        .await
        .map_err(|e| format!("connecting to {}: {e}", socket.display()))?;
    let deadline = std::time::Instant::now() + PATIENCE;
    let question = loop {
        let pending: Pending = client
            .call(&Call::ApprovalsPending(PendingParams {
                session: Some(session.into()),
            }))
            .await
            .map_err(|e| format!("approvals.pending: {e}"))?;
        if let Some(q) = pending.approvals.into_iter().find(|q| q.answerable) {
            break q;
        }
        if std::time::Instant::now() > deadline {
            return Err("the follow-up's write was never asked about".into());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    if !question.what.contains("NOTES.md") {
        return Err(format!("the follow-up's question is {:?}", question.what));
    }
    let _: Done = client
        .call(&Call::ApprovalsAnswer(AnswerParams {
            session: session.into(),
            question: question.question.clone(),
            answer: AnswerKind::AllowOnce,
            reasons: None,
            reply: None,
        }))
        .await
        .map_err(|e| format!("approvals.answer: {e}"))?;
    // The answer's record names the client as the daemon does in `approval.resolved`.
    let by = loop {
        let answered = world.log_lines(session).into_iter().find(|l| {
            l["kind"] == "approval.answer" && l["data"]["question"] == question.question.as_str()
        });
        if let Some(a) = answered {
            break a["data"]["by"].as_str().unwrap_or_default().to_string();
        }
        if std::time::Instant::now() > deadline {
            return Err("the socket's answer was never logged".into());
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    client.close().await;
    Ok(by)
}

/// A signed-in browser visits another server on 127.0.0.1 (another port): the request carries no
/// cookie at all (a token cookie would go to every port of the host). Back on the UI's address the
/// page is still signed in, without the link (the token is kept in its own origin's storage).
async fn another_local_server_hears_nothing_of_the_token(c: &Client, ui: &str) -> Step<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let heard = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await?;
        let (mut head, mut buf) = (Vec::new(), [0u8; 4096]);
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        stream
            .write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\nelsewhere",
            )
            .await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&head).into_owned())
    });
    c.goto(&format!("http://127.0.0.1:{port}/"))
        .await
        .map_err(|e| format!("visiting another local server: {e}"))?;
    let head = tokio::time::timeout(PATIENCE, heard)
        .await
        .map_err(|_| "the other server heard nothing".to_string())?
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    if head.to_ascii_lowercase().contains("cookie") || head.contains("bearer") {
        return Err(format!(
            "another port of 127.0.0.1 received a credential:\n{head}"
        ));
    }
    c.goto(ui)
        .await
        .map_err(|e| format!("back to the UI: {e}"))?;
    find(c, "#conn-status[data-state=\"open\"]").await?;
    Ok(())
}

/// The session id the page has open (from its address, `#/s/<id>`).
async fn open_session(c: &Client) -> Step<String> {
    let url = c.current_url().await.map_err(|e| e.to_string())?;
    url.fragment()
        .and_then(|f| f.strip_prefix("/s/"))
        .map(str::to_string)
        .ok_or_else(|| format!("no session open at {url}"))
}

async fn person(c: &Client, world: &World, link: &str, provider: &str) -> Step<()> {
    // The login link's page trades its one-time code for the token and takes the code out of
    // the address bar.
    c.goto(link)
        .await
        .map_err(|e| format!("opening the login link: {e}"))?;
    find(c, "#conn-status[data-state=\"open\"]").await?;
    let url = c.current_url().await.map_err(|e| e.to_string())?;
    if url.as_str().contains("login=") {
        return Err(format!("the login code stayed in the address bar: {url}"));
    }
    let ui = link.split('#').next().unwrap_or(link);
    another_local_server_hears_nothing_of_the_token(c, ui).await?;
    click(c, "#new-session").await?;
    find(c, "#start-pane:not([hidden])").await?;
    fill(c, "#start-project", &world.project.display().to_string()).await?;
    fill(
        c,
        "#start-task",
        "Mark lines 2 and 18 of the README as changed",
    )
    .await?;
    fill(c, "#start-provider", provider).await?;
    click(c, "#start-submit").await?;
    find(c, "#session-pane:not([hidden])").await?;
    let session = open_session(c).await?;

    // The write is asked about: the exact act and its detail, answered here.
    answer(c, "fs.write", "README.md").await?;
    find(
        c,
        "#timeline li.tool[data-tool=\"write_file\"][data-result=\"ok\"]",
    )
    .await?;
    find(
        c,
        "#timeline li.tool[data-tool=\"write_file\"] .answered[data-answer=\"allow_once\"]",
    )
    .await?;
    // The command (its confined call is logged as `exec`) prints into its card as it runs, and
    // its result follows; the model's closing words arrive.
    let command = "#timeline li.tool[data-tool=\"exec\"][data-result=\"ok\"]";
    let live = text(c, &format!("{command} pre.live-output")).await?;
    let out = text(c, &format!("{command} .tool-result pre")).await?;
    if !live.contains("2:line two, changed") || !out.contains("2:line two, changed") {
        return Err(format!(
            "the command streamed {live:?} and its result shows {out:?}"
        ));
    }
    until_js(
        c,
        "the closing words",
        r#"return [...document.querySelectorAll('#timeline li.assistant')]
        .some(li => li.textContent.includes('Done: two lines of README.md changed.'))"#,
    )
    .await?;
    find(c, "#session-state[data-state=\"idle\"]").await?;
    // Model text holding markup is shown as text, never parsed.
    let shown = until_js(
        c,
        "the first reply",
        r#"const li = [...document.querySelectorAll('#timeline li.assistant')]
        .find(li => li.textContent.includes('not bold')); return li ? li.textContent : null"#,
    )
    .await?;
    if !shown
        .as_str()
        .unwrap_or("")
        .contains("<b id=\"injected\">not bold</b>")
    {
        return Err(format!("the reply with markup shows as {shown}"));
    }
    if c.find(Locator::Css("#injected")).await.is_ok() {
        return Err("the model's markup became an element".into());
    }
    let plan = text(c, "#plan li[data-status=\"in_progress\"]").await?;
    if !plan.contains("Edit README.md") {
        return Err(format!("the plan shows {plan:?}"));
    }
    let scroll = "document.querySelector('#timeline li.tool[data-tool=\"exec\"]').scrollIntoView({block: 'center'})";
    c.execute(scroll, vec![]).await.map_err(|e| e.to_string())?;
    screenshot(c, "browser-activity.png").await?;

    // Review: two hunks; keep only the first; its digest is taken and shown.
    click(c, "#tab-review").await?;
    let hunks = "#review-files section.file[data-path=\"README.md\"] .hunk";
    until_js(
        c,
        "two hunks",
        &format!("return document.querySelectorAll('{hunks}').length === 2"),
    )
    .await?;
    let whole = attr(c, "#review-digest[data-digest]", "data-digest").await?;
    click(c, &format!("{hunks}[data-index=\"1\"] input.pick-hunk")).await?;
    let digest = until_js(
        c,
        "the selection's digest",
        &format!(
            "const d = document.querySelector('#review-digest').dataset.digest; \
         const b = document.querySelector('#review-apply'); \
         return d && d !== '{whole}' && !b.disabled ? d : null"
        ),
    )
    .await?;
    let digest = digest.as_str().unwrap_or("").to_string();
    click(c, "#review-apply").await?;
    answer(c, "workspace.apply", "write 1 path(s) into").await?;
    let apply_id = attr(c, "#review-result[data-apply-id]", "data-apply-id").await?;
    let on_disk = world.read("README.md");
    if on_disk != readme(&[(2, "line two, changed")]) {
        return Err(format!("the project holds, after the apply:\n{on_disk}"));
    }
    let log = world.log_lines(&session);
    let applied = log
        .iter()
        .rev()
        .find(|l| l["kind"] == "workspace.apply")
        .ok_or("no workspace.apply in the log")?;
    if applied["data"]["digest"] != json!(digest) || applied["data"]["apply_id"] != json!(apply_id)
    {
        return Err(format!(
            "the log's apply is {applied}, the page showed digest {digest}"
        ));
    }
    find(
        c,
        &format!("#review-applies li[data-apply=\"{apply_id}\"] button[data-undo]"),
    )
    .await?;
    screenshot(c, "browser.png").await?;

    // A reload loses nothing: the page rebuilds the session from its log, undo included.
    c.refresh().await.map_err(|e| format!("reload: {e}"))?;
    find(c, "#conn-status[data-state=\"open\"]").await?;
    click(c, "#tab-review").await?;
    click(
        c,
        &format!("#review-applies li[data-apply=\"{apply_id}\"] button[data-undo=\"{apply_id}\"]"),
    )
    .await?;
    answer(c, "workspace.apply", "undo: write 1 path(s) into").await?;
    find(c, &format!("#review-result[data-undone-id=\"{apply_id}\"]")).await?;
    let on_disk = world.read("README.md");
    if on_disk != readme(&[]) {
        return Err(format!("the project holds, after the undo:\n{on_disk}"));
    }
    find(
        c,
        &format!("#review-applies li[data-apply=\"{apply_id}\"][data-undone=\"true\"]"),
    )
    .await?;

    // A follow-up from the page; its write is answered at another client (the unix socket, as a
    // terminal would): the page shows who answered.
    click(c, "#tab-activity").await?;
    fill(c, "#followup", "Write the notes too").await?;
    click(c, "#send-followup:not([disabled])").await?;
    let by = answer_from_the_socket(world, &session).await?;
    let resolved =
        format!("#approval-history li[data-resolved-by=\"{by}\"][data-answer=\"allow_once\"]");
    find(c, &resolved).await?;
    if !by.starts_with("unix:") {
        return Err(format!("the socket's answer is named {by:?}"));
    }
    let card = "#timeline li.tool[data-tool=\"write_file\"][data-result=\"ok\"] .answered";
    until_js(
        c,
        "the second write's answer in its card",
        &format!(
            "return [...document.querySelectorAll('{card}')].some(a => a.textContent.includes('{by}'))"
        ),
    )
    .await?;
    find(c, "#session-state[data-state=\"idle\"]").await?;
    // A follow-up whose command runs long, interrupted from the page.
    fill(c, "#followup", "Run the long check").await?;
    click(c, "#send-followup:not([disabled])").await?;
    find(
        c,
        "#timeline li.tool[data-tool=\"exec\"][data-status=\"running\"]",
    )
    .await?;
    click(c, "#interrupt:not([disabled])").await?;
    find(c, "#timeline li[data-turn-end=\"interrupted\"]").await?;
    find(c, "#session-state[data-state=\"idle\"]").await?;
    let scroll =
        "document.querySelector('#timeline li[data-turn-end]').scrollIntoView({block: 'end'})";
    c.execute(scroll, vec![]).await.map_err(|e| e.to_string())?;
    screenshot(c, "browser-followups.png").await?;

    // The log: every event listed, the chain verified intact, not sealed.
    click(c, "#tab-log").await?;
    find(
        c,
        "#verify-status[data-intact=\"true\"][data-seal=\"unsealed\"]",
    )
    .await?;
    let lines = world.log_lines(&session).len();
    until_js(
        c,
        "every log line listed",
        &format!("return document.querySelectorAll('#log-rows tr').length === {lines}"),
    )
    .await?;
    c.execute("window.scrollTo(0, 0)", vec![])
        .await
        .map_err(|e| e.to_string())?;
    screenshot(c, "browser-log.png").await?;
    // The page itself never failed (it shows its own uncaught errors).
    if let Ok(el) = c.find(Locator::Css("#toasts .js-error")).await {
        return Err(format!(
            "the page failed: {}",
            el.text().await.unwrap_or_default()
        ));
    }
    Ok(())
}

#[test]
fn a_person_answers_applies_one_hunk_of_two_and_undoes_it_in_chromium() {
    let Some(tools) = tools() else { return };
    let chock = chock_binary();
    let world = World::new();
    world.write("README.md", &readme(&[]));
    world.write(
        "chock.toml",
        "[[rule]]\naction = \"fs.write\"\ndecision = \"ask\"\n",
    );
    world.git(&["init", "-q", "-b", "main"]);
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "start"]);
    let script = world.outside("browser.toml", &recording());
    let provider = format!("script:{}", script.display());
    let (daemon, link) = serve(&world, &chock);
    let (driver, url) = chromedriver(&world, &tools);
    let caps = capabilities(&world, &tools);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let outcome = runtime.block_on(async {
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(caps)
            .connect(&url)
            .await
            .map_err(|e| format!("starting chromium through chromedriver: {e}"))?;
        let walked = person(&client, &world, &link, &provider).await;
        if walked.is_err() {
            let _ = screenshot(&client, "browser-failure.png").await;
            let page = client.execute("return document.body.innerText", vec![]);
            if let Ok(Value::String(page)) = page.await {
                let path = artifacts().join("browser-failure.txt");
                let _ = std::fs::write(&path, page);
                println!("the page's text: {}", path.display());
            }
        }
        let _ = client.close().await;
        walked
    });
    if let Err(why) = outcome {
        panic!(
            "{why}\n--- chock serve's stderr:\n{}\n--- chromedriver's log (tail):\n{}",
            daemon.stderr(),
            tail(&driver.stderr(), 40)
        );
    }
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
