//! The environment a call gets: the host's, scrubbed to an allowlist, with the sandbox's home.

use std::path::Path;

/// Variables that may reach a tool call from the host environment, before the policy adds its own.
/// Everything else (API keys, SSH agent sockets, the user's shell settings) is dropped.
pub const ENV_ALLOWLIST: &[&str] = &["PATH", "LANG", "TERM", "TZ"];

/// The PATH a call gets when the host has none (or an empty one).
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The environment a call gets: [`ENV_ALLOWLIST`] plus `extra` names from `host`, and `HOME` set to
/// the sandbox home. `PATH` falls back to [`DEFAULT_PATH`]. `HOME` from the host never passes (it is
/// always the sandbox's).
pub fn scrub_env(host: &[(String, String)], extra: &[&str], home: &Path) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (k, v) in host {
        let allowed = ENV_ALLOWLIST.contains(&k.as_str()) || extra.contains(&k.as_str());
        if allowed && k != "HOME" && !out.iter().any(|(o, _)| o == k) {
            out.push((k.clone(), v.clone()));
        }
    }
    match out.iter_mut().find(|(k, _)| k == "PATH") {
        Some((_, v)) if !v.is_empty() => {}
        Some((_, v)) => *v = DEFAULT_PATH.to_string(),
        None => out.push(("PATH".into(), DEFAULT_PATH.into())),
    }
    out.push(("HOME".into(), home.to_string_lossy().into_owned()));
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    #[test]
    fn scrub_keeps_only_the_allowlist_and_sets_home() {
        let host = env(&[
            ("PATH", "/usr/bin"),
            ("ANTHROPIC_API_KEY", "sk-secret"),
            ("HOME", "/home/u"),
            ("SSH_AUTH_SOCK", "/run/user/1000/ssh"),
            ("LANG", "C.UTF-8"),
            ("CARGO_TERM_COLOR", "always"),
        ]);
        let out = scrub_env(&host, &["CARGO_TERM_COLOR"], Path::new("/home/u"));
        assert_eq!(
            out,
            env(&[
                ("CARGO_TERM_COLOR", "always"),
                ("HOME", "/home/u"),
                ("LANG", "C.UTF-8"),
                ("PATH", "/usr/bin"),
            ])
        );
    }

    #[test]
    fn scrub_supplies_a_path() {
        let out = scrub_env(&[], &[], Path::new("/h"));
        assert_eq!(out, env(&[("HOME", "/h"), ("PATH", DEFAULT_PATH)]));
    }
}
