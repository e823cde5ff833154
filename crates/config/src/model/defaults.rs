//! Defaults of the fields the configuration file may leave out, named in `#[serde(default = …)]`.

use crate::units::{ByteSize, Duration};

pub fn backlog() -> u32 {
    4096
}
pub fn max_connections() -> usize {
    20_000
}
pub fn https_port() -> u16 {
    443
}
pub fn yes() -> bool {
    true
}
pub fn redis_prefix() -> String {
    "gatehouse".into()
}
pub fn redis_connect_timeout() -> Duration {
    Duration::secs(1)
}
pub fn redis_command_timeout() -> Duration {
    Duration::millis(200)
}
pub fn scan_interval() -> Duration {
    Duration::secs(2)
}
pub fn header_read_timeout() -> Duration {
    Duration::secs(10)
}
pub fn body_read_timeout() -> Duration {
    Duration::secs(60)
}
pub fn send_timeout() -> Duration {
    Duration::secs(60)
}
pub fn keepalive_timeout() -> Duration {
    Duration::secs(75)
}
pub fn max_header_bytes() -> ByteSize {
    ByteSize(64 << 10)
}
pub fn max_requests_per_connection() -> u64 {
    10_000
}
pub fn http2_max_concurrent_streams() -> u32 {
    256
}
pub fn zero() -> Duration {
    Duration::secs(0)
}
pub fn ping_timeout() -> Duration {
    Duration::secs(20)
}
pub fn weight() -> u32 {
    1
}
pub fn retries() -> u32 {
    1
}
pub fn hc_interval() -> Duration {
    Duration::secs(5)
}
pub fn hc_timeout() -> Duration {
    Duration::secs(2)
}
pub fn rise() -> u32 {
    2
}
pub fn fall() -> u32 {
    3
}
pub fn max_body() -> ByteSize {
    ByteSize(16 << 20)
}
