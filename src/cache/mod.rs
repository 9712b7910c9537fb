//! The scheduler's cache: nodes with their accounted pods, assumed pods, and
//! per-group membership. (To be implemented beyond `NodeState`.)

mod node_state;

pub use node_state::NodeState;
