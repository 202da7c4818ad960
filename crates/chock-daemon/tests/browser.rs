//! The browser UI in a real browser: Debian's chromium, driven through chromedriver (WebDriver),
//! against the real `chock serve --host` binary in a hermetic world. A person's whole path: the
//! one-time login link, a session started from the page on a recording whose write the project's
//! policy asks about, the question answered in the page (and who answered shown), the result
//! streaming in, review with ONE hunk of two selected and applied (the real project holds exactly
//! that hunk, and the log's apply carries the digest the page showed), a reload (the page rebuilds
//! from the log), the undo (the project is back), and the log's chain verified. Screenshots go to
//! `<target>/test-artifacts/` (`browser.png` is the review after the apply).
//!
//! Without chromium or chromedriver the test fails in CI (`CI=true`) and skips, saying why,
//! elsewhere.

mod browser_support;

use std::time::{Duration, Instant};

use browser_support::*;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

type Step<T> = Result<T, String>;

/// How long one step may take (the machine is small and shared).
const PATIENCE: Duration = Duration::from_secs(90);

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
"#,
        content = serde_json::to_string(&edited).unwrap()
    )
}

/// Waits until `css` matches an element, and returns it.
async fn find(c: &Client, css: &str) -> Step<fantoccini::elements::Element> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Ok(el) = c.find(Locator::Css(css)).await {
            return Ok(el);
        }
        if Instant::now() > deadline {
            return Err(format!("nothing matched `{css}` within {PATIENCE:?}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the script (a function body) returns something other than null or false.
async fn until_js(c: &Client, what: &str, script: &str) -> Step<Value> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let v = c
            .execute(script, vec![])
            .await
            .map_err(|e| format!("{what}: {e}"))?;
        if !(v.is_null() || v == Value::Bool(false)) {
            return Ok(v);
        }
        if Instant::now() > deadline {
            return Err(format!("{what}: not within {PATIENCE:?}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn click(c: &Client, css: &str) -> Step<()> {
    let el = find(c, css).await?;
    el.click()
        .await
        .map_err(|e| format!("clicking `{css}`: {e}"))
}

async fn text(c: &Client, css: &str) -> Step<String> {
    let el = find(c, css).await?;
    el.text().await.map_err(|e| format!("reading `{css}`: {e}"))
}

async fn attr(c: &Client, css: &str, name: &str) -> Step<String> {
    let el = find(c, css).await?;
    el.attr(name)
        .await
        .map_err(|e| format!("reading `{css}`'s {name}: {e}"))?
        .ok_or_else(|| format!("`{css}` has no {name}"))
}

async fn screenshot(c: &Client, name: &str) -> Step<()> {
    let png = c
        .screenshot()
        .await
        .map_err(|e| format!("screenshot: {e}"))?;
    let path = artifacts().join(name);
    std::fs::write(&path, png).map_err(|e| format!("{}: {e}", path.display()))?;
    println!("screenshot: {}", path.display());
    Ok(())
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

/// The session id the page has open (from its address, `#/s/<id>`).
async fn open_session(c: &Client) -> Step<String> {
    let url = c.current_url().await.map_err(|e| e.to_string())?;
    url.fragment()
        .and_then(|f| f.strip_prefix("/s/"))
        .map(str::to_string)
        .ok_or_else(|| format!("no session open at {url}"))
}

async fn person(c: &Client, world: &World, link: &str, provider: &str) -> Step<()> {
    // The login link trades its one-time code for the cookie and lands on the UI.
    c.goto(link)
        .await
        .map_err(|e| format!("opening the login link: {e}"))?;
    find(c, "#conn-status[data-state=\"open\"]").await?;
    click(c, "#new-session").await?;
    find(c, "#start-pane:not([hidden])").await?;
    let project = find(c, "#start-project").await?;
    project.clear().await.map_err(|e| e.to_string())?;
    project
        .send_keys(&world.project.display().to_string())
        .await
        .map_err(|e| e.to_string())?;
    let task = find(c, "#start-task").await?;
    task.send_keys("Mark lines 2 and 18 of the README as changed")
        .await
        .map_err(|e| e.to_string())?;
    let field = find(c, "#start-provider").await?;
    field.clear().await.map_err(|e| e.to_string())?;
    field.send_keys(provider).await.map_err(|e| e.to_string())?;
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
    let log = world.log(&session);
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

    // The log: every event listed, the chain verified intact, not sealed.
    click(c, "#tab-log").await?;
    find(
        c,
        "#verify-status[data-intact=\"true\"][data-seal=\"unsealed\"]",
    )
    .await?;
    let lines = world.log(&session).len();
    until_js(
        c,
        "every log line listed",
        &format!("return document.querySelectorAll('#log-rows tr').length === {lines}"),
    )
    .await?;
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
    let profile = world.base.join("chromium-profile");
    let caps = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": tools.chromium,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1400,1000",
                format!("--user-data-dir={}", profile.display()),
            ],
        },
    });
    let caps = caps.as_object().cloned().unwrap();
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
