//! What the real-browser test stands on: Debian's chromium and chromedriver (found, or the test
//! fails in CI and skips with its reason elsewhere), the real `chock` binary (the one cargo built
//! next to this test, rebuilt first when it is older than the sources), the shared hermetic world
//! for it (`chock_test_support::World`), and the two processes the test starts and always stops:
//! `chock serve --host 127.0.0.1:0` and chromedriver.
#![allow(dead_code, unreachable_pub)]

pub mod page;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// The browser and its driver.
#[derive(Debug)]
pub struct Tools {
    pub chromium: PathBuf,
    pub chromedriver: PathBuf,
}

/// The program `env` names (when set), else the Debian path, else `name` on PATH; if it is there.
fn program(env: &str, debian: &str, name: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(env) {
        return Some(PathBuf::from(path)).filter(|p| p.exists());
    }
    if Path::new(debian).exists() {
        return Some(PathBuf::from(debian));
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join(name))
        .find(|p| p.exists())
}

/// The browser and driver, or `None` outside CI when one is missing (the skip is reported by
/// `chock_test_support::requires`). In CI a missing one fails the test: a test that silently
/// skipped there would prove nothing.
pub fn tools() -> Option<Tools> {
    let chromium = program("CHOCK_CHROMIUM", "/usr/bin/chromium", "chromium");
    let chromedriver = program(
        "CHOCK_CHROMEDRIVER",
        "/usr/bin/chromedriver",
        "chromedriver",
    );
    let missing = [
        chromium.is_none().then_some("chromium"),
        chromedriver.is_none().then_some("chromedriver"),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(" and ");
    if !chock_test_support::requires(
        missing.is_empty(),
        format_args!(
            "the browser test needs {missing}: `apt-get install chromium chromium-driver` \
             (or set CHOCK_CHROMIUM / CHOCK_CHROMEDRIVER)"
        ),
    ) {
        return None;
    }
    Some(Tools {
        chromium: chromium?,
        chromedriver: chromedriver?,
    })
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The newest modification time among the files that go into the `chock` binary.
fn newest_source(dir: &Path, newest: &mut SystemTime) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            let skip = ["tests", "benches", "target", "fuzz", "snapshots", ".git"];
            if !skip.iter().any(|s| name == *s) {
                newest_source(&path, newest);
            }
        } else if let Ok(modified) = meta.modified() {
            *newest = (*newest).max(modified);
        }
    }
}

/// The `chock` binary to test: `CHOCK_BIN` if set; else the one cargo built in this target
/// directory, when it is newer than every source file (a `cargo test --workspace` builds it
/// before running any test); else it is built first with `cargo build -p chock-cli`, so the
/// test never drives a binary whose embedded UI is older than `ui/`.
pub fn chock_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("CHOCK_BIN") {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    let built = profile_dir.join("chock");
    let root = workspace_root();
    let mut newest = SystemTime::UNIX_EPOCH;
    newest_source(&root.join("crates"), &mut newest);
    for file in ["Cargo.toml", "Cargo.lock"] {
        if let Ok(m) = std::fs::metadata(root.join(file)).and_then(|m| m.modified()) {
            newest = newest.max(m);
        }
    }
    let fresh = std::fs::metadata(&built)
        .and_then(|m| m.modified())
        .is_ok_and(|m| m >= newest);
    if fresh {
        return built;
    }
    eprintln!(
        "building chock: {} is missing or older than its sources",
        built.display()
    );
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        // Both binaries: `chock` refuses a chock-full from another build.
        .args([
            "build",
            "-p",
            "chock-cli",
            "--bin",
            "chock",
            "--bin",
            "chock-full",
            "--locked",
        ])
        .arg("--message-format=json-render-diagnostics")
        .current_dir(&root)
        .stderr(Stdio::inherit())
        .output()
        .expect("running cargo to build chock");
    assert!(out.status.success(), "cargo build -p chock-cli failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "chock")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .expect("cargo named no chock executable")
}

/// The one hermetic world every test runs Chock in (HOME, the XDG directories, an empty org
/// bundle, no git configuration of the person running the test, a fixed clock and ids).
pub use chock_test_support::World;

/// A child process that is stopped (SIGTERM, then SIGKILL) when dropped, and whose standard
/// error is kept in a file for the failure message.
pub struct Running {
    pub child: Child,
    pub stderr: PathBuf,
    name: &'static str,
}

impl Running {
    /// Its standard error so far (for a failure's message).
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id())
            && let Some(pid) = rustix::process::Pid::from_raw(pid)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("{} did not stop on SIGTERM: killed", self.name);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `chock serve --host 127.0.0.1:0` in the world, and the one-time login link it printed.
pub fn serve(world: &World, chock: &Path) -> (Running, String) {
    let stderr = world.base.join("serve.stderr");
    let mut cmd = Command::new(chock);
    world
        .hermetic(&mut cmd)
        .args(["serve", "--host", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr).unwrap());
    let mut child = cmd.spawn().expect("starting chock serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let running = Running {
        child,
        stderr,
        name: "chock serve",
    };
    let link = line
        .split_whitespace()
        .find(|w| w.contains("/#login="))
        .unwrap_or_else(|| panic!("no login link in {line:?}: {}", running.stderr()))
        .to_string();
    (running, link)
}

/// A free loopback port (closed again: chromedriver binds it a moment later).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// chromedriver on a free loopback port, once its `/status` says ready; and its URL.
pub fn chromedriver(world: &World, tools: &Tools) -> (Running, String) {
    let port = free_port();
    let stderr = world.base.join("chromedriver.log");
    let mut cmd = Command::new(&tools.chromedriver);
    world
        .hermetic(&mut cmd)
        .arg(format!("--port={port}"))
        .arg(format!("--log-path={}", stderr.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let child = cmd.spawn().expect("starting chromedriver");
    let running = Running {
        child,
        stderr,
        name: "chromedriver",
    };
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let _ = write!(
                s,
                "GET /status HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
            );
            let mut reply = String::new();
            let _ = s.read_to_string(&mut reply);
            if reply.contains("\"ready\":true") {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "chromedriver did not get ready on {addr}: {}",
            running.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    (running, format!("http://{addr}"))
}

/// Where the test's screenshots go: `<target>/test-artifacts/`.
pub fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Headless chromium with a profile of its own in the world.
pub fn capabilities(world: &World, tools: &Tools) -> serde_json::Map<String, serde_json::Value> {
    let profile = world.base.join("chromium-profile");
    let caps = serde_json::json!({
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
    caps.as_object().cloned().unwrap()
}
