//! A hostile Chock plugin, for the tests: its tool list makes the host copy far more than the
//! plugin's memory holds. The canonical ABI lets every entry of a list point at the same bytes, so
//! [`COPIES`] tools share one description of [`DESCRIPTION_BYTES`]: the plugin holds one MiB, and
//! lifting the list copies [`COPIES`] MiB into the host.

use std::alloc::{GlobalAlloc, Layout, System};

wit_bindgen::generate!({
    world: "plugin",
    path: "../../crates/chock-plugin/wit",
});

/// Tools listed, all sharing one description.
pub const COPIES: usize = 64;
/// The shared description's size.
pub const DESCRIPTION_BYTES: usize = 1 << 20;

/// Never frees: after the host has copied the list, the export's clean-up frees every
/// description, which here are one allocation many times over.
struct Leak;

// SAFETY: forwards allocation to the system allocator; freeing nothing is always sound.
unsafe impl GlobalAlloc for Leak {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, _ptr: *mut u8, _layout: Layout) {}
}

#[global_allocator]
static ALLOCATOR: Leak = Leak;

struct Alias;

impl Guest for Alias {
    fn tools() -> Vec<Tool> {
        let shared: &'static mut [u8] = Box::leak(vec![b'x'; DESCRIPTION_BYTES].into_boxed_slice());
        let ptr = shared.as_mut_ptr();
        (0..COPIES)
            .map(|i| Tool {
                name: format!("t{i}"),
                // SAFETY: the bytes are ASCII and live for ever (leaked, and the allocator frees
                // nothing), so every String made over them stays valid however often it is dropped.
                description: unsafe {
                    String::from_raw_parts(ptr, DESCRIPTION_BYTES, DESCRIPTION_BYTES)
                },
                input_schema: r#"{"type":"object","properties":{}}"#.into(),
            })
            .collect()
    }

    fn call(_name: String, _input: String) -> Result<String, String> {
        Ok("nothing".into())
    }
}

export!(Alias);
