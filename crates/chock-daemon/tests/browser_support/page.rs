//! Driving the page through WebDriver: every step waits (up to [`PATIENCE`]) for what it needs,
//! and fails with what it was waiting for, so a failure reads as the step that did not happen.

use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::{Client, Locator};
use serde_json::Value;

use super::artifacts;

/// A step's outcome: its error says what did not happen.
pub type Step<T> = Result<T, String>;

/// How long one step may take (the machine is small and shared).
pub const PATIENCE: Duration = Duration::from_secs(90);

/// Waits until `css` matches an element, and returns it.
pub async fn find(c: &Client, css: &str) -> Step<Element> {
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
pub async fn until_js(c: &Client, what: &str, script: &str) -> Step<Value> {
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

pub async fn click(c: &Client, css: &str) -> Step<()> {
    let el = find(c, css).await?;
    el.click()
        .await
        .map_err(|e| format!("clicking `{css}`: {e}"))
}

pub async fn text(c: &Client, css: &str) -> Step<String> {
    let el = find(c, css).await?;
    el.text().await.map_err(|e| format!("reading `{css}`: {e}"))
}

pub async fn attr(c: &Client, css: &str, name: &str) -> Step<String> {
    let el = find(c, css).await?;
    el.attr(name)
        .await
        .map_err(|e| format!("reading `{css}`'s {name}: {e}"))?
        .ok_or_else(|| format!("`{css}` has no {name}"))
}

pub async fn screenshot(c: &Client, name: &str) -> Step<()> {
    let png = c
        .screenshot()
        .await
        .map_err(|e| format!("screenshot: {e}"))?;
    let path = artifacts().join(name);
    std::fs::write(&path, png).map_err(|e| format!("{}: {e}", path.display()))?;
    println!("screenshot: {}", path.display());
    Ok(())
}

/// Empties the field `css` and types `text` into it.
pub async fn fill(c: &Client, css: &str, text: &str) -> Step<()> {
    let el = find(c, css).await?;
    el.clear()
        .await
        .map_err(|e| format!("clearing `{css}`: {e}"))?;
    el.send_keys(text)
        .await
        .map_err(|e| format!("typing into `{css}`: {e}"))
}
