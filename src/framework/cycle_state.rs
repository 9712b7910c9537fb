//! `CycleState`: data plugins compute once per pod per cycle and read per node.

use std::any::Any;
use std::collections::HashMap;

/// Typed per-cycle storage keyed by plugin name. Written in PreFilter/PreScore
/// (single-threaded) and read in Filter/Score (possibly from many threads).
#[derive(Default)]
pub struct CycleState {
    data: HashMap<&'static str, Box<dyn Any + Send + Sync>>,
}

impl CycleState {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn write<T: Any + Send + Sync>(&mut self, key: &'static str, value: T) {
        self.data.insert(key, Box::new(value));
    }

    pub fn read<T: Any + Send + Sync>(&self, key: &'static str) -> Option<&T> {
        self.data.get(key).and_then(|v| v.downcast_ref::<T>())
    }
}

impl std::fmt::Debug for CycleState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CycleState")
            .field("keys", &self.data.keys().collect::<Vec<_>>())
            .finish()
    }
}
