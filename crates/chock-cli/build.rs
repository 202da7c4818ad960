//! Links the `chock` binary with packed relative relocations (`DT_RELR`) where the toolchain and
//! the C library can.
//!
//! `chock` is one large position-independent binary, and every process of it (each `chock exec`,
//! each hook) starts by having the loader apply its ~50,000 relative relocations. As `RELA`
//! entries they are 24 bytes each, 1.2 MiB the loader reads on every start; packed they are a few
//! kilobytes. Measured on the development machine: `chock exec -- true` 0.3 ms faster as a whole
//! process (about 3%), the binary 1.2 MiB smaller. Address-space layout randomisation is kept
//! (the binary stays PIE).
//!
//! A binary linked this way needs glibc 2.36 or newer, so the flag is only passed when a trial
//! link with it succeeds on a native build (the C library the trial links against is the one the
//! binary runs on); a cross build, another C library, or a linker without it builds as before.

use std::path::PathBuf;
use std::process::{Command, Stdio};

const FLAG: &str = "-Wl,-z,pack-relative-relocs";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // A new build id whenever this crate's sources change (build_id.rs says what it is for).
    println!("cargo:rerun-if-changed=src");
    write_build_id();
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let native = var("TARGET") == var("HOST");
    let gnu_linux = var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu";
    if native && gnu_linux && trial_link() {
        println!("cargo:rustc-link-arg-bins={FLAG}");
    }
}

/// Writes `$OUT_DIR/build-id`: 32 hex digits, new each time this script runs, which the `chock`
/// and `chock-full` of one build both carry (src/build_id.rs). Not a secret and not a digest:
/// it tells a `chock-full` of this build from any other (a stale one, one copied in).
fn write_build_id() {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write(
        std::env::var("CARGO_PKG_VERSION")
            .unwrap_or_default()
            .as_bytes(),
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    hasher.write_u128(now);
    hasher.write_u32(std::process::id());
    let high = hasher.finish();
    hasher.write_u64(high);
    let id = format!("{high:016x}{:016x}", hasher.finish());
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default()).join("build-id");
    std::fs::write(out, id).expect("write the build id");
}

/// Whether the system C compiler links a program with packed relocations and the result runs: an
/// old glibc lacks the `GLIBC_ABI_DT_RELR` version the linker then asks for (an old linker warns
/// that it ignores the option, which is harmless: the binary is linked as before).
fn trial_link() -> bool {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default()).join("relr-trial");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let Ok(mut child) = Command::new(cc)
        .args(["-x", "c", "-", "-pie", "-fPIE", FLAG, "-o"])
        .arg(&out)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    else {
        return false;
    };
    let wrote = child.stdin.take().is_some_and(|mut stdin| {
        use std::io::Write;
        stdin
            .write_all(b"static int x; int *p = &x; int main(void) { return *p; }\n")
            .is_ok()
    });
    let linked = child.wait().is_ok_and(|s| s.success());
    wrote && linked && Command::new(&out).status().is_ok_and(|s| s.success())
}
