//! The build id `chock` checks before it hands a command to `chock-full`.
//!
//! Every command but `exec` runs in `chock-full`, found beside `chock` (front.rs). Were that file
//! replaced (a stale install, a file copied in, or a confined call given a write path over the
//! install directory, which the policy now refuses), the person's next `chock sessions list`
//! would run it unconfined. So both binaries of one build carry the same id in an ELF section of
//! their own, [`SECTION`], with the binary's role before it, and `chock` reads the section from
//! `chock-full`'s file (its section headers, a few kilobytes: no hash of a 47 MB file on every
//! command) and refuses one whose id is not its own. The id is written by build.rs, new each time
//! the crate's sources change; it is not a secret, so this catches a `chock-full` of another
//! build, not a forger who can also rewrite `chock` (nothing can: the two lie side by side).

use std::os::unix::fs::FileExt;

/// The ELF section both binaries carry their id in.
pub const SECTION: &str = "chock_build_id";

/// This build's id: 32 hex digits.
pub const ID: [u8; 32] = *include_bytes!(concat!(env!("OUT_DIR"), "/build-id"));

/// What `chock-full`'s section holds: its role, then the build's id.
pub const FULL: [u8; 37] = tagged(*b"full:");

/// What `chock`'s section holds (so `chock` itself copied over `chock-full` is refused too: it
/// would only hand the command to itself again).
pub const FRONT: [u8; 37] = tagged(*b"front");

const fn tagged(role: [u8; 5]) -> [u8; 37] {
    let mut out = [0u8; 37];
    let mut i = 0;
    while i < 5 {
        out[i] = role[i];
        i += 1;
    }
    while i < 37 {
        out[i] = ID[i - 5];
        i += 1;
    }
    out
}

/// Why a `chock-full` (the open file `chock` then executes, by its descriptor) is refused.
pub(crate) fn check_full(file: &std::fs::File) -> Result<(), String> {
    match section(file, SECTION)? {
        Some(bytes) if bytes == FULL => Ok(()),
        Some(bytes) if bytes.len() == FULL.len() && bytes[..5] != FULL[..5] => {
            Err("it is not chock-full (another binary of Chock's)".into())
        }
        Some(_) => Err("it is from another build of Chock".into()),
        None => Err("it carries no Chock build id".into()),
    }
}

fn le_u16(b: &[u8], at: usize) -> usize {
    usize::from(u16::from_le_bytes([b[at], b[at + 1]]))
}

fn le_u32(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(bytes)
}

fn read_at(file: &std::fs::File, offset: u64, len: u64) -> Result<Vec<u8>, String> {
    if len > 1 << 20 {
        return Err("its ELF headers are not what a Chock binary has".into());
    }
    let mut buf = vec![0u8; usize::try_from(len).unwrap_or(0)];
    file.read_exact_at(&mut buf, offset)
        .map_err(|e| format!("cannot read it: {e}"))?;
    Ok(buf)
}

/// The contents of the 64-bit little-endian ELF file's section `name`, if it has one.
fn section(file: &std::fs::File, name: &str) -> Result<Option<Vec<u8>>, String> {
    let mut head = [0u8; 64];
    if file.read_exact_at(&mut head, 0).is_err()
        || head[..4] != *b"\x7fELF"
        || head[4] != 2
        || head[5] != 1
    {
        return Ok(None);
    }
    let (shoff, shentsize, shnum, shstrndx) = (
        le_u64(&head, 0x28),
        le_u16(&head, 0x3a),
        le_u16(&head, 0x3c),
        le_u16(&head, 0x3e),
    );
    if shentsize < 0x28 || shstrndx >= shnum {
        return Ok(None);
    }
    let table = read_at(file, shoff, (shentsize * shnum) as u64)?;
    let header = |i: usize| &table[i * shentsize..(i + 1) * shentsize];
    let strings = header(shstrndx);
    let names = read_at(file, le_u64(strings, 0x18), le_u64(strings, 0x20))?;
    for i in 0..shnum {
        let h = header(i);
        let at = le_u32(h, 0);
        let found = names
            .get(at..)
            .and_then(|rest| rest.split(|b| *b == 0).next())
            .is_some_and(|n| n == name.as_bytes());
        if found {
            return read_at(file, le_u64(h, 0x18), le_u64(h, 0x20)).map(Some);
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tags_carry_the_build_id() {
        assert_eq!(&FULL[5..], &ID);
        assert_eq!(&FRONT[5..], &ID);
        assert!(ID.iter().all(u8::is_ascii_hexdigit));
    }

    #[test]
    fn this_test_binary_s_own_file_has_no_build_id_section() {
        let exe = std::fs::File::open(std::env::current_exe().unwrap()).unwrap();
        assert!(section(&exe, SECTION).unwrap().is_none());
        assert!(section(&exe, ".shstrtab").unwrap().is_some());
    }

    #[test]
    fn a_binary_without_the_section_is_refused() {
        let err = check_full(&std::fs::File::open("/bin/sh").unwrap()).unwrap_err();
        assert!(err.contains("no Chock build id"), "{err}");
    }
}
