//! git's configuration as one invocation sees it: the files the caller read, then the environment's
//! `GIT_CONFIG_COUNT` pairs, then `GIT_CONFIG_PARAMETERS`, then `-c`/`--config-env` — the order
//! `git help config` gives, later entries winning.

/// A configuration that cannot be read the way git would read it (git itself would stop).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A key without a section (`-c foo=bar`).
    #[error("config key `{0}` has no section")]
    NoSection(String),
    /// `GIT_CONFIG_COUNT` is not a number, or names a pair that is missing.
    #[error("GIT_CONFIG_COUNT: {0}")]
    Count(String),
    /// `GIT_CONFIG_PARAMETERS` is not the quoted list git writes.
    #[error("GIT_CONFIG_PARAMETERS is not a quoted list of key=value: {0}")]
    Parameters(String),
}

impl From<ConfigError> for String {
    fn from(err: ConfigError) -> String {
        err.to_string()
    }
}

/// The layered configuration. Entries before `invocation` came from files; the rest were set by this
/// invocation (its environment or its options), which is what may not install a program.
#[derive(Debug, Clone, Default)]
pub struct Config {
    entries: Vec<(String, Option<String>)>,
    invocation: usize,
}

impl Config {
    /// Files, then the environment's entries, then the command line's.
    pub fn layered(
        files: &[(String, Option<String>)],
        env: &[(String, String)],
        cli: &[(String, Option<String>)],
    ) -> Result<Config, ConfigError> {
        let mut entries = Vec::new();
        for (key, value) in files {
            entries.push((canonical(key)?, value.clone()));
        }
        let invocation = entries.len();
        let mut config = Config {
            entries,
            invocation,
        };
        config.push_cli(&count_pairs(env)?)?;
        if let Some(params) = get_env(env, "GIT_CONFIG_PARAMETERS") {
            config.push_cli(&parse_parameters(params)?)?;
        }
        config.push_cli(cli)?;
        Ok(config)
    }

    /// Adds entries set by this invocation (an alias's own `-c` lands here too).
    pub fn push_cli(&mut self, entries: &[(String, Option<String>)]) -> Result<(), ConfigError> {
        for (key, value) in entries {
            self.entries.push((canonical(key)?, value.clone()));
        }
        Ok(())
    }

    /// The last value of `key` (already canonical), `Some(None)` for a key set without a value.
    pub fn get(&self, key: &str) -> Option<Option<&str>> {
        self.entries
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_deref())
    }

    /// The last value of `key` as text.
    pub fn value(&self, key: &str) -> Option<&str> {
        self.get(key).flatten()
    }

    /// Every entry, in order: `(canonical key, value)`.
    pub fn entries(&self) -> &[(String, Option<String>)] {
        &self.entries
    }

    /// The expansion of alias `name`, if one is set.
    pub fn alias(&self, name: &str) -> Option<String> {
        let key = canonical(&format!("alias.{name}")).ok()?;
        self.value(&key).map(str::to_owned)
    }

    /// Refuses an entry set by this invocation that makes git run a program of the invocation's
    /// choosing (a pager, an editor, an ssh command, a hook directory, a filter, …).
    pub fn check_programs(&self) -> Result<(), String> {
        for (key, value) in &self.entries[self.invocation..] {
            let value = value.as_deref().unwrap_or("");
            if runs_a_program(key) && !inert(key, value) {
                return Err(format!(
                    "the invocation sets `{key}` (`{value}`), which makes git run a program or read more configuration"
                ));
            }
        }
        Ok(())
    }
}

fn get_env<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
    env.iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// `section.subsection.name` with the section and the name lower-cased, as git compares them; the
/// subsection keeps its case.
pub fn canonical(key: &str) -> Result<String, ConfigError> {
    let (Some(first), Some(last)) = (key.find('.'), key.rfind('.')) else {
        return Err(ConfigError::NoSection(key.to_owned()));
    };
    if first == 0 || last + 1 == key.len() {
        return Err(ConfigError::NoSection(key.to_owned()));
    }
    let section = key[..first].to_ascii_lowercase();
    let name = key[last + 1..].to_ascii_lowercase();
    if first == last {
        Ok(format!("{section}.{name}"))
    } else {
        Ok(format!("{section}{}{name}", &key[first..=last]))
    }
}

/// Keys whose value is a program git runs. `*` stands for any subsection.
const PROGRAM_KEYS: &[&str] = &[
    "core.sshcommand",
    "core.pager",
    "core.editor",
    "core.askpass",
    "core.fsmonitor",
    "core.hookspath",
    "core.gitproxy",
    "core.alternaterefscommand",
    "diff.external",
    "sequence.editor",
    "gpg.program",
    "credential.helper",
    "uploadpack.packobjectshook",
    "interactive.difffilter",
    "include.path",
    "init.templatedir",
    "protocol.allow",
    "diff.*.command",
    "diff.*.textconv",
    "merge.*.driver",
    "filter.*.clean",
    "filter.*.smudge",
    "filter.*.process",
    "credential.*.helper",
    "gpg.*.program",
    "remote.*.receivepack",
    "remote.*.uploadpack",
    "includeif.*.path",
    "mergetool.*.cmd",
    "difftool.*.cmd",
    "protocol.*.allow",
];

