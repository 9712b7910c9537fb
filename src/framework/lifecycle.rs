//! Extension points around placement, driven by the engine: PreEnqueue,
//! QueueSort, PostFilter, Reserve/Unreserve and Permit. (To be implemented.)
