//! A commit position: the primary's WAL position (LSN) after a write, written `X/Y` in hex as
//! Postgres writes it. A read that carries one is answered only from a state at least that new.

use super::Invalid;
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position(pub u64);

impl FromStr for Position {
    type Err = Invalid;

    fn from_str(s: &str) -> Result<Self, Invalid> {
        let invalid = || {
            Invalid::new(
                "Gatekeeper-Min-Position",
                format!("{s:?} is not a position (expected X/Y in hex, as Gatekeeper-Position)"),
            )
        };
        let (high, low) = s.split_once('/').ok_or_else(invalid)?;
        let part = |p: &str| {
            (!p.is_empty() && p.len() <= 8 && p.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| u32::from_str_radix(p, 16).ok())
                .flatten()
                .ok_or_else(invalid)
        };
        Ok(Position(
            u64::from(part(high)?) << 32 | u64::from(part(low)?),
        ))
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xFFFF_FFFF)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_reads_and_writes_as_postgres_writes_an_lsn() {
        for (text, value) in [
            ("0/0", 0),
            ("0/14000000", 0x1400_0000),
            ("1/0", 1 << 32),
            ("16/B374D848", 0x16_B374_D848),
            ("FFFFFFFF/FFFFFFFF", u64::MAX),
        ] {
            let p: Position = text.parse().unwrap();
            assert_eq!(p, Position(value), "{text}");
            assert_eq!(p.to_string(), text);
        }
        assert!("0/1".parse::<Position>().unwrap() < "1/0".parse().unwrap());
    }

    #[test]
    fn anything_else_is_refused_naming_the_header() {
        for bad in [
            "",
            "0",
            "/0",
            "0/",
            "0/g",
            "100000000/0",
            "0/0/0",
            " 0/0",
            "-1/0",
            "+1/0",
        ] {
            let e = bad.parse::<Position>().unwrap_err();
            assert_eq!(e.field, "Gatekeeper-Min-Position", "{bad:?}");
        }
    }
}
