//! A smart-HTTP git server on loopback: git's own `git http-backend` run as CGI behind a small HTTP/1.1
//! server that asks for a password (Basic auth), so a push test reaches a real remote that needs a
//! credential, and can tell what reached it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Where Debian's git keeps its CGI program (`.ci/run` installs git).
pub const HTTP_BACKEND: &str = "/usr/lib/git-core/git-http-backend";

/// One request the server was sent, as it judged it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// `GET` or `POST`.
    pub method: String,
    /// The path and query, as sent (`/repo.git/info/refs?service=git-receive-pack`).
    pub target: String,
    /// Whether it carried the right user and password.
    pub authorized: bool,
    /// The `Authorization` value it carried, so a test can see what was tried.
    pub authorization: Option<String>,
}

/// A running server holding one bare repository, `repo.git`. Stopped and removed when dropped.
#[derive(Debug)]
pub struct GitHttpServer {
    dir: tempfile::TempDir,
    addr: SocketAddr,
    user: String,
    password: String,
    served: Arc<Mutex<Vec<Served>>>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

/// What one connection's thread needs.
#[derive(Clone)]
struct Site {
    root: PathBuf,
    expected: String,
    user: String,
    served: Arc<Mutex<Vec<Served>>>,
}

impl GitHttpServer {
    /// Starts a server on `127.0.0.1:<free port>` whose `repo.git` is empty and that serves `user`
    /// with `password` only.
    pub fn start(user: &str, password: &str) -> GitHttpServer {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let repo = super::bare_repo(dir.path());
        super::git(&["config", "http.receivepack", "true"], &repo);
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let addr = listener.local_addr().expect("its address");
        let served = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let site = Site {
            root: dir.path().to_path_buf(),
            expected: format!("Basic {}", base64(format!("{user}:{password}").as_bytes())),
            user: user.to_string(),
            served: served.clone(),
        };
        let accept = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let site = site.clone();
                    std::thread::spawn(move || {
                        let _ = serve(stream, &site);
                    });
                }
            })
        };
        GitHttpServer {
            dir,
            addr,
            user: user.to_string(),
            password: password.to_string(),
            served,
            stop,
            accept: Some(accept),
        }
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The repository's URL with the user in it and no password (git then asks only for it).
    pub fn url(&self) -> String {
        format!("http://{}@{}/repo.git", self.user, self.addr)
    }

    /// The password the server takes.
    pub fn password(&self) -> &str {
        &self.password
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

    /// Every request served so far.
    pub fn served(&self) -> Vec<Served> {
        self.served.lock().expect("the record").clone()
    }

    /// Whether any request carrying the right password reached the server.
    pub fn saw_the_password(&self) -> bool {
        self.served().iter().any(|s| s.authorized)
    }
}

impl Drop for GitHttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// The request's head: method, target and lower-cased headers.
type Head = (String, String, Vec<(String, String)>);

fn read_head(reader: &mut BufReader<TcpStream>) -> std::io::Result<Option<Head>> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return Ok(None);
    };
    let (method, target) = (method.to_string(), target.to_string());
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 {
            return Ok(None);
        }
        let h = h.trim_end();
        if h.is_empty() {
            return Ok(Some((method, target, headers)));
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
}

/// One connection: one request, answered, then closed.
fn serve(stream: TcpStream, site: &Site) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    let Some((method, target, headers)) = read_head(&mut reader)? else {
        return Ok(());
    };
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let authorization = header("authorization");
    let authorized = authorization.as_deref() == Some(site.expected.as_str());
    site.served.lock().expect("the record").push(Served {
        method: method.clone(),
        target: target.clone(),
        authorized,
        authorization,
    });
    if !authorized {
        out.write_all(
            b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\n\
              Content-Length: 0\r\nConnection: close\r\n\r\n",
        )?;
        return out.shutdown(Shutdown::Both);
    }
    if header("expect").is_some_and(|e| e.eq_ignore_ascii_case("100-continue")) {
        out.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
    }
    let body = read_body(&mut reader, &header)?;
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let mut cgi = Command::new(HTTP_BACKEND);
    cgi.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", &site.root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("REQUEST_METHOD", &method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("REMOTE_USER", &site.user)
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("CONTENT_LENGTH", body.len().to_string());
    for (name, var) in [
        ("content-type", "CONTENT_TYPE"),
        ("content-encoding", "HTTP_CONTENT_ENCODING"),
        ("git-protocol", "GIT_PROTOCOL"),
    ] {
        if let Some(v) = header(name) {
            cgi.env(var, v);
        }
    }
    let mut child = cgi
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdin = child.stdin.take().expect("piped");
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&body);
    });
    let mut output = Vec::new();
    child
        .stdout
        .take()
        .expect("piped")
        .read_to_end(&mut output)?;
    let _ = feeder.join();
    child.wait()?;
    answer(&mut out, &output)?;
    out.shutdown(Shutdown::Both)
}

/// Turns the CGI's output (headers, a blank line, the body) into an HTTP response.
fn answer(out: &mut TcpStream, output: &[u8]) -> std::io::Result<()> {
    let split = output
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| (p, 4))
        .or_else(|| output.windows(2).position(|w| w == b"\n\n").map(|p| (p, 2)));
    let Some((end, sep)) = split else {
        return out.write_all(b"HTTP/1.1 500 Bad CGI\r\nConnection: close\r\n\r\n");
    };
    let head = String::from_utf8_lossy(&output[..end]).into_owned();
    let mut status = "200 OK".to_string();
    let mut response = Vec::new();
    for h in head.lines() {
        match h.split_once(':') {
            Some((k, v)) if k.eq_ignore_ascii_case("status") => status = v.trim().to_string(),
            Some(_) => response.extend_from_slice(format!("{h}\r\n").as_bytes()),
            None => {}
        }
    }
    let body = &output[end + sep..];
    out.write_all(format!("HTTP/1.1 {status}\r\n").as_bytes())?;
    out.write_all(&response)?;
    out.write_all(
        format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    )?;
    out.write_all(body)?;
    out.flush()
}

/// The request's body: `Content-Length` bytes, or the chunks of a chunked one joined.
fn read_body(
    reader: &mut BufReader<TcpStream>,
    header: &dyn Fn(&str) -> Option<String>,
) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    if header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
            if size == 0 {
                let mut trailer = String::new();
                while reader.read_line(&mut trailer)? > 2 {
                    trailer.clear();
                }
                return Ok(body);
            }
            let start = body.len();
            body.resize(start + size, 0);
            reader.read_exact(&mut body[start..])?;
            let mut crlf = [0u8; 2];
            reader.read_exact(&mut crlf)?;
        }
    }
    if let Some(len) = header("content-length").and_then(|l| l.parse::<usize>().ok()) {
        body.resize(len, 0);
        reader.read_exact(&mut body)?;
    }
    Ok(body)
}

/// Standard base64 with padding (the `Authorization` value the server expects).
pub fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ABC[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}
