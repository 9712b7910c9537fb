//! Transparent huge pages off for the scheduler process.
//!
//! mimalloc hands out memory from arenas the kernel may back with 2 MiB
//! transparent huge pages; a huge page counts in full towards the resident
//! set however little of it is live, and the scheduler's heap is millions
//! of small objects freed and reallocated as pods come and go. Measured at
//! 15,000 nodes / 100,000 pods, up to 155 MiB of the scheduler's resident
//! set was huge pages, and peak RSS fell by ~20 MiB with them off
//! (docs/operations.md). Setting `MIMALLOC_ALLOW_THP`
//! leaves the choice to mimalloc (and to whoever set it).

use tracing::{debug, warn};

/// Disables transparent huge pages for this process, unless
/// `MIMALLOC_ALLOW_THP` says otherwise.
pub fn disable_unless_asked() {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
        debug!("MIMALLOC_ALLOW_THP is set: transparent huge pages left to mimalloc");
        return;
    }
    disable();
}

#[cfg(target_os = "linux")]
fn disable() {
    // SAFETY: PR_SET_THP_DISABLE takes plain integers and reads or writes no
    // memory of the caller; it sets a flag on the process's address space.
    let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    if rc != 0 {
        warn!(
            error = %std::io::Error::last_os_error(),
            "could not disable transparent huge pages; resident memory may be higher"
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn disable() {}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn the_process_flag_is_set() {
        super::disable();
        // SAFETY: as above; PR_GET_THP_DISABLE only reads the flag.
        let flag = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
        assert_eq!(flag, 1);
    }
}
