//! Dynamic Resource Allocation, the allocator's half: the `resource.k8s.io`
//! objects as it reads them (`model`), CEL device selectors (`cel`), the
//! devices of complete pools and those already taken (`inventory`), and the
//! search that gives a pod's claims their devices on a node (`allocate`),
//! what an allocation of a shared device consumes (`capacity`), what a
//! binding writes to the claims (`write`), and invariant I9's check over
//! allocations (`audit`).
//!
//! Pure: no I/O, no clock. Which claims a pod needs, and writing an
//! allocation back, belong to the plugin and the engine.

pub mod allocate;
pub mod audit;
pub mod capacity;
pub mod cel;
pub mod cel_check;
pub mod cel_libs;
pub mod domains;
pub mod extended;
pub mod inventory;
pub mod model;
pub mod write;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod upstream_tests;

pub use allocate::{Budget, NodeView, Plan, Unfit, allocate};
pub use inventory::{InUse, Inventory};
pub use model::{
    Allocation, Attr, Claim, Consumer, Device, DeviceClass, DeviceId, DraError, QualifiedName,
    Reach, Slice, TaintRule,
};
pub use write::{ClaimReservation, ClassConfig};

/// Bounds on tenant input, as the API server validates `resource.k8s.io/v1`
/// (the allocator does not trust that it did).
pub mod limits {
    /// Devices in one ResourceSlice.
    pub const MAX_DEVICES_PER_SLICE: usize = 128;
    /// Attributes and capacities of one device, together.
    pub const MAX_ATTRIBUTES_PER_DEVICE: usize = 32;
    /// Values of a list-valued attribute.
    pub const MAX_ATTRIBUTE_LIST: usize = 32;
    /// Bytes of a string attribute.
    pub const MAX_ATTRIBUTE_STRING: usize = 64;
    /// Counters in one counter set (or one device's consumption of it).
    pub const MAX_COUNTERS: usize = 32;
    /// Requests in one claim.
    pub const MAX_REQUESTS: usize = 32;
    /// `firstAvailable` subrequests of one request.
    pub const MAX_SUBREQUESTS: usize = 8;
    /// Constraints in one claim.
    pub const MAX_CONSTRAINTS: usize = 32;
    /// Configuration entries of one class.
    pub const MAX_CONFIGS: usize = 32;
    /// Selectors of one class or request.
    pub const MAX_SELECTORS: usize = 32;
    /// Tolerations of one request.
    pub const MAX_TOLERATIONS: usize = 16;
    /// Devices one claim is allocated (`count` is at most this).
    pub const MAX_DEVICES_PER_CLAIM: u32 = 32;
    /// Bytes of one CEL expression.
    pub const MAX_CEL_LENGTH: usize = 10 * 1024;
    /// Estimated cost of one CEL expression (`cel::estimated_cost`).
    pub const MAX_CEL_COST: u64 = 1_000_000;
    /// The longest list or map a device gives a selector to iterate.
    pub const MAX_COLLECTION: usize = 32;
}
