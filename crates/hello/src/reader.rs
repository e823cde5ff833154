//! Bounds-checked cursor over wire bytes: every read either fits or is a [`ParseError`], never a panic.

use crate::error::{Field, ParseError};

/// Reads big-endian integers and length-prefixed vectors from the front of a slice.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    pub(crate) fn array<const N: usize>(&mut self, field: Field) -> Result<&'a [u8; N], ParseError> {
        let (head, rest) = self.rest.split_first_chunk::<N>().ok_or(ParseError::Overrun { field })?;
        self.rest = rest;
        Ok(head)
    }

    pub(crate) fn u8(&mut self, field: Field) -> Result<u8, ParseError> {
        self.array::<1>(field).map(|&[b]| b)
    }

    pub(crate) fn u16(&mut self, field: Field) -> Result<u16, ParseError> {
        self.array::<2>(field).map(|b| u16::from_be_bytes(*b))
    }

    pub(crate) fn u24(&mut self, field: Field) -> Result<usize, ParseError> {
        self.array::<3>(field).map(|&[a, b, c]| usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c))
    }

    pub(crate) fn u32(&mut self, field: Field) -> Result<u32, ParseError> {
        self.array::<4>(field).map(|b| u32::from_be_bytes(*b))
    }

    pub(crate) fn take(&mut self, len: usize, field: Field) -> Result<&'a [u8], ParseError> {
        let (head, rest) = self.rest.split_at_checked(len).ok_or(ParseError::Overrun { field })?;
        self.rest = rest;
        Ok(head)
    }

    /// A vector with a one-byte length prefix, whose length must lie in `min..=max`.
    pub(crate) fn vec_u8(&mut self, field: Field, min: usize, max: usize) -> Result<&'a [u8], ParseError> {
        let len = usize::from(self.u8(field)?);
        Self::check_len(field, len, min, max)?;
        self.take(len, field)
    }

    /// A vector with a two-byte length prefix, whose length must lie in `min..=max`.
    pub(crate) fn vec_u16(&mut self, field: Field, min: usize, max: usize) -> Result<&'a [u8], ParseError> {
        let len = usize::from(self.u16(field)?);
        Self::check_len(field, len, min, max)?;
        self.take(len, field)
    }

    /// Fails unless every byte has been read.
    pub(crate) fn finish(&self, field: Field) -> Result<(), ParseError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(ParseError::TrailingBytes { field })
        }
    }

    /// Passes on a value read for an iterator; after a failed read, reads nothing more, so a
    /// half-read entry can never make the iterator yield garbage.
    pub(crate) fn fuse<T>(&mut self, read: Result<T, ParseError>) -> Option<T> {
        if read.is_err() {
            self.rest = &[];
        }
        read.ok()
    }

    fn check_len(field: Field, len: usize, min: usize, max: usize) -> Result<(), ParseError> {
        if (min..=max).contains(&len) {
            Ok(())
        } else {
            Err(ParseError::BadLength { field, len })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_integers_big_endian() {
        let mut r = Reader::new(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(r.u8(Field::Random), Ok(1));
        assert_eq!(r.u16(Field::Random), Ok(0x0203));
        assert_eq!(r.u24(Field::Random), Ok(0x040506));
        assert_eq!(r.u32(Field::Random), Ok(0x0708090a));
        assert!(r.is_empty());
        assert_eq!(r.u8(Field::Random), Err(ParseError::Overrun { field: Field::Random }));
    }

    #[test]
    fn vectors_check_range_then_bounds() {
        let mut r = Reader::new(&[2, 0xaa, 0xbb, 0]);
        assert_eq!(r.vec_u8(Field::SessionId, 0, 32), Ok(&[0xaa, 0xbb][..]));
        assert_eq!(
            r.vec_u8(Field::CompressionMethods, 1, 255),
            Err(ParseError::BadLength { field: Field::CompressionMethods, len: 0 })
        );
        let mut r = Reader::new(&[0, 3, 1, 2]);
        assert_eq!(r.vec_u16(Field::Extensions, 0, 0xffff), Err(ParseError::Overrun { field: Field::Extensions }));
    }

    #[test]
    fn finish_reports_leftovers() {
        let mut r = Reader::new(&[1, 2]);
        assert_eq!(r.u8(Field::LegacyVersion), Ok(1));
        assert_eq!(r.finish(Field::HandshakeBody), Err(ParseError::TrailingBytes { field: Field::HandshakeBody }));
    }
}
