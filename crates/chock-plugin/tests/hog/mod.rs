//! Hostile components made in the tests: the repository's hostile plugin with a core module
//! appended that declares many large tables and fills them in its start function (or spins),
//! instantiated as often as asked after everything the plugin instantiates itself.

// Each test binary uses some of these helpers, not all.
#![allow(dead_code)]

use std::path::Path;
use std::sync::OnceLock;

use chock_plugin::testing::{Built, build_plugins};
use chock_plugin::{LoadedPlugin, PluginEngine, PluginError};
use chock_policy::{Policy, Source, Sources};

pub fn built() -> Option<&'static Built> {
    static BUILT: OnceLock<Option<Built>> = OnceLock::new();
    BUILT
        .get_or_init(|| build_plugins(&Path::new(env!("CARGO_TARGET_TMPDIR")).join("plugins")))
        .as_ref()
}

fn uleb(mut n: u64, out: &mut Vec<u8>) {
    loop {
        let byte = u8::try_from(n & 0x7f).expect("seven bits");
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn sleb(mut n: i64, out: &mut Vec<u8>) {
    loop {
        let byte = u8::try_from(n & 0x7f).expect("seven bits");
        n >>= 7;
        let done = (n == 0 && byte & 0x40 == 0) || (n == -1 && byte & 0x40 != 0);
        out.push(if done { byte } else { byte | 0x80 });
        if done {
            return;
        }
    }
}

fn section(id: u8, body: &[u8], out: &mut Vec<u8>) {
    out.push(id);
    uleb(body.len() as u64, out);
    out.extend_from_slice(body);
}

/// What a hog module's start function does.
#[derive(Clone, Copy)]
pub enum Start {
    /// Fills every table with null references (every element written: the host's pages are
    /// touched, not merely reserved).
    Fill,
    /// Loops forever.
    Spin,
}

/// A core module with `tables` funcref tables of `elements` elements each and a start function.
pub fn hog_module(tables: u32, elements: u32, start: Start) -> Vec<u8> {
    let mut m = b"\0asm\x01\0\0\0".to_vec();
    section(1, &[1, 0x60, 0, 0], &mut m); // one type: [] -> []
    section(3, &[1, 0], &mut m); // one function of that type
    let mut t = Vec::new();
    uleb(u64::from(tables), &mut t);
    for _ in 0..tables {
        t.extend_from_slice(&[0x70, 0x00]); // funcref, minimum only
        uleb(u64::from(elements), &mut t);
    }
    section(4, &t, &mut m);
    section(8, &[0], &mut m); // start: function 0
    let mut code = vec![0]; // no locals
    match start {
        Start::Fill => {
            for table in 0..tables {
                code.extend_from_slice(&[0x41, 0]); // i32.const 0
                code.extend_from_slice(&[0xd0, 0x70]); // ref.null func
                code.push(0x41); // i32.const elements
                sleb(i64::from(elements), &mut code);
                code.extend_from_slice(&[0xfc, 17]); // table.fill
                uleb(u64::from(table), &mut code);
            }
        }
        Start::Spin => code.extend_from_slice(&[0x03, 0x40, 0x0c, 0x00, 0x0b]), // loop br 0 end
    }
    code.push(0x0b);
    let mut c = vec![1];
    uleb(code.len() as u64, &mut c);
    c.extend_from_slice(&code);
    section(10, &c, &mut m);
    m
}

/// `component` with `module` appended as a core module of its own, instantiated `times` times
/// after everything the component already instantiates.
pub fn with_hog(component: &[u8], module: &[u8], times: u32) -> Vec<u8> {
    // The new module's index is the number of core modules the component defines at its top
    // level: one per core module section (nested components are skipped whole).
    let mut modules = 0u64;
    let mut at = 8;
    while at < component.len() {
        let id = component[at];
        at += 1;
        let (mut size, mut shift) = (0usize, 0);
        loop {
            let byte = component[at];
            at += 1;
            size |= usize::from(byte & 0x7f) << shift;
            shift += 7;
            if byte & 0x80 == 0 {
                break;
            }
        }
        if id == 1 {
            modules += 1;
        }
        at += size;
    }
    let mut out = component.to_vec();
    section(1, module, &mut out);
    let mut instances = Vec::new();
    uleb(u64::from(times), &mut instances);
    for _ in 0..times {
        instances.push(0x00); // instantiate
        uleb(modules, &mut instances);
        instances.push(0); // no arguments
    }
    section(2, &instances, &mut out);
    out
}

/// Loads `wasm` as plugin `probe` with `limits` (chock.toml lines) in a fresh project.
pub fn load(wasm: &[u8], limits: &str) -> Result<LoadedPlugin, PluginError> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("plugin.wasm"), wasm).unwrap();
    let text = format!(
        "[plugins.probe]\npath = \"plugin.wasm\"\nsha256 = \"{}\"\n{limits}\n",
        chock_plugin::sha256_hex(wasm)
    );
    let policy = Policy::from_sources(Sources {
        project: Some(Source {
            path: dir.path().join("chock.toml"),
            text,
        }),
        org: None,
        project_dir: Some(dir.path().to_path_buf()),
        home: None,
        chock_dirs: Vec::new(),
        user: None,
    })
    .unwrap();
    let engine = PluginEngine::shared().unwrap();
    LoadedPlugin::load(&engine, dir.path(), &policy.plugins()[0], &policy)
}

/// The smallest cap the hostile plugin lists its tools under (its stack and heap).
pub const SMALL: &str = "memory_mb = 2\ntimeout_secs = 10\nfuel = 1000000000";

pub fn hostile() -> Option<Vec<u8>> {
    built().map(|b| std::fs::read(&b.hostile).unwrap())
}
