//! A small bounded cache with a time to live per entry, for review results
//! (so each Prometheus scrape does not cost two API calls). When full, expired
//! entries go first, then the one closest to expiry.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (V, Instant)>>,
    capacity: usize,
}

impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
    pub fn new(capacity: usize) -> Self {
        TtlCache {
            entries: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, (V, Instant)>> {
        // A panic elsewhere cannot leave the map half-updated: every change
        // is one insert or remove.
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The value for `key` if it has not expired.
    pub fn get(&self, key: &K) -> Option<V> {
        self.get_at(key, Instant::now())
    }

    fn get_at(&self, key: &K, now: Instant) -> Option<V> {
        let mut entries = self.lock();
        match entries.get(key) {
            Some((v, until)) if *until > now => Some(v.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Keeps `value` for `ttl`; a zero `ttl` keeps nothing.
    pub fn insert(&self, key: K, value: V, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let now = Instant::now();
        let mut entries = self.lock();
        if entries.len() >= self.capacity && !entries.contains_key(&key) {
            entries.retain(|_, (_, until)| *until > now);
            if entries.len() >= self.capacity
                && let Some(soonest) = entries
                    .iter()
                    .min_by_key(|(_, (_, until))| *until)
                    .map(|(k, _)| k.clone())
            {
                entries.remove(&soonest);
            }
        }
        entries.insert(key, (value, now + ttl));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_and_the_size_is_bounded() {
        let cache = TtlCache::new(2);
        cache.insert("a", 1, Duration::from_secs(60));
        cache.insert("b", 2, Duration::from_secs(30));
        cache.insert("gone", 0, Duration::ZERO);
        assert_eq!(cache.get(&"gone"), None);
        assert_eq!(cache.len(), 2);
        // Full: the entry closest to expiry makes room.
        cache.insert("c", 3, Duration::from_secs(90));
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(&"b"), None);
        assert_eq!((cache.get(&"a"), cache.get(&"c")), (Some(1), Some(3)));
        // Replacing a key does not evict another.
        cache.insert("a", 10, Duration::from_secs(60));
        assert_eq!((cache.get(&"a"), cache.get(&"c")), (Some(10), Some(3)));
        // An expired entry is not returned, and is dropped.
        let later = Instant::now() + Duration::from_secs(61);
        assert_eq!(cache.get_at(&"a", later), None);
        assert_eq!(cache.get_at(&"c", later), Some(3));
        assert_eq!(cache.len(), 1);
    }
}
