//! `Display` of heap data as s-expressions (debugging, cache keys); the only textual form `core` knows.
