//! `chock init` and `chock policy show` in the hermetic world, on a host made for the test: a
//! `PATH` holding stand-ins for cargo, node, npm, python3, make and cc but no `go`, so what the
//! table says does not depend on the machine that runs the test.

mod run_support;

use std::os::unix::fs::PermissionsExt;

use run_support::{World, text};

/// A world whose project holds every stack's marker files, and a `PATH` of stand-ins.
fn world() -> (World, String) {
    let w = World::new();
    for (file, body) in [
        ("Cargo.toml", "[package]\nname = \"x\"\n"),
        ("package.json", "{}\n"),
        ("package-lock.json", "{}\n"),
        ("requirements.txt", "\n"),
        ("go.mod", "module x\n"),
        ("Makefile", "all:\n"),
        ("flake.nix", "{}\n"),
    ] {
        w.write(file, body);
    }
    let bin = w.base.join("host-bin");
    std::fs::create_dir_all(&bin).unwrap();
    for program in ["cargo", "rustc", "node", "npm", "python3", "make", "cc"] {
        let p = bin.join(program);
        std::fs::write(&p, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (w, bin.display().to_string())
}

fn run(w: &World, path: &str, args: &[&str]) -> String {
    let out = w.chock_with_env(args, &[("PATH", path)]);
    format!(
        "status: {}\n--- stdout\n{}--- stderr\n{}",
        out.status.code().map_or("signal".into(), |c| c.to_string()),
        text(&out.stdout),
        text(&out.stderr)
    )
}

#[test]
fn init_names_the_toolchains_this_host_has_and_never_overwrites() {
    let (w, path) = world();
    let first = run(&w, &path, &["init"]);
    let written = w.read("chock.toml");
    let second = run(&w, &path, &["init"]);
    w.settings().bind(|| {
        insta::assert_snapshot!("init_first", first);
        insta::assert_snapshot!("init_written", written);
        insta::assert_snapshot!("init_second", second);
    });
    assert_eq!(
        w.read("chock.toml"),
        written,
        "the second init changed the table"
    );

    // The table it wrote loads, and so does it with every suggested rule uncommented.
    let lint = run(&w, &path, &["policy", "lint"]);
    assert!(lint.starts_with("status: 0"), "{lint}");
    let uncommented: String = written
        .lines()
        .map(|l| match l.strip_prefix("# ") {
            Some(rest) if rest.starts_with("[[rule]]") || rest.contains(" = ") => rest,
            _ => l,
        })
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(uncommented.contains("\n[[rule]]\n"), "{uncommented}");
    std::fs::write(w.project.join("chock.toml"), uncommented).unwrap();
    let lint = run(&w, &path, &["policy", "lint"]);
    assert!(lint.starts_with("status: 0"), "{lint}");
}

#[test]
fn policy_show_prints_what_each_toolchain_expanded_to() {
    let (w, path) = world();
    w.write("chock.toml", "[sandbox]\ntoolchains = [\"rust\", \"c\"]\n");
    let shown = run(&w, &path, &["policy", "show"]);
    w.settings()
        .bind(|| insta::assert_snapshot!("policy_show", shown));
}

#[test]
fn an_unknown_toolchain_names_the_file_the_field_and_the_known_ones() {
    let (w, path) = world();
    w.write("chock.toml", "[sandbox]\ntoolchains = [\"cobol\"]\n");
    let shown = run(&w, &path, &["policy", "show"]);
    w.settings()
        .bind(|| insta::assert_snapshot!("unknown_toolchain", shown));
}

#[test]
fn policy_show_says_which_file_named_each_toolchain() {
    let (w, path) = world();
    w.write("chock.toml", "[sandbox]\ntoolchains = [\"c\"]\n");
    w.config_toml("[sandbox]\ntoolchains = [\"rust\", \"c\"]\n");
    let shown = run(&w, &path, &["policy", "show"]);
    w.settings()
        .bind(|| insta::assert_snapshot!("policy_show_with_user_config", shown));
}

#[test]
fn a_toolchain_in_the_persons_config_is_held_to_the_same_path_checks() {
    let (w, path) = world();
    // CARGO_HOME inside Chock's own configuration directory: rust's caches would be bound
    // writable there, beside config.toml itself.
    let cargo_home = w.config.join("chock/cargo");
    let config = w.config_toml("[sandbox]\ntoolchains = [\"rust\"]\n");
    let out = w.chock_with_env(
        &["policy", "show"],
        &[
            ("PATH", &path),
            ("CARGO_HOME", &cargo_home.display().to_string()),
        ],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("{}:2:15: ", config.display())),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "sandbox.toolchains: `rust` expands to {} (write)",
            cargo_home.join("registry").display()
        )),
        "{err}"
    );
}

/// `go` as a stand-in: prints the build cache it was given, writes `$1` there, and prints the file
/// `$2` if the call can read it.
const FAKE_GO: &str = "#!/bin/sh\nprintf '%s\\n' \"$GOCACHE\"\nprintf '%s' \"$1\" > \"$GOCACHE/entry\" \
                       || echo NOT-WRITTEN\n[ -n \"$2\" ] && cat \"$2\" 2>/dev/null && echo SAW-OTHER\nexit 0\n";

#[test]
fn two_projects_do_not_share_go_s_build_cache() {
    let w = World::new();
    let bin = w.base.join("sdk/go/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("go"), FAKE_GO).unwrap();
    std::fs::set_permissions(bin.join("go"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let other = w.base.join("other/project");
    std::fs::create_dir_all(&other).unwrap();
    let table = "[sandbox]\ntoolchains = [\"go\"]\n";
    w.write("chock.toml", table);
    std::fs::write(other.join("chock.toml"), table).unwrap();
    let go = |dir: &std::path::Path, args: &[&str]| {
        let mut argv = vec!["exec", "--", "go"];
        argv.extend_from_slice(args);
        let out = w
            .command(&argv)
            .current_dir(dir)
            .env("PATH", &path)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let out_a = go(&w.project, &["one"]);
    let out_b = go(&other, &["two"]);
    let dir_a = std::path::PathBuf::from(out_a.lines().next().unwrap());
    let dir_b = std::path::PathBuf::from(out_b.lines().next().unwrap());
    assert_ne!(dir_a, dir_b, "{out_a}{out_b}");
    assert!(dir_a.starts_with(w.cache.join("chock/projects")), "{out_a}");
    // Each call wrote its own project's copy, on the host, and not the host's own cache.
    assert_eq!(std::fs::read_to_string(dir_a.join("entry")).unwrap(), "one");
    assert_eq!(std::fs::read_to_string(dir_b.join("entry")).unwrap(), "two");
    assert!(!w.home.join(".cache/go-build/entry").exists());
    // A call of one project cannot read the other's copy.
    let entry_b = dir_b.join("entry").display().to_string();
    let seen = go(&w.project, &["three", &entry_b]);
    assert!(!seen.contains("SAW-OTHER"), "{seen}");
    assert_eq!(
        std::fs::read_to_string(dir_a.join("entry")).unwrap(),
        "three"
    );
}
