//! The one wasmtime engine of a process: the component model, Cranelift, fuel metering and epoch
//! interruption, and the thread that advances the epoch (the wall-clock deadline's clock).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use wasmtime::component::Component;
use wasmtime::{Config, Engine};

/// How often the epoch advances: the wall-clock timeout's resolution.
pub(crate) const TICK: Duration = Duration::from_millis(10);

/// The engine every plugin is compiled and run by. Cheap to clone.
#[derive(Clone)]
pub struct PluginEngine {
    engine: Engine,
    /// Components compiled in this process, by the SHA-256 of their bytes (the pin).
    compiled: Arc<Mutex<HashMap<String, Component>>>,
}

impl std::fmt::Debug for PluginEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginEngine").finish_non_exhaustive()
    }
}

impl PluginEngine {
    /// The process's engine, made on first use with its epoch thread.
    pub fn shared() -> Result<PluginEngine, String> {
        static SHARED: OnceLock<Result<PluginEngine, String>> = OnceLock::new();
        SHARED
            .get_or_init(|| {
                let mut config = Config::new();
                config
                    .wasm_component_model(true)
                    .consume_fuel(true)
                    .epoch_interruption(true);
                let engine = Engine::new(&config).map_err(|e| e.to_string())?;
                let weak = Arc::new(engine.weak());
                std::thread::Builder::new()
                    .name("chock-plugin-epoch".into())
                    .spawn(move || {
                        while let Some(engine) = weak.upgrade() {
                            engine.increment_epoch();
                            drop(engine);
                            std::thread::sleep(TICK);
                        }
                    })
                    .map_err(|e| format!("cannot start the plugin epoch thread: {e}"))?;
                Ok(PluginEngine {
                    engine,
                    compiled: Arc::default(),
                })
            })
            .clone()
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The component of `bytes`, whose SHA-256 is `sha256`, compiled once per process.
    pub(crate) fn compile(&self, sha256: &str, bytes: &[u8]) -> wasmtime::Result<Component> {
        if let Some(component) = self
            .compiled
            .lock()
            .ok()
            .and_then(|c| c.get(sha256).cloned())
        {
            return Ok(component);
        }
        let component = Component::new(&self.engine, bytes)?;
        if let Ok(mut compiled) = self.compiled.lock() {
            compiled.insert(sha256.to_string(), component.clone());
        }
        Ok(component)
    }
}