fn runs_a_program(key: &str) -> bool {
    // `pager.<command>` is a two-part key whose name is the command.
    if key.starts_with("pager.") {
        return true;
    }
    let (section, name) = match (key.find('.'), key.rfind('.')) {
        (Some(f), Some(l)) => (&key[..f], &key[l + 1..]),
        _ => return false,
    };
    let has_subsection = key.find('.') != key.rfind('.');
    PROGRAM_KEYS.iter().any(|pattern| {
        let mut parts = pattern.split('.');
        let (section_part, middle_part, name_part) = (parts.next(), parts.next(), parts.next());
        match (section_part, middle_part, name_part) {
            (Some(s), Some(n), None) => !has_subsection && s == section && n == name,
            (Some(s), Some("*"), Some(n)) => has_subsection && s == section && n == name,
            _ => false,
        }
    })
}

/// A pager or editor that runs nothing of the invocation's choosing, or a `pager.<cmd>` boolean.
fn inert(key: &str, value: &str) -> bool {
    let pagerish = key.starts_with("pager.")
        || matches!(key, "core.pager" | "core.editor" | "sequence.editor");
    let boolean = key.starts_with("pager.")
        && matches!(
            value.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "1" | "0"
        );
    pagerish && (boolean || matches!(value.trim(), "" | "cat" | "true" | ":"))
}

/// `GIT_CONFIG_COUNT` pairs: `GIT_CONFIG_KEY_<n>`/`GIT_CONFIG_VALUE_<n>` for n below the count.
fn count_pairs(env: &[(String, String)]) -> Result<Vec<(String, Option<String>)>, ConfigError> {
    let Some(count) = get_env(env, "GIT_CONFIG_COUNT") else {
        return Ok(Vec::new());
    };
    if count.is_empty() {
        return Ok(Vec::new());
    }
    let n: usize = count
        .parse()
        .map_err(|_| ConfigError::Count(format!("`{count}` is not a count")))?;
    let mut pairs = Vec::new();
    for i in 0..n {
        let key = get_env(env, &format!("GIT_CONFIG_KEY_{i}"))
            .ok_or_else(|| ConfigError::Count(format!("GIT_CONFIG_KEY_{i} is missing")))?;
        let value = get_env(env, &format!("GIT_CONFIG_VALUE_{i}"))
            .ok_or_else(|| ConfigError::Count(format!("GIT_CONFIG_VALUE_{i} is missing")))?;
        pairs.push((key.to_owned(), Some(value.to_owned())));
    }
    Ok(pairs)
}

/// One single-quoted word, as git's own quoting writes it: `'…'`, with a quote inside written as
/// `'\''` (and `!` as `'\!'`). Returns the word and the rest.
fn dequote_step(text: &str) -> Option<(String, &str)> {
    let mut rest = text.strip_prefix('\'')?;
    let mut word = String::new();
    loop {
        let end = rest.find('\'')?;
        word.push_str(&rest[..end]);
        rest = &rest[end + 1..];
        // `\'` or `\!` then a reopening quote continues the same word.
        let mut chars = rest.chars();
        match (chars.next(), chars.next(), chars.next()) {
            (Some('\\'), Some(c @ ('\'' | '!')), Some('\'')) => {
                word.push(c);
                rest = &rest[3..];
            }
            _ => return Some((word, rest)),
        }
    }
}

/// `GIT_CONFIG_PARAMETERS`: `'key'='value'` (or `'key'` alone, or the older `'key=value'`), separated
/// by spaces.
pub fn parse_parameters(text: &str) -> Result<Vec<(String, Option<String>)>, ConfigError> {
    let bad = || ConfigError::Parameters(text.to_owned());
    let mut out = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let (word, after) = dequote_step(rest).ok_or_else(bad)?;
        if let Some(after_eq) = after.strip_prefix('=') {
            let (value, after) = dequote_step(after_eq).ok_or_else(bad)?;
            out.push((word, Some(value)));
            rest = after;
        } else {
            match word.split_once('=') {
                Some((k, v)) => out.push((k.to_owned(), Some(v.to_owned()))),
                None => out.push((word, None)),
            }
            rest = after;
        }
        if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
            return Err(bad());
        }
        rest = rest.trim_start();
    }
    Ok(out)
}

/// Splits an alias the way git does: words separated by spaces, quoted with `'…'` or `"…"`, a
/// backslash escaping the next character. `None` for an unbalanced quote.
pub fn split_alias(text: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (Some(q), c) if c == q => quote = None,
            (Some('\''), c) => word.push(c),
            (_, '\\') => {
                word.push(chars.next()?);
                in_word = true;
            }
            (_, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return None;
    }
    if in_word {
        words.push(word);
    }
    Some(words)
}
