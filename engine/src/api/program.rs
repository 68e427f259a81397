//! What makes a job: a program that builds its dataflow from its arguments, and the registry
//! through which the engine finds programs by name. The engine knows no program of its own: the
//! JobManager and every TaskManager are given a registry (the bundled examples are one source of
//! programs; job artifacts are another).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::StreamExecutionEnvironment;

/// A job program: builds its dataflow from its arguments. The JobManager runs `build` to derive
/// the job graph and every TaskManager runs it again to instantiate the operators it hosts, so
/// it must be deterministic.
pub trait JobProgram: Send + Sync {
    /// The name `sluice run` knows it by.
    fn name(&self) -> &str;
    /// One line on what it does.
    fn description(&self) -> &str;
    /// Its arguments, as shown by `sluice examples`.
    fn usage(&self) -> &str;
    /// Builds the dataflow; returns the job's display name. Bad arguments give an error naming
    /// the argument.
    fn build(&self, env: &StreamExecutionEnvironment, args: &[String]) -> Result<String, String>;
}

/// Programs by name.
#[derive(Clone, Default)]
pub struct ProgramRegistry {
    programs: BTreeMap<String, Arc<dyn JobProgram>>,
}

impl std::fmt::Debug for ProgramRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.programs.keys()).finish()
    }
}

impl ProgramRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a program; refused if one of that name is registered already.
    pub fn register(&mut self, program: Arc<dyn JobProgram>) -> Result<(), String> {
        let name = program.name().to_string();
        if self.programs.contains_key(&name) {
            return Err(format!("a program named '{name}' is registered already"));
        }
        self.programs.insert(name, program);
        Ok(())
    }

    /// The program called `name`.
    pub fn find(&self, name: &str) -> Option<Arc<dyn JobProgram>> {
        self.programs.get(name).cloned()
    }

    /// Every program, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn JobProgram>> {
        self.programs.values()
    }
}
