use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::toolchains::PROFILES;

/// A fake home with rustup's layout: `~/.cargo/bin/cargo` (a link to `rustup`, as rustup makes
/// it), `~/.rustup/toolchains`, and a `PATH` that finds it.
struct Fake {
    _dir: tempfile::TempDir,
    home: PathBuf,
    vars: HashMap<&'static str, OsString>,
}

fn executable(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn fake() -> Fake {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().canonicalize().unwrap().join("home");
    executable(&home.join(".cargo/bin/rustup"));
    std::os::unix::fs::symlink("rustup", home.join(".cargo/bin/cargo")).unwrap();
    std::fs::create_dir_all(home.join(".rustup/toolchains/stable/bin")).unwrap();
    std::fs::write(home.join(".cargo/credentials.toml"), "token = \"x\"").unwrap();
    let mut vars = HashMap::new();
    let path = format!("{}:/usr/bin:/bin", home.join(".cargo/bin").display());
    vars.insert("PATH", OsString::from(path));
    Fake {
        _dir: dir,
        home,
        vars,
    }
}

fn run(fake: &Fake, ctx: &HostPaths, text: &str) -> Result<SandboxConfig, PolicyError> {
    let loc = Located {
        file: Path::new("/p/chock.toml"),
        text,
    };
    let raw: toml::Value = toml::from_str(text).unwrap();
    let names: Vec<String> = raw["sandbox"]["toolchains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let list = names
        .iter()
        .map(|n| {
            let at = text.find(&format!("\"{n}\"")).unwrap();
            Spanned::new(at..at + n.len() + 2, n.clone())
        })
        .collect();
    let var = |name: &str| fake.vars.get(name).cloned();
    let host = Host {
        home: Some(&fake.home),
        var: &var,
        project: None,
    };
    let mut sandbox = SandboxConfig::default();
    let (mut r, mut w) = (Vec::new(), Vec::new());
    apply(&loc, list, ctx, &host, &mut sandbox, (&mut r, &mut w))?;
    Ok(sandbox)
}

fn ctx(fake: &Fake) -> HostPaths {
    HostPaths {
        home: Some(fake.home.clone()),
        ..HostPaths::default()
    }
}

#[test]
fn rust_shows_rustup_and_cargo_s_bin_and_shares_the_registry() {
    let fake = fake();
    let s = run(&fake, &ctx(&fake), "[sandbox]\ntoolchains = [\"rust\"]\n").unwrap();
    assert_eq!(
        s.read,
        vec![fake.home.join(".rustup"), fake.home.join(".cargo/bin")]
    );
    assert_eq!(
        s.write,
        vec![
            fake.home.join(".cargo/registry"),
            fake.home.join(".cargo/git")
        ]
    );
    assert!(
        fake.home.join(".cargo/registry").is_dir(),
        "a missing cache is made"
    );
    assert!(s.env.contains(&"CARGO_HOME".to_string()));
    assert_eq!(s.toolchains[0].name, "rust");
    assert_eq!(
        s.toolchains[0].found,
        vec![fake.home.join(".cargo/bin/cargo")]
    );
    // cargo's home itself, which holds credentials.toml, is never a profile's path.
    assert!(!s.read.contains(&fake.home.join(".cargo")));
}

#[test]
fn cargo_home_is_honoured() {
    let mut fake = fake();
    let other = fake.home.join("elsewhere/cargo");
    executable(&other.join("bin/cargo"));
    fake.vars.insert("CARGO_HOME", other.clone().into());
    fake.vars.insert(
        "PATH",
        format!("{}:/usr/bin", other.join("bin").display()).into(),
    );
    let s = run(&fake, &ctx(&fake), "[sandbox]\ntoolchains = [\"rust\"]\n").unwrap();
    assert!(s.read.contains(&other.join("bin")), "{:?}", s.read);
    assert!(s.write.contains(&other.join("registry")), "{:?}", s.write);
}

#[test]
fn an_unknown_name_names_the_file_the_field_and_the_known_ones() {
    let fake = fake();
    let err = run(
        &fake,
        &ctx(&fake),
        "[sandbox]\ntoolchains = [\"fortran\"]\n",
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("/p/chock.toml:2:"), "{text}");
    assert!(text.contains("sandbox.toolchains"), "{text}");
    assert!(
        text.contains("`fortran` is not a shipped toolchain"),
        "{text}"
    );
    for p in PROFILES {
        assert!(text.contains(p.name), "{text}");
    }
}

#[test]
fn a_toolchain_not_on_this_host_is_an_error() {
    let mut fake = fake();
    fake.vars.insert("PATH", OsString::from("/nonexistent"));
    let err = run(&fake, &ctx(&fake), "[sandbox]\ntoolchains = [\"go\"]\n").unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("toolchain `go` is not on this host"),
        "{text}"
    );
}

#[test]
fn every_expanded_path_goes_through_the_host_path_checker() {
    let fake = fake();
    let mut ctx = ctx(&fake);
    ctx.forbidden
        .push((fake.home.join(".rustup"), "org.toml:3".into()));
    let err = run(&fake, &ctx, "[sandbox]\ntoolchains = [\"rust\"]\n").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("`rust` expands to"), "{text}");
    assert!(text.contains("org bundle forbids at org.toml:3"), "{text}");

    let mut ctx = self::ctx(&fake);
    ctx.binaries.push(fake.home.join(".cargo/registry"));
    let err = run(&fake, &ctx, "[sandbox]\ntoolchains = [\"rust\"]\n").unwrap_err();
    assert!(err.to_string().contains("Chock's own binaries"), "{err}");
}

