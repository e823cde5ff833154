//! Per-worker pools of read and write buffers. An idle connection gives its buffers back (so
//! thousands of idle keep-alive connections hold none), and the next request on this worker takes
//! one back without going through the allocator. Each pool is bounded; extra buffers are freed.

use bytes::BytesMut;
use std::cell::RefCell;

/// Buffers kept per worker and kind.
const KEEP: usize = 256;
/// Capacity of a pooled read buffer: most request heads fit.
pub(crate) const READ_CAPACITY: usize = 2048;
/// Capacity of a pooled write buffer: a response head and a small body.
pub(crate) const WRITE_CAPACITY: usize = 1024;

thread_local! {
    static READ: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
    static WRITE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// A read buffer with room for a request head.
pub(crate) fn take_read() -> BytesMut {
    READ.with(|p| p.borrow_mut().pop()).unwrap_or_else(|| BytesMut::with_capacity(READ_CAPACITY))
}

/// Gives a read buffer back; it must be empty. One still sharing its memory with a request's
/// header values would not be reusable in place, so only whole, unshared-size buffers are kept.
pub(crate) fn give_read(mut buf: BytesMut) {
    buf.clear();
    if buf.capacity() < READ_CAPACITY || buf.capacity() > 4 * READ_CAPACITY {
        return;
    }
    READ.with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < KEEP {
            p.push(buf);
        }
    });
}

/// A write buffer.
pub(crate) fn take_write() -> Vec<u8> {
    WRITE.with(|p| p.borrow_mut().pop()).unwrap_or_else(|| Vec::with_capacity(WRITE_CAPACITY))
}

/// Gives a write buffer back.
pub(crate) fn give_write(mut buf: Vec<u8>) {
    buf.clear();
    if buf.capacity() < WRITE_CAPACITY || buf.capacity() > 64 * 1024 {
        return;
    }
    WRITE.with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < KEEP {
            p.push(buf);
        }
    });
}
