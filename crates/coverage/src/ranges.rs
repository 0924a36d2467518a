//! Sorted, disjoint, inclusive id ranges: the shape every pointer set takes on the wire.

use serde::{Deserialize, Serialize};

/// One inclusive range of turn ids, `[start, end]`; serialized as a two-element array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(into = "[i64; 2]", from = "[i64; 2]")]
pub struct IdRange {
    pub start: i64,
    pub end: i64,
}

impl IdRange {
    pub fn new(start: i64, end: i64) -> Self {
        Self { start, end }
    }

    pub fn contains(&self, id: i64) -> bool {
        self.start <= id && id <= self.end
    }

    /// Number of ids in the range (0 when malformed).
    pub fn len(&self) -> u64 {
        if self.end < self.start {
            0
        } else {
            (self.end - self.start) as u64 + 1
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl From<IdRange> for [i64; 2] {
    fn from(r: IdRange) -> Self {
        [r.start, r.end]
    }
}

impl From<[i64; 2]> for IdRange {
    fn from([start, end]: [i64; 2]) -> Self {
        Self { start, end }
    }
}

/// A set of ids kept as sorted, disjoint, non-adjacent inclusive ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct IdRanges(Vec<IdRange>);

impl IdRanges {
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds the set from ids in any order; duplicates are harmless.
    pub fn from_ids(ids: impl IntoIterator<Item = i64>) -> Self {
        let mut ids: Vec<i64> = ids.into_iter().collect();
        ids.sort_unstable();
        let mut set = Self::new();
        for id in ids {
            set.push(id);
        }
        set
    }

    /// Builds the set from (possibly overlapping, unsorted) ranges; malformed ranges are dropped.
    pub fn from_ranges(ranges: impl IntoIterator<Item = IdRange>) -> Self {
        let mut ranges: Vec<IdRange> = ranges.into_iter().filter(|r| !r.is_empty()).collect();
        ranges.sort_unstable();
        let mut merged: Vec<IdRange> = Vec::with_capacity(ranges.len());
        for r in ranges {
            match merged.last_mut() {
                Some(last) if r.start <= last.end.saturating_add(1) => {
                    last.end = last.end.max(r.end)
                }
                _ => merged.push(r),
            }
        }
        Self(merged)
    }

    /// Appends an id that is not smaller than every id already present.
    pub fn push(&mut self, id: i64) {
        match self.0.last_mut() {
            Some(last) if id <= last.end => {}
            Some(last) if id == last.end + 1 => last.end = id,
            _ => self.0.push(IdRange::new(id, id)),
        }
    }

    pub fn contains(&self, id: i64) -> bool {
        // Binary search: the sets can hold thousands of ranges on a hot reconstruct path.
        let idx = self.0.partition_point(|r| r.end < id);
        self.0.get(idx).is_some_and(|r| r.contains(id))
    }

    pub fn ranges(&self) -> &[IdRange] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Number of ids in the set.
    pub fn count(&self) -> u64 {
        self.0.iter().map(IdRange::len).sum()
    }

    /// The ids of `[from, to]` that are not in the set.
    pub fn complement_within(&self, from: i64, to: i64) -> IdRanges {
        let mut gaps = Vec::new();
        let mut next = from;
        for r in &self.0 {
            if r.end < from || r.start > to {
                continue;
            }
            if r.start > next {
                gaps.push(IdRange::new(next, r.start - 1));
            }
            next = next.max(r.end.saturating_add(1));
        }
        if next <= to {
            gaps.push(IdRange::new(next, to));
        }
        IdRanges(gaps)
    }

    pub fn ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.0.iter().flat_map(|r| r.start..=r.end)
    }
}

impl std::fmt::Display for IdRanges {
    /// `0-339,341-359`, or `-` for the empty set: the CLI's compact coverage line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return f.write_str("-");
        }
        for (i, r) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if r.start == r.end {
                write!(f, "{}", r.start)?;
            } else {
                write!(f, "{}-{}", r.start, r.end)?;
            }
        }
        Ok(())
    }
}

