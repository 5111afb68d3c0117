use specie_transaction::UhsId;

/// The slice of the UHS id space one shard owns: ids whose first two bytes, read big-endian,
/// fall in `first..=last`. Two bytes give 65 536 buckets, enough to balance any realistic
/// number of shards while keeping the owner lookup a shift and two compares.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ShardRange {
    pub first: u16,
    pub last: u16,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ShardRangeError {
    #[error("shard count must be between 1 and {max}, got {count}")]
    BadCount { count: usize, max: usize },
    #[error("shard ranges must cover 0000..=ffff contiguously; found a gap or overlap at {at:#06x}")]
    NotContiguous { at: u32 },
    #[error("shard range {first:#06x}..={last:#06x} is empty (first > last)")]
    Empty { first: u16, last: u16 },
}

impl ShardRange {
    pub const SHARDS_MAX: usize = 1024;

    pub fn contains(&self, id: &UhsId) -> bool {
        let bucket = bucket_of(id);
        self.first <= bucket && bucket <= self.last
    }

    /// Splits the id space into `count` ranges of (nearly) equal size.
    pub fn partition(count: usize) -> Result<Vec<ShardRange>, ShardRangeError> {
        if count == 0 || count > Self::SHARDS_MAX {
            return Err(ShardRangeError::BadCount {
                count,
                max: Self::SHARDS_MAX,
            });
        }
        let buckets = 1u32 << 16;
        let ranges: Vec<ShardRange> = (0..count as u32)
            .map(|i| ShardRange {
                first: (i * buckets / count as u32) as u16,
                last: ((i + 1) * buckets / count as u32 - 1) as u16,
            })
            .collect();
        Self::check_cover(&ranges)?;
        Ok(ranges)
    }

    /// Checks that `ranges`, in order, cover the whole id space exactly once: every id must have
    /// exactly one owner or it could never be spent (gap) or be spent twice (overlap).
    pub fn check_cover(ranges: &[ShardRange]) -> Result<(), ShardRangeError> {
        if ranges.is_empty() || ranges.len() > Self::SHARDS_MAX {
            return Err(ShardRangeError::BadCount {
                count: ranges.len(),
                max: Self::SHARDS_MAX,
            });
        }
        let mut next: u32 = 0;
        for range in ranges {
            if range.first > range.last {
                return Err(ShardRangeError::Empty {
                    first: range.first,
                    last: range.last,
                });
            }
            if u32::from(range.first) != next {
                return Err(ShardRangeError::NotContiguous { at: next });
            }
            next = u32::from(range.last) + 1;
        }
        if next != 1 << 16 {
            return Err(ShardRangeError::NotContiguous { at: next });
        }
        Ok(())
    }

    /// Index of the range owning `id`. `ranges` must satisfy [`Self::check_cover`].
    pub fn owner(ranges: &[ShardRange], id: &UhsId) -> usize {
        let bucket = bucket_of(id);
        let index = ranges.partition_point(|range| range.last < bucket);
        debug_assert!(ranges[index].contains(id));
        index
    }
}

fn bucket_of(id: &UhsId) -> u16 {
    u16::from_be_bytes([id.0[0], id.0[1]])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(first: u8, second: u8) -> UhsId {
        let mut bytes = [0u8; 32];
        bytes[0] = first;
        bytes[1] = second;
        UhsId(bytes)
    }

    #[test]
    fn partition_covers_every_bucket_exactly_once() {
        for count in [1, 2, 3, 7, 8, 1000, 1024] {
            let ranges = ShardRange::partition(count).unwrap();
            assert_eq!(ranges.len(), count);
            for probe in [id(0, 0), id(0x7f, 0xff), id(0x80, 0), id(0xff, 0xff), id(0x12, 0x34)] {
                let owners = ranges.iter().filter(|r| r.contains(&probe)).count();
                assert_eq!(owners, 1);
                assert!(ranges[ShardRange::owner(&ranges, &probe)].contains(&probe));
            }
        }
    }

    #[test]
    fn partition_rejects_bad_counts_and_cover_rejects_gaps() {
        assert!(ShardRange::partition(0).is_err());
        assert!(ShardRange::partition(ShardRange::SHARDS_MAX + 1).is_err());
        let gap = [
            ShardRange { first: 0, last: 10 },
            ShardRange {
                first: 12,
                last: 0xffff,
            },
        ];
        assert_eq!(
            ShardRange::check_cover(&gap),
            Err(ShardRangeError::NotContiguous { at: 11 })
        );
        let short = [ShardRange { first: 0, last: 10 }];
        assert!(ShardRange::check_cover(&short).is_err());
        let empty = [ShardRange { first: 5, last: 4 }];
        assert!(ShardRange::check_cover(&empty).is_err());
    }
}