#[test]
fn go_s_build_cache_is_each_project_s_own_and_never_the_host_s() {
    let mut fake = fake();
    let go = fake.home.join("sdk/go/bin/go");
    executable(&go);
    fake.vars
        .insert("PATH", go.parent().unwrap().as_os_str().to_owned());
    let var = |name: &str| fake.vars.get(name).cloned();
    let profile = crate::toolchains::profile("go").unwrap();
    let for_project = |project: Option<&Path>| {
        let host = Host {
            home: Some(&fake.home),
            var: &var,
            project,
        };
        expand(profile, &host).unwrap()
    };
    let (a, b) = (Path::new("/src/app"), Path::new("/other/app"));
    let (one, two, none) = (
        for_project(Some(a)),
        for_project(Some(b)),
        for_project(None),
    );
    let host_cache = fake.home.join(".cache/go-build");
    let own = |t: &crate::toolchains::ExpandedToolchain| {
        assert_eq!(t.set_env.len(), 1, "{t:?}");
        assert_eq!(t.set_env[0].0, "GOCACHE");
        assert!(t.write.contains(&t.set_env[0].1), "{t:?}");
        assert!(!t.write.contains(&host_cache), "{t:?}");
        t.set_env[0].1.clone()
    };
    let (dir_a, dir_b) = (own(&one), own(&two));
    assert_ne!(dir_a, dir_b, "two projects named alike share no cache");
    assert!(
        dir_a.starts_with(fake.home.join(".cache/chock/projects")),
        "{dir_a:?}"
    );
    assert!(
        !dir_a.exists(),
        "the expansion alone makes nothing on the host: a cache is made once checked"
    );
    assert_eq!(own(&for_project(Some(a))), dir_a, "stable for one project");
    // No project: no copy to give, and the host's cache is not shared instead.
    assert!(
        none.set_env.is_empty() && !none.write.contains(&host_cache),
        "{none:?}"
    );
    // The module cache, checked against go.sum, stays shared.
    assert!(one.write.contains(&fake.home.join("go/pkg/mod")), "{one:?}");
}

#[test]
fn a_cache_is_made_on_the_host_only_once_every_check_passed() {
    let fake = fake();
    let registry = fake.home.join(".cargo/registry");
    // Refused (the forbidden directory is what the rust profile reads): nothing is made.
    let mut refused = ctx(&fake);
    refused
        .forbidden
        .push((fake.home.join(".rustup"), "org.toml:3".into()));
    run(&fake, &refused, "[sandbox]\ntoolchains = [\"rust\"]\n").unwrap_err();
    assert!(!registry.exists(), "a refused expansion made {registry:?}");
    // Passed: made when missing, private.
    let sandbox = run(&fake, &ctx(&fake), "[sandbox]\ntoolchains = [\"rust\"]\n").unwrap();
    assert!(sandbox.write.contains(&registry), "{sandbox:?}");
    assert!(registry.is_dir(), "made when missing");
    let mode = std::fs::metadata(&registry).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}
