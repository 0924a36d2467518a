//! The `reasons` column of a checkpoint: a byte per turn of its range, the code of the reason the
//! verdict gives for a turn it does not cover (0: none given). Reconstruct reads the one byte of
//! the turn it answers, where it searched the whole verdict for it (migration 0012).

use crate::coverage::{Reason, Verdict};
use crate::store::{Error, Result};

/// Codes as stored; migration 0012 writes the same ones for the verdicts it converts.
const CODES: [(u8, Reason); 5] = [
    (1, Reason::NotReported),
    (2, Reason::AnchorMissing),
    (3, Reason::NoAnchors),
    (4, Reason::BeyondLastAnchor),
    (5, Reason::Pinned),
];

fn code(reason: Reason) -> u8 {
    CODES
        .iter()
        .find(|(_, r)| *r == reason)
        .map_or(0, |(c, _)| *c)
}

/// The column's value for a verdict: `to - from + 1` bytes.
pub(super) fn encode(verdict: &Verdict) -> Result<Vec<u8>> {
    let len = usize::try_from(verdict.to - verdict.from + 1).map_err(Error::invariant)?;
    let mut bytes = vec![0; len];
    for turn in &verdict.turns {
        let at = usize::try_from(turn.id - verdict.from).map_err(Error::invariant)?;
        *bytes
            .get_mut(at)
            .ok_or_else(|| Error::invariant("a verdict lists a turn outside its range"))? =
            code(turn.reason);
    }
    Ok(bytes)
}

/// A turn's byte as reconstruct reads it: absent or 0 when the verdict gives no reason.
pub(super) fn decode(byte: Option<&[u8]>) -> Result<Option<Reason>> {
    match byte.unwrap_or_default() {
        [] | [0] => Ok(None),
        [c] => CODES
            .iter()
            .find(|(code, _)| code == c)
            .map(|(_, r)| Some(*r))
            .ok_or_else(|| Error::invariant(format!("unknown reason code {c}"))),
        _ => Err(Error::invariant("a turn's reason is one byte")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_reads_back_as_itself_and_no_two_share_a_code() {
        for reason in [
            Reason::NotReported,
            Reason::AnchorMissing,
            Reason::NoAnchors,
            Reason::BeyondLastAnchor,
            Reason::Pinned,
        ] {
            assert_ne!(code(reason), 0, "{reason:?}");
            assert_eq!(decode(Some(&[code(reason)])).unwrap(), Some(reason));
        }
        let mut codes: Vec<u8> = CODES.iter().map(|(c, _)| *c).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), CODES.len());
    }

    #[test]
    fn a_turn_without_a_reason_reads_as_none_and_a_stray_byte_is_an_invariant_error() {
        assert_eq!(decode(None).unwrap(), None);
        assert_eq!(decode(Some(&[])).unwrap(), None);
        assert_eq!(decode(Some(&[0])).unwrap(), None);
        assert!(decode(Some(&[6])).is_err());
        assert!(decode(Some(&[1, 2])).is_err());
    }
}
