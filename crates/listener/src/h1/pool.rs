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

/// Gives a read buffer back; it must be empty. A request head was split off its front (header
/// values are slices of it): once the request is over nothing else holds that memory, and the
/// buffer takes its whole capacity back in place. One still shared, or grown large, is dropped.
pub(crate) fn give_read(mut buf: BytesMut) {
    buf.clear();
    if buf.capacity() < READ_CAPACITY && !buf.try_reclaim(READ_CAPACITY) {
        return;
    }
    if buf.capacity() > 4 * READ_CAPACITY {
        return;
    }
    // `try_with`: a buffer can be given back from a drop (a connection's read state), which may
    // run while the thread's locals are being torn down; then it is simply freed.
    let _ = READ.try_with(|p| {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_buffer_comes_back_whole_once_the_head_split_off_it_is_dropped() {
        let mut buf = take_read();
        let start = buf.as_ptr();
        buf.extend_from_slice(b"GET / HTTP/1.1\r\nhost: a\r\n\r\n");
        let head = buf.split_to(buf.len()).freeze();
        assert!(buf.capacity() < READ_CAPACITY);
        drop(head);
        give_read(buf);
        let again = take_read();
        assert_eq!(again.as_ptr(), start, "the same memory, not a new allocation");
        assert!(again.capacity() >= READ_CAPACITY);
    }

    #[test]
    fn a_read_state_dropped_after_the_pool_is_torn_down_frees_its_buffer() {
        use super::super::body::ReadState;
        use std::cell::RefCell;
        thread_local! {
            static HOLDER: RefCell<Option<ReadState>> = const { RefCell::new(None) };
        }
        let ended = std::thread::spawn(|| {
            // Registered first, so torn down last: after the pool, which the state's drop uses.
            HOLDER.with(|h| h.borrow_mut().take());
            give_read(take_read());
            let state = ReadState { rbuf: take_read(), framing: Default::default(), trailers: Default::default() };
            HOLDER.with(|h| *h.borrow_mut() = Some(state));
        })
        .join();
        assert!(ended.is_ok(), "the thread ended cleanly");
    }

    #[test]
    fn a_read_buffer_still_shared_with_a_live_head_is_not_kept() {
        let mut buf = take_read();
        buf.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        let head = buf.split_to(buf.len()).freeze();
        let start = head.as_ptr();
        give_read(buf);
        let other = take_read();
        assert_ne!(other.as_ptr(), start);
        drop(head);
    }
}
