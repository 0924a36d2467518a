//! A commit position: the primary's WAL position (LSN) after a write, written `X/Y` in hex as
//! Postgres writes it (one hex number is read too). A read that carries one is answered only
//! from a state at least that new.

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
                format!(
                    "{s:?} is not a position (expected X/Y in hex as in Gatekeeper-Position, or one hex number)"
                ),
            )
        };
        // A value wider than its part saturates: a position past every real one is answered
        // by the primary, which is never behind, so it is still read-your-writes.
        let hex = |p: &str| {
            (!p.is_empty() && p.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| u64::from_str_radix(p, 16).unwrap_or(u64::MAX))
                .ok_or_else(invalid)
        };
        let value = match s.split_once('/') {
            Some((high, low)) => match (hex(high)?, hex(low)?) {
                (high, low) if high >> 32 == 0 && low >> 32 == 0 => high << 32 | low,
                _ => u64::MAX,
            },
            None => hex(s)?,
        };
        Ok(Position(value))
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
        assert_eq!("000000001/00".parse::<Position>(), Ok(Position(1 << 32)));
    }

    #[test]
    fn a_position_past_every_real_one_saturates() {
        for wide in [
            "100000000/0",
            "0/100000000",
            "1FFFFFFFFFFFFFFFF",
            "A1B1df37cEF8716d50",
        ] {
            assert_eq!(wide.parse::<Position>(), Ok(Position(u64::MAX)), "{wide}");
        }
    }

    #[test]
    fn one_hex_number_is_the_same_position() {
        assert_eq!("0".parse::<Position>(), Ok(Position(0)));
        assert_eq!(
            "16B374D848".parse::<Position>(),
            Ok(Position(0x16_B374_D848))
        );
    }

    #[test]
    fn anything_else_is_refused_naming_the_header() {
        for bad in ["", "/0", "0/", "0/g", "0/0/0", " 0/0", "-1/0", "+1/0", "g"] {
            let e = bad.parse::<Position>().unwrap_err();
            assert_eq!(e.field, "Gatekeeper-Min-Position", "{bad:?}");
        }
    }
}
