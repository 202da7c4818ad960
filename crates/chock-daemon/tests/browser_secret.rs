//! The browser UI's answer to a secret question, in a real chromium through chromedriver against
//! the real `chock serve`: the page's own question card (`approvals.js`, as served) gives git's
//! password a password field with autocomplete off and no note beside it, sends what is typed and
//! empties the field, and holds it nowhere after. Built only with the crate's `browser` feature,
//! like `tests/browser.rs`.

mod browser_support;

use browser_support::page::*;
use browser_support::*;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::Value;

/// The password typed in [`a_secret_question_is_typed_into_a_password_field_in_chromium`].
const TYPED: &str = "hunter2-Battery";

/// The page's own question card (`approvals.js`, as served) for a secret question and for a free
/// one, in a list of its own: the secret's field is a password input with autocomplete off and no
/// note beside it; what is typed there is sent as the reply and the field emptied; the resolved
/// entry and every element the card made hold the password nowhere.
async fn secret_card(c: &Client, link: &str) -> Step<()> {
    c.goto(link)
        .await
        .map_err(|e| format!("opening the login link: {e}"))?;
    find(c, "#conn-status[data-state=\"open\"]").await?;
    let made = c
        .execute_async(
            r#"const done = arguments[arguments.length - 1];
            import("/approvals.js").then(({ Approvals }) => {
              const box = document.createElement("div");
              box.id = "secret-test";
              const [section, list, history, count] =
                ["section", "div", "ol", "span"].map((t) => document.createElement(t));
              list.id = "secret-list";
              history.id = "secret-history";
              box.append(section, list, history, count);
              document.body.prepend(box);
              const sent = [];
              const conn = { call: async (m, p) => { sent.push([m, JSON.stringify(p)]); return {}; } };
              const a = new Approvals({ section, list, history, count, conn,
                label: (s) => s, changed: () => {} });
              const q = (question, secret) => ({ session: "s-1", question, seq: 1, call_id: "c1",
                answers: secret ? ["reply", "deny"] : ["reply"], answerable: true, action: null,
                decision: null, decided_by: null, asked: "person", secret,
                what: "git asks for the password to push to http://alice@127.0.0.1:8080/r.git" });
              a.asked(q("q-1", true));
              a.asked(q("q-2", false));
              window.secretTest = { a, sent, box };
              done(true);
            }).catch((e) => done(String(e)));"#,
            vec![],
        )
        .await
        .map_err(|e| format!("loading approvals.js: {e}"))?;
    if made != Value::Bool(true) {
        return Err(format!("approvals.js did not load: {made}"));
    }
    let field = "#secret-list article[data-question=\"q-1\"] .reply";
    let kind = attr(c, field, "type").await?;
    let autocomplete = attr(c, field, "autocomplete").await?;
    if kind != "password" || autocomplete != "off" {
        return Err(format!(
            "the secret's field is type={kind:?} autocomplete={autocomplete:?}"
        ));
    }
    let free = "#secret-list article[data-question=\"q-2\"] textarea.reply";
    find(c, free).await?;
    if c.find(Locator::Css(
        "#secret-list article[data-question=\"q-1\"] input.note",
    ))
    .await
    .is_ok()
    {
        return Err("the secret's card has a free note field beside it".into());
    }
    fill(c, field, TYPED).await?;
    click(
        c,
        "#secret-list article[data-question=\"q-1\"] button[data-answer=\"reply\"]",
    )
    .await?;
    let after = until_js(
        c,
        "the reply sent",
        r#"const t = window.secretTest; if (t.sent.length === 0) return null;
        t.a.resolved({ session: "s-1", question: "q-1", by: "web:test", answer: "reply" });
        return { sent: t.sent, value: t.box.querySelector("input.reply") ?
          t.box.querySelector("input.reply").value : "(gone)", html: t.box.outerHTML,
          text: document.body.innerText };"#,
    )
    .await?;
    let sent: Value = serde_json::from_str(after["sent"][0][1].as_str().unwrap_or("null"))
        .map_err(|e| format!("the answer sent: {e}"))?;
    if after["sent"][0][0] != "approvals.answer" || sent["reply"] != TYPED {
        return Err(format!("the answer sent was {}", after["sent"]));
    }
    let html = after["html"].as_str().unwrap_or_default();
    let text = after["text"].as_str().unwrap_or_default();
    if html.contains(TYPED) || text.contains(TYPED) {
        return Err(format!("the page still holds the password: {html}"));
    }
    if !html.contains("data-resolved-by=\"web:test\"") {
        return Err(format!("no resolved entry: {html}"));
    }
    Ok(())
}

#[test]
fn a_secret_question_is_typed_into_a_password_field_in_chromium() {
    let Some(tools) = tools() else { return };
    let chock = chock_binary();
    let world = World::new();
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
        let walked = secret_card(&client, &link).await;
        if walked.is_err() {
            let _ = screenshot(&client, "browser-secret-failure.png").await;
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
