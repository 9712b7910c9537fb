//! `CycleState`: data plugins compute once per pod per cycle and read per node.

use std::any::Any;

/// Typed per-cycle storage keyed by plugin name. Written in PreFilter/PreScore
/// (single-threaded) and read in Filter/Score (possibly from many threads).
///
/// A short list, not a hash map: a profile has a dozen plugins, and Filter
/// and Score read the state once per plugin per node (20,000 reads per pod
/// at 50,000 nodes, where hashing the name with SipHash was a quarter of
/// the plain-pod profile). Keys are the plugins' `NAME`
/// constants, so most lookups end at a pointer comparison.
#[derive(Default)]
pub struct CycleState {
    data: Vec<(&'static str, Box<dyn Any + Send + Sync>)>,
}

impl CycleState {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn write<T: Any + Send + Sync>(&mut self, key: &'static str, value: T) {
        match self.data.iter_mut().find(|(k, _)| same_key(k, key)) {
            Some((_, slot)) => *slot = Box::new(value),
            None => self.data.push((key, Box::new(value))),
        }
    }

    pub fn read<T: Any + Send + Sync>(&self, key: &'static str) -> Option<&T> {
        self.data
            .iter()
            .find(|(k, _)| same_key(k, key))
            .and_then(|(_, v)| v.downcast_ref::<T>())
    }
}

fn same_key(a: &str, b: &str) -> bool {
    std::ptr::eq(a, b) || a == b
}

impl std::fmt::Debug for CycleState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CycleState")
            .field(
                "keys",
                &self.data.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_replaces_and_reads_are_typed() {
        let mut s = CycleState::new();
        s.write("A", 1u32);
        s.write("B", String::from("b"));
        s.write("A", 2u32);
        assert_eq!(s.read::<u32>("A"), Some(&2));
        assert_eq!(s.read::<String>("B").map(String::as_str), Some("b"));
        // The wrong type or an absent key reads nothing.
        assert_eq!(s.read::<u64>("A"), None);
        assert_eq!(s.read::<u32>("C"), None);
        // Equal names at different addresses are the same key.
        let owned = String::from("A");
        let leaked: &'static str = Box::leak(owned.into_boxed_str());
        assert_eq!(s.read::<u32>(leaked), Some(&2));
    }
}