// On the wire a range is `[start, end]` and a set is a list of them; say so in the OpenAPI
// document rather than describing the Rust structs.
impl utoipa::PartialSchema for IdRange {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{
            ArrayBuilder, KnownFormat, ObjectBuilder, SchemaFormat, Type,
        };
        ArrayBuilder::new()
            .items(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64))),
            )
            .min_items(Some(2))
            .max_items(Some(2))
            .description(Some("An inclusive range of turn ids, `[start, end]`."))
            .examples([serde_json::json!([0, 359])])
            .into()
    }
}

impl utoipa::ToSchema for IdRange {}

impl utoipa::PartialSchema for IdRanges {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::ArrayBuilder;
        ArrayBuilder::new()
            .items(utoipa::openapi::Ref::from_schema_name("IdRange"))
            .description(Some("Sorted, disjoint, inclusive id ranges."))
            .examples([serde_json::json!([[0, 339], [341, 359]])])
            .into()
    }
}

impl utoipa::ToSchema for IdRanges {
    fn schemas(
        schemas: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        schemas.push((
            "IdRange".into(),
            <IdRange as utoipa::PartialSchema>::schema(),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_openapi_document_describes_a_range_as_a_pair_and_a_set_as_a_list_of_them() {
        use utoipa::{PartialSchema, ToSchema};
        let json = |s| serde_json::to_value(s).unwrap();
        let range = json(IdRange::schema());
        assert_eq!(range["type"], "array");
        assert_eq!(
            (range["minItems"].as_u64(), range["maxItems"].as_u64()),
            (Some(2), Some(2))
        );
        assert_eq!(range["items"]["format"], "int64");
        let set = json(IdRanges::schema());
        assert_eq!(set["items"]["$ref"], "#/components/schemas/IdRange");
        let mut named = Vec::new();
        IdRanges::schemas(&mut named);
        assert_eq!(named.len(), 1);
        assert_eq!(named[0].0, "IdRange");
        assert_eq!(json(named[0].1.clone()), range);
    }

    #[test]
    fn ids_collapse_into_sorted_disjoint_ranges() {
        let set = IdRanges::from_ids([5, 1, 2, 3, 9, 8, 2]);
        assert_eq!(
            set.ranges(),
            &[IdRange::new(1, 3), IdRange::new(5, 5), IdRange::new(8, 9)]
        );
        assert_eq!(set.count(), 6);
        assert_eq!(set.to_string(), "1-3,5,8-9");
    }

    #[test]
    fn overlapping_and_adjacent_ranges_merge() {
        let set = IdRanges::from_ranges([
            IdRange::new(10, 20),
            IdRange::new(0, 4),
            IdRange::new(5, 7),
            IdRange::new(15, 30),
            IdRange::new(9, 3),
        ]);
        assert_eq!(set.ranges(), &[IdRange::new(0, 7), IdRange::new(10, 30)]);
    }

    #[test]
    fn membership_is_exact_at_the_edges() {
        let set = IdRanges::from_ids([0, 1, 2, 10]);
        assert!(set.contains(0) && set.contains(2) && set.contains(10));
        assert!(!set.contains(3) && !set.contains(9) && !set.contains(11) && !set.contains(-1));
    }

    #[test]
    fn the_complement_lists_the_gaps_inside_the_bounds() {
        let set = IdRanges::from_ids([2, 3, 7]);
        assert_eq!(set.complement_within(0, 9).to_string(), "0-1,4-6,8-9");
        assert_eq!(set.complement_within(2, 3).to_string(), "-");
        assert_eq!(IdRanges::new().complement_within(5, 5).to_string(), "5");
    }

    #[test]
    fn ranges_serialize_as_pairs() {
        let set = IdRanges::from_ids([0, 1, 3]);
        assert_eq!(serde_json::to_string(&set).unwrap(), "[[0,1],[3,3]]");
    }
}
