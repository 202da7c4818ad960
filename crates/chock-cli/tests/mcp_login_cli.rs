//! `chock mcp login NAME` and `chock mcp logout NAME` as the built binary, against a loopback
//! authorization server and protected resource of the test's own (chock-oauth's test servers).
//! The "browser" is curl following the authorization server's redirect to Chock's loopback
//! receiver. The token is stored (a 0600 file: no keyring in the test world), never printed;
//! an authorization server the table does not let Chock reach is refused, naming the act.

#[path = "../../chock-oauth/tests/support/mod.rs"]
mod oauth_support;
mod run_support;

use std::os::unix::fs::PermissionsExt;

use run_support::World;

fn port_of(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn login_through_the_browser_then_logout() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (world, _) = runtime.block_on(oauth_support::start());
    let (resource, issuer) = {
        let w = world.lock().unwrap();
        (w.resource_base.clone(), w.issuer.clone())
    };
    let (rport, aport) = (port_of(&resource), port_of(&issuer));
    let w = World::new();
    let browser = w.base.join("browser.sh");
    std::fs::write(&browser, "#!/bin/sh\nexec curl -s -L -o /dev/null \"$1\"\n").unwrap();
    std::fs::set_permissions(&browser, std::fs::Permissions::from_mode(0o755)).unwrap();
    let browser = browser.display().to_string();
    let policy = |as_decision: &str| {
        format!(
            "[[rule]]\naction = \"net.connect.1.0.0.127.{rport}\"\ndecision = \"allow\"\n\n\
             [[rule]]\naction = \"net.connect.1.0.0.127.{aport}\"\ndecision = \"{as_decision}\"\n\n\
             [mcp.servers.remote]\nurl = \"{resource}/mcp\"\n"
        )
    };

    // The authorization server's host is refused by the table: nothing is asked of it.
    w.write("chock.toml", &policy("deny"));
    let o = w.chock_with_env(&["mcp", "login", "remote"], &[("BROWSER", &browser)]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!("net.connect.1.0.0.127.{aport}")),
        "{err}"
    );
    assert!(world.lock().unwrap().token_forms.is_empty());

    w.write("chock.toml", &policy("allow"));
    let o = w.chock_with_env(&["mcp", "login", "remote"], &[("BROWSER", &browser)]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(
        out.contains(&format!(
            "remote: authorization server 127.0.0.1 (issuer {issuer})"
        )),
        "{out}"
    );
    assert!(
        out.contains("remote: authorized; the token is kept in"),
        "{out}"
    );
    let issued: Vec<String> = world.lock().unwrap().tokens.keys().cloned().collect();
    assert_eq!(issued.len(), 1);
    assert!(
        !out.contains(&issued[0]) && !err.contains(&issued[0]),
        "{out}{err}"
    );
    let creds = w.data.join("chock/credentials");
    let files: Vec<_> = std::fs::read_dir(&creds)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(
        std::fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(
        std::fs::read_to_string(&files[0])
            .unwrap()
            .contains(&issued[0])
    );

    let o = w.chock(&["mcp", "logout", "remote"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains("remote: the token is revoked at 127.0.0.1"),
        "{out}"
    );
    assert!(out.contains("remote: signed out"), "{out}");
    let revoked: Vec<String> = world
        .lock()
        .unwrap()
        .revoked
        .iter()
        .map(|f| f["token"].clone())
        .collect();
    assert!(revoked.contains(&issued[0]), "{revoked:?}");
    assert!(!files[0].exists());
}
