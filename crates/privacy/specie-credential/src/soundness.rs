//! Soundness tests.
