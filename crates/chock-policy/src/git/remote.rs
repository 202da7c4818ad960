//! Which remote a fetch, pull, push, clone or ls-remote reaches, and its URL as git would rewrite it
//! (`remote.<name>.url`, `remote.<name>.pushurl`, `url.<base>.insteadOf`, `url.<base>.pushInsteadOf`).
//! The host shows this URL in the question; it does not trust it to pick where a credential goes.

use super::Config;

/// Where an act that reaches another host goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The configured remote's name, when the argument named one.
    pub remote: Option<String>,
    /// The URL(s) git will use, after rewriting. A remote may name several; git uses each.
    pub urls: Vec<String>,
    /// The refspecs written after the remote (`main`, `HEAD:refs/heads/x`).
    pub refspecs: Vec<String>,
    /// The ssh command the repository's configuration sets (`core.sshCommand`), shown to the person.
    pub ssh_command: Option<String>,
}

/// Is it a push (which reads `pushurl` and `pushInsteadOf`) or a read?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// A fetch, pull, clone or ls-remote: `url` and `insteadOf`.
    Read,
    /// A push: `pushurl`, `pushInsteadOf`, then `insteadOf`.
    Push,
}

/// The default remote when none is written: `git help config` (`branch.<name>.remote`,
/// `branch.<name>.pushRemote`, `remote.pushDefault`), else `origin`.
pub fn default_remote(config: &Config, branch: Option<&str>, direction: Direction) -> String {
    let branch_key = |name: &str| branch.map(|b| format!("branch.{b}.{name}"));
    let mut candidates = Vec::new();
    if direction == Direction::Push {
        candidates.extend(branch_key("pushremote"));
        candidates.push("remote.pushdefault".to_owned());
    }
    candidates.extend(branch_key("remote"));
    candidates
        .iter()
        .find_map(|key| config.value(key))
        .map_or_else(|| "origin".to_owned(), str::to_owned)
}

/// Resolves `repo` (a remote's name, or a URL or path) into a [`Target`].
pub fn resolve(config: &Config, repo: &str, refspecs: Vec<String>, direction: Direction) -> Target {
    let values = |key: String| -> Vec<String> {
        config
            .entries()
            .iter()
            .filter(|(k, _)| *k == key)
            .filter_map(|(_, v)| v.clone())
            .collect()
    };
    let urls = values(format!("remote.{repo}.url"));
    let ssh_command = config.value("core.sshcommand").map(str::to_owned);
    if urls.is_empty() {
        // Not a configured remote: the argument is itself the URL.
        let url = rewrite(config, repo, direction);
        return Target {
            remote: None,
            urls: vec![url],
            refspecs,
            ssh_command,
        };
    }
    let push_urls = values(format!("remote.{repo}.pushurl"));
    let urls = if direction == Direction::Push && !push_urls.is_empty() {
        // An explicit pushurl is rewritten by insteadOf only, never by pushInsteadOf.
        push_urls
            .iter()
            .map(|u| rewrite(config, u, Direction::Read))
            .collect()
    } else if direction == Direction::Push {
        urls.iter().map(|u| rewrite(config, u, direction)).collect()
    } else {
        // A fetch reads from the first URL only.
        vec![rewrite(config, &urls[0], direction)]
    };
    Target {
        remote: Some(repo.to_owned()),
        urls,
        refspecs,
        ssh_command,
    }
}

/// The longest matching `url.<base>.<key>` prefix, replaced by its base.
fn longest(config: &Config, url: &str, key: &str) -> Option<String> {
    let mut best: Option<(&str, &str)> = None;
    for (k, v) in config.entries() {
        let Some(base) = k
            .strip_prefix("url.")
            .and_then(|rest| rest.strip_suffix(key))
            .and_then(|rest| rest.strip_suffix('.'))
        else {
            continue;
        };
        let Some(prefix) = v.as_deref() else { continue };
        if url.starts_with(prefix) && best.is_none_or(|(_, p)| prefix.len() > p.len()) {
            best = Some((base, prefix));
        }
    }
    best.map(|(base, prefix)| format!("{base}{}", &url[prefix.len()..]))
}

/// A URL as git rewrites it: for a push, `pushInsteadOf` first, then `insteadOf`.
fn rewrite(config: &Config, url: &str, direction: Direction) -> String {
    if direction == Direction::Push
        && let Some(pushed) = longest(config, url, "pushinsteadof")
    {
        return pushed;
    }
    longest(config, url, "insteadof").unwrap_or_else(|| url.to_owned())
}
