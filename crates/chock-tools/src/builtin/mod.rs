//! The built-in tools, each a [`Tool`](super::tool::Tool) registered by [`register_all`] in the
//! order the model is offered them. docs/tools.md lists them with their inputs, outputs and acts.

mod exec;
mod fs;
mod memory;
mod net;
mod nix;
mod session;

pub use exec::{ReadOutput, RunCommand};
pub use fs::{EditFile, Glob, Grep, List, ReadFile, WriteFile};
pub use memory::{MemoryRead, MemoryReadInput, MemoryWrite, MemoryWriteInput};
pub use net::{FetchUrl, WebSearch};
pub use nix::{ProvisionInput, ProvisionProgram};
pub use session::{
    AskInput, AskUser, GuidanceInput, PlanInput, PlanStepInput, ReadGuidance, RequestAction,
    RequestInput, RestrictInput, RestrictSelf, SetTitle, StepStatus, TitleInput, UpdatePlan,
};

use super::registry::{Registry, RegistryError};

/// Registers every built-in tool in `registry`.
pub fn register_all(registry: &mut Registry) -> Result<(), RegistryError> {
    registry.register(ReadFile)?;
    registry.register(WriteFile)?;
    registry.register(EditFile)?;
    registry.register(List)?;
    registry.register(Glob)?;
    registry.register(Grep)?;
    registry.register(RunCommand)?;
    registry.register(ReadOutput)?;
    registry.register(UpdatePlan)?;
    registry.register(AskUser)?;
    registry.register(SetTitle)?;
    registry.register(RestrictSelf)?;
    registry.register(RequestAction)?;
    registry.register(FetchUrl)?;
    registry.register(WebSearch)?;
    registry.register(ReadGuidance)?;
    registry.register(MemoryRead)?;
    registry.register(MemoryWrite)?;
    Ok(())
}
