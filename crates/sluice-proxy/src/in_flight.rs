//! Requests in progress per client (`client.max_requests_per_client`), as nginx's
//! `limit_conn` keyed by the client's address, which counts each HTTP/2 stream as a
//! connection. Without it, one client could hold every origin connection the proxy may open
//! (`upstream.max_connections`): an HTTP/2 connection carries up to 256 streams, each of
//! which may wait on an origin, and a client may open many connections.
//!
//! A request counts from the moment it passed the rate limits until its transaction ends
//! (the response's last byte sent, or the client gone; a `CONNECT` tunnel for as long as it
//! lives); one over the limit gets `429 Too Many Requests` with `Retry-After: 1`, before any
//! module, cache or origin work. Hits count like misses: the limit is on what clients ask.
//! A client is its address (after `access.forwarded_for_from`), an IPv6 client its /64, as
//! for `[[rate_limit]]`.
//!
//! Memory: an entry per client with a request in progress, none for the others. The counts
//! outlive configuration reloads (they are about requests still running); a reload changes
//! only the limit they are held to.

use crate::client_map::ClientMap;
use std::net::IpAddr;
use std::sync::Arc;

/// The requests in progress of each client.
#[derive(Debug, Default)]
pub struct InFlight {
    counts: ClientMap<usize>,
}

/// One request counted for its client; dropping it ends the request's count.
#[derive(Debug)]
pub struct Counted {
    in_flight: Arc<InFlight>,
    client: IpAddr,
}

impl InFlight {
    /// Counts a request of `client` if the client has fewer than `limit` in progress;
    /// `None` (nothing counted) if it has `limit` already.
    pub fn enter(self: &Arc<Self>, client: IpAddr, limit: usize) -> Option<Counted> {
        let client = ClientMap::<usize>::key(client);
        let mut shard = self.counts.lock(client);
        let count = shard.entry(client).or_insert(0);
        if *count >= limit {
            if *count == 0 {
                shard.remove(&client);
            }
            return None;
        }
        *count += 1;
        Some(Counted { in_flight: Arc::clone(self), client })
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut shard = self.in_flight.counts.lock(self.client);
        if let std::collections::hash_map::Entry::Occupied(mut count) = shard.entry(self.client) {
            *count.get_mut() -= 1;
            if *count.get() == 0 {
                count.remove();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_holds_at_most_the_limit_and_its_entry_goes_with_its_last_request() {
        let counts = Arc::new(InFlight::default());
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let first = counts.enter(a, 2).expect("the first");
        let second = counts.enter(a, 2).expect("the second");
        assert!(counts.enter(a, 2).is_none(), "a third is over the limit");
        assert!(counts.enter(b, 2).is_some(), "another client is not held to a's count");
        drop(first);
        let third = counts.enter(a, 2).expect("room again");
        drop((second, third));
        assert_eq!(counts.counts.len(), 0, "no entry left behind");
        assert!(counts.enter(a, 0).is_none(), "a limit of none admits nothing");
        assert_eq!(counts.counts.len(), 0);
    }

    #[test]
    fn an_ipv6_client_is_its_64() {
        let counts = Arc::new(InFlight::default());
        let one: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let other_in_the_64: IpAddr = "2001:db8:1:2::ffff".parse().unwrap();
        let _held = counts.enter(one, 1).expect("the first");
        assert!(counts.enter(other_in_the_64, 1).is_none(), "the same subscriber");
        assert!(counts.enter("2001:db8:1:3::1".parse().unwrap(), 1).is_some(), "another /64");
    }
}
