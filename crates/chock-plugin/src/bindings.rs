//! The host side of the `chock:plugin` world, generated from `wit/plugin.wit`.

wasmtime::component::bindgen!({
    world: "plugin",
    path: "wit",
});

pub use chock::plugin::fetch::Page as WitPage;
pub use chock::plugin::log::Level;
