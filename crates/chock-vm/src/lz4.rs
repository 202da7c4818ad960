//! The LZ4 "legacy" stream a Debian kernel image carries its kernel in (`CONFIG_KERNEL_LZ4`),
//! decompressed so the guest boots the uncompressed `vmlinux` through its PVH entry, which is
//! the fastest boot under TCG emulation (no decompression inside the guest).
//!
//! A legacy stream is the magic `0x184C2102`, then blocks, each a little-endian `u32` of its
//! compressed size and an LZ4 block (at most 8 MiB decompressed). The kernel's build appends the
//! decompressed size as four more bytes, which are not a block.

use crate::VmError;

/// The legacy stream's magic, as it lies in the file.
pub(crate) const MAGIC: [u8; 4] = [0x02, 0x21, 0x4c, 0x18];

/// The largest block a legacy stream holds, decompressed.
const BLOCK_MAX: usize = 8 << 20;

fn bad(why: &str) -> VmError {
    VmError::Kernel(format!("the kernel image's LZ4 stream is damaged: {why}"))
}

/// Decompresses the legacy stream `data` (from its magic to the end of the payload).
pub(crate) fn decompress_legacy(data: &[u8]) -> Result<Vec<u8>, VmError> {
    let rest = data
        .strip_prefix(&MAGIC[..])
        .ok_or_else(|| bad("no magic"))?;
    let mut out = Vec::with_capacity(data.len() * 3);
    let mut at = 0;
    // Four bytes left are the size the build appended, not a block.
    while rest.len() - at > 4 {
        let size = u32::from_le_bytes(rest[at..at + 4].try_into().map_err(|_| bad("a cut size"))?)
            as usize;
        if size == u32::from_le_bytes(MAGIC) as usize {
            at += 4;
            continue;
        }
        let block = rest
            .get(at + 4..at + 4 + size)
            .ok_or_else(|| bad("a block past the end"))?;
        block_into(block, &mut out)?;
        at += 4 + size;
    }
    Ok(out)
}

/// One LZ4 block appended to `out` (whose earlier bytes its matches may refer to).
fn block_into(block: &[u8], out: &mut Vec<u8>) -> Result<(), VmError> {
    let start = out.len();
    let mut i = 0;
    let byte = |i: usize| block.get(i).copied().ok_or_else(|| bad("a cut sequence"));
    loop {
        let token = byte(i)?;
        i += 1;
        let mut literals = usize::from(token >> 4);
        if literals == 15 {
            loop {
                let b = byte(i)?;
                i += 1;
                literals += usize::from(b);
                if b != 255 {
                    break;
                }
            }
        }
        let lit = block
            .get(i..i + literals)
            .ok_or_else(|| bad("literals past the end"))?;
        out.extend_from_slice(lit);
        i += literals;
        if i == block.len() {
            break;
        }
        let offset = usize::from(u16::from_le_bytes([byte(i)?, byte(i + 1)?]));
        i += 2;
        if offset == 0 || offset > out.len() {
            return Err(bad("a match before the start"));
        }
        let mut length = usize::from(token & 15);
        if length == 15 {
            loop {
                let b = byte(i)?;
                i += 1;
                length += usize::from(b);
                if b != 255 {
                    break;
                }
            }
        }
        length += 4;
        if out.len() - start + length > BLOCK_MAX {
            return Err(bad("a block over 8 MiB"));
        }
        // The match may overlap what it writes (a run): copy byte by byte.
        let from = out.len() - offset;
        for k in 0..length {
            let b = out[from + k];
            out.push(b);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream written by hand: one block of literals "abcd", then a match of offset 4 and
    /// length 8 (a run over what it writes), then the literal "!".
    #[test]
    fn literals_and_an_overlapping_match() {
        let block = [0x44, b'a', b'b', b'c', b'd', 4, 0, 0x10, b'!'];
        let mut stream = MAGIC.to_vec();
        stream.extend_from_slice(&u32::try_from(block.len()).unwrap().to_le_bytes());
        stream.extend_from_slice(&block);
        stream.extend_from_slice(&13u32.to_le_bytes());
        assert_eq!(decompress_legacy(&stream).unwrap(), b"abcdabcdabcd!");
    }

    #[test]
    fn a_match_before_the_start_is_an_error() {
        let block = [0x10, b'a', 9, 0];
        let mut stream = MAGIC.to_vec();
        stream.extend_from_slice(&u32::try_from(block.len()).unwrap().to_le_bytes());
        stream.extend_from_slice(&block);
        stream.extend_from_slice(&0u32.to_le_bytes());
        assert!(decompress_legacy(&stream).is_err());
    }
}
