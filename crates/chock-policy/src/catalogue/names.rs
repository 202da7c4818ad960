//! The catalogue's rows: every action name this build defines, why it exists, and whether code asks it.

/// One row of the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The template, e.g. `net.connect.<host>.<port>`.
    pub template: &'static str,
    /// Why the act has its own name: what it does and what it can reach.
    pub why: &'static str,
    /// Whether some code asks this name today.
    pub state: State,
}

/// Whether an action name is asked by any code in this build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Some caller builds this name and asks the table: a rule on it takes effect.
    Asked,
    /// The name is reserved for a caller that is not built yet; the text says which. A rule on it is
    /// accepted (so a table written for the future loads) but has no effect, and lint says so.
    Pending(&'static str),
}

/// What `allow` means for `secret.password.<host>`: the grant is a secret only a person has, so no
/// decision hands one out without a person typing it.
pub const PASSWORD_ALLOW: &str = "a password is never handed out from a store: `allow` puts git's prompt to a person exactly as `ask` does (the prompt is the question, the typed answer the password); only `deny` changes what happens (nobody is asked and git gets no password)";

/// Every action name this build defines.
pub const CATALOGUE: &[Entry] = &[
    // Running programs. The class says where the program was found; the exec tool classifies the path.
    e(
        "exec.system.<program>",
        "a program from the system's own directories, bound read-only into the sandbox",
    ),
    e(
        "exec.workspace.<program>",
        "a program inside the session's own workspace copy",
    ),
    e(
        "exec.extra.<program>",
        "a program under a path the project declared in [sandbox]",
    ),
    e(
        "exec.devshell.<program>",
        "a program from the dev shell closure the session started with",
    ),
    e(
        "exec.nix.store.<program>",
        "a nix store path the session did not start with",
    ),
    // Nix on the host, outside the sandbox (docs/nix.md).
    e(
        "nix.devshell",
        "evaluating and building the project's flake dev shell with nix on the host, at the session's first call",
    ),
    e(
        "nix.build",
        "building or fetching one more program the agent asked for with nix on the host (provision_program)",
    ),
    e(
        "exec.unparsed",
        "a program path that cannot be resolved lexically (`..`, a shell expansion), so no class fits",
    ),
    // Files, inside the sandbox's view.
    e("fs.read", "reading a file the sandbox can see"),
    e(
        "fs.write",
        "writing a file in the session's workspace or a declared write path",
    ),
    // The network, always through the host's broker.
    e(
        "net.fetch.<host>",
        "reading a URL on this host through the broker (host reversed: com.github.api)",
    ),
    e(
        "net.connect.<host>.<port>",
        "a raw connection to this host and port through the broker",
    ),
    // git, as the host classifies what the git shim inside a call sends it (crate::git,
    // docs/git.md): asked by chock-session's channel handler for every git invocation.
    g("git.status", "reads the workspace repository"),
    g("git.log", "reads the workspace repository"),
    g("git.diff", "reads the workspace repository"),
    g("git.show", "reads the workspace repository"),
    g("git.blame", "reads the workspace repository"),
    g("git.grep", "reads the workspace repository"),
    g(
        "git.inspect",
        "reads the workspace repository with a plumbing command (rev-parse, ls-files, cat-file, …)",
    ),
    g(
        "git.help",
        "prints git's own help or version; touches no repository",
    ),
    g("git.init", "creates a repository inside the workspace"),
    g("git.add", "stages in the workspace repository"),
    g("git.rm", "removes files in the workspace repository"),
    g("git.mv", "moves files in the workspace repository"),
    g("git.restore", "restores files in the workspace repository"),
    g("git.commit", "records a commit in the workspace repository"),
    g(
        "git.apply",
        "applies a patch to the workspace copy or its index",
    ),
    g(
        "git.am",
        "records commits from mailbox patches in the workspace repository",
    ),
    g(
        "git.format_patch",
        "writes commits of the workspace repository out as patch files",
    ),
    g(
        "git.checkout",
        "switches or restores in the workspace repository",
    ),
    g(
        "git.switch",
        "switches branches in the workspace repository",
    ),
    g("git.branch.list", "lists branches"),
    g(
        "git.branch.create",
        "creates a branch in the workspace repository",
    ),
    g(
        "git.branch.rename",
        "renames or copies a branch in the workspace repository",
    ),
    g(
        "git.branch.delete",
        "deletes a branch in the workspace repository",
    ),
    g(
        "git.tag",
        "lists, creates or deletes a tag in the workspace repository",
    ),
    g("git.merge", "merges in the workspace repository"),
    g("git.rebase", "rewrites commits in the workspace repository"),
    g(
        "git.cherry_pick",
        "copies commits in the workspace repository",
    ),
    g(
        "git.revert",
        "records a reverting commit in the workspace repository",
    ),
    g(
        "git.reset",
        "moves a branch head in the workspace repository",
    ),
    g("git.stash", "stashes changes in the workspace repository"),
    g(
        "git.clean",
        "deletes untracked files in the workspace repository",
    ),
    g(
        "git.maintenance",
        "repacks or prunes the workspace repository's objects (maintenance, gc)",
    ),
    g("git.config.read", "reads the repository's configuration"),
    g(
        "git.config",
        "changes the workspace repository's configuration (hooks, commands run later)",
    ),
    g(
        "git.remote.list",
        "lists the remotes the workspace repository names",
    ),
    g(
        "git.remote.add",
        "adds a remote to the workspace repository's list",
    ),
    g(
        "git.remote.set_url",
        "changes where a remote of the workspace repository points",
    ),
    g(
        "git.remote.rename",
        "renames a remote in the workspace repository's list",
    ),
    g(
        "git.remote.remove",
        "removes a remote from the workspace repository's list",
    ),
    g("git.fetch", "reaches another host to read from a remote"),
    g(
        "git.fetch.<host>",
        "lets a fetch or pull that gets a credential reach a host that no remote of the host's own repository configuration names (only a project or org rule naming the host exactly does)",
    ),
    g(
        "git.pull",
        "reaches another host to read from a remote, then merges",
    ),
    g("git.clone", "reaches another host to copy a repository"),
    g(
        "git.ls_remote",
        "reaches another host to list a remote's refs",
    ),
    g(
        "git.submodule",
        "may clone or fetch submodules from other hosts",
    ),
    g("git.push", "reaches another host and writes to a remote"),
    g(
        "git.push.<host>",
        "lets a push reach a host that no remote of the host's own repository configuration names (only a project or org rule naming the host exactly does)",
    ),
    g(
        "git.unknown",
        "a git invocation the shim cannot classify (an unknown subcommand, a shell alias, swapped programs)",
    ),
    // Acts that carry work out of the sandbox, or change what the session may do.
    e(
        "workspace.apply",
        "writes the session's reviewed changes into the real project",
    ),
    e(
        "workspace.adopt",
        "makes the session's workspace the real project",
    ),
    e(
        "ratchet.widen_action",
        "the agent asks to undo a restriction it placed on itself",
    ),
    e(
        "web.search",
        "a search query leaves the host to a search engine",
    ),
    e(
        "subagent.spawn",
        "starts a child agent session, bounded by [subagents]",
    ),
    e(
        "subagent.take",
        "writes a finished child session's changes into this session's workspace",
    ),
    e(
        "secret.password.<host>",
        "hands a password a person types at git's prompt to one call (`chock askpass`, for an approved push, fetch or pull from that host)",
    ),
    // The agent's notes kept between sessions of a project (docs/memory.md).
    e(
        "memory.read",
        "reads the notes the agent kept in earlier sessions of this project",
    ),
    e(
        "memory.write",
        "writes a note that outlives the session, shown to later sessions of this project",
    ),
    // Tools served by others.
    e(
        "mcp.<server>.tool.<tool>",
        "one call of an MCP server's tool",
    ),
    e("mcp.<server>.network", "an MCP server reaching the network"),
    e(
        "mcp.<server>.sampling",
        "an MCP server asking Chock to call the model (charged to the session)",
    ),
    e(
        "plugin.<plugin>.tool.<tool>",
        "one call of a WebAssembly plugin's tool",
    ),
    e(
        "plugin.<plugin>.network",
        "a plugin importing Chock's fetch at all (each fetch is then its own net.fetch.<host>)",
    ),
];

const fn e(template: &'static str, why: &'static str) -> Entry {
    Entry {
        template,
        why,
        state: State::Asked,
    }
}

/// A name the host asks for a git invocation the git shim sends it.
const fn g(template: &'static str, why: &'static str) -> Entry {
    Entry {
        template,
        why,
        state: State::Asked,
    }
}
