//! SHA-256, the only hash function of the format (txids, UHS ids, commitments, attestations).

use sha2::{Digest, Sha256};

use crate::Hash32;

/// SHA-256 of one buffer.
pub fn sha256(bytes: &[u8]) -> Hash32 {
    Sha256::digest(bytes).into()
}

/// Incremental SHA-256 for preimages assembled from several fields, without a temporary buffer.
#[derive(Clone, Default)]
pub struct Sha256Writer(Sha256);

impl Sha256Writer {
    pub fn new() -> Self {
        Sha256Writer(Sha256::new())
    }

    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    pub fn finish(self) -> Hash32 {
        self.0.finalize().into()
    }
}

/// How many UHS ids `sorted` holds, and SHA-256 over them in the order given (ascending, for
/// `GET /v1/uhs/digest`): equal digests mean equal sets, so replicas and restarts compare
/// without shipping the set.
pub fn uhs_digest<'a>(sorted: impl IntoIterator<Item = &'a crate::UhsId>) -> (u64, Hash32) {
    let mut hasher = Sha256Writer::new();
    let mut count = 0u64;
    for id in sorted {
        hasher.update(&id.0);
        count += 1;
    }
    (count, hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_string_digest() {
        assert_eq!(
            hex::encode(sha256(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let mut writer = Sha256Writer::new();
        writer.update(b"ab");
        writer.update(b"c");
        assert_eq!(writer.finish(), sha256(b"abc"));
    }
}
