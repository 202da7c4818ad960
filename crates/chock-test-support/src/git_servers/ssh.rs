//! An `sshd` on loopback serving a bare repository, and a test `ssh-agent` that alone holds the key the
//! server accepts (the key's file is deleted once the agent has it), so a push can only be signed
//! through the agent.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Debian's sshd (package `openssh-server`, which `.ci/run` installs).
pub const SSHD: &str = "/usr/sbin/sshd";
/// The agent (package `openssh-client`).
pub const SSH_AGENT: &str = "/usr/bin/ssh-agent";

/// Waits up to 10 s for `ready`.
fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !ready() {
        assert!(Instant::now() < until, "{what} did not come up in 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs a program and asserts it succeeded.
fn run(cmd: &mut Command) {
    let out = cmd.output().expect("the program runs");
    assert!(out.status.success(), "{cmd:?}: {out:?}");
}

/// A fresh ed25519 key pair at `path` and `path.pub`, with no passphrase.
fn keygen(path: &Path) {
    run(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "chock-test", "-f"])
        .arg(path));
}

/// A running `ssh-agent` on a socket of its own, holding one key whose file no longer exists.
/// Stopped when dropped.
#[derive(Debug)]
pub struct TestAgent {
    dir: tempfile::TempDir,
    child: Child,
    public: String,
}

impl TestAgent {
    /// Starts the agent and adds a new key to it.
    pub fn start() -> TestAgent {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let sock = dir.path().join("agent.sock");
        let child = Command::new(SSH_AGENT)
            .arg("-D")
            .arg("-a")
            .arg(&sock)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("ssh-agent runs");
        let mut agent = TestAgent {
            public: String::new(),
            dir,
            child,
        };
        wait_for("ssh-agent", || sock.exists());
        let key = agent.dir.path().join("key");
        keygen(&key);
        run(Command::new("ssh-add")
            .arg("-q")
            .arg(&key)
            .env("SSH_AUTH_SOCK", &sock));
        agent.public = std::fs::read_to_string(key.with_extension("pub")).expect("the public key");
        std::fs::remove_file(&key).expect("the private key's file removed");
        std::fs::remove_file(key.with_extension("pub")).expect("the public key's file removed");
        agent
    }

    /// The agent's socket (what `SSH_AUTH_SOCK` names).
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("agent.sock")
    }

    /// The key's public half, one `authorized_keys` line.
    pub fn public_key(&self) -> &str {
        &self.public
    }
}

impl Drop for TestAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running `sshd` on `127.0.0.1:<free port>` that lets the current user in with the [`TestAgent`]'s
/// key only, and serves `repo.git`. Stopped and removed when dropped.
#[derive(Debug)]
pub struct SshServer {
    dir: tempfile::TempDir,
    addr: SocketAddr,
    user: String,
    agent: TestAgent,
    child: Child,
}

impl SshServer {
    /// Starts the agent and the server.
    pub fn start() -> SshServer {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let agent = TestAgent::start();
        super::bare_repo(dir.path());
        let host_key = dir.path().join("host_key");
        keygen(&host_key);
        let authorized = dir.path().join("authorized_keys");
        std::fs::write(&authorized, agent.public_key()).expect("authorized_keys");
        let port = {
            let probe = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
            probe.local_addr().expect("its address").port()
        };
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("an address");
        let host_public = std::fs::read_to_string(host_key.with_extension("pub")).expect("the key");
        let mut fields = host_public.split_whitespace();
        let (kind, body) = (fields.next().unwrap_or(""), fields.next().unwrap_or(""));
        std::fs::write(
            dir.path().join("known_hosts"),
            format!("[127.0.0.1]:{port} {kind} {body}\n"),
        )
        .expect("known_hosts");
        let config = dir.path().join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "ListenAddress 127.0.0.1:{port}\nHostKey {}\nAuthorizedKeysFile {}\n\
                 PidFile none\nUsePAM no\nStrictModes no\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
                 PermitRootLogin prohibit-password\nPrintMotd no\nPrintLastLog no\n\
                 AllowTcpForwarding no\nAllowAgentForwarding no\nX11Forwarding no\n",
                host_key.display(),
                authorized.display()
            ),
        )
        .expect("sshd_config");
        if running_as_root() {
            // Run as root, sshd needs its privilege-separation directory (its service makes it).
            let _ = std::fs::create_dir_all("/run/sshd");
        }
        let child = Command::new(SSHD)
            .arg("-D")
            .arg("-e")
            .arg("-f")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sshd runs");
        wait_for("sshd", || TcpStream::connect(addr).is_ok());
        SshServer {
            dir,
            addr,
            user: current_user(),
            agent,
            child,
        }
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The repository's URL (`ssh://<user>@127.0.0.1:<port>/<dir>/repo.git`).
    pub fn url(&self) -> String {
        format!("ssh://{}@{}{}", self.user, self.addr, self.repo().display())
    }

    /// The agent holding the only key the server takes.
    pub fn agent(&self) -> &TestAgent {
        &self.agent
    }

    /// A `known_hosts` file that names the server's host key.
    pub fn known_hosts(&self) -> PathBuf {
        self.dir.path().join("known_hosts")
    }

    /// The ssh options that trust the server's key and read no user configuration.
    pub fn ssh_options(&self) -> Vec<String> {
        vec![
            "-F".into(),
            "/dev/null".into(),
            "-o".into(),
            format!("UserKnownHostsFile={}", self.known_hosts().display()),
            "-o".into(),
            "StrictHostKeyChecking=yes".into(),
            "-o".into(),
            "BatchMode=yes".into(),
        ]
    }

    /// The bare repository on disk.
    pub fn repo(&self) -> PathBuf {
        self.dir.path().join("repo.git")
    }

    /// The commit `refs/heads/<branch>` names in the server's repository, if any.
    pub fn head(&self, branch: &str) -> Option<String> {
        super::rev(&self.repo(), branch)
    }

    /// A new commit on the repository's `main` (a file `fetched.txt` holding `text`), for a fetch
    /// to find; its id.
    pub fn add_commit(&self, text: &str) -> String {
        super::add_commit(&self.repo(), text)
    }
}

impl Drop for SshServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the tests run as root.
fn running_as_root() -> bool {
    current_user_id() == "0"
}

fn current_user_id() -> String {
    let out = Command::new("id").arg("-u").output().expect("id runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The name of the user the tests run as (whom the server lets in).
fn current_user() -> String {
    let out = Command::new("id").arg("-un").output().expect("id runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
