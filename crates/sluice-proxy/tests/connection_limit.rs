//! `client.max_connections` (`crate::conn_limit`): past the limit a listener stops
//! accepting, and the next connection is served as soon as an open one closes, or the limit
//! is raised by a reload; the limit and the waits show in `/stats` and `/metrics`.

mod common;

use common::admin::{admin, json};
use common::raw::{get_on, read_response};
use common::Harness;
use sluice_proxy::config::Mode;
use sluice_testkit::Reply;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// A reverse proxy that serves at most `limit` client connections at once.
async fn limited(limit: usize) -> Harness {
    let h = Harness::build(Mode::Reverse, |c| c.client.max_connections = limit).await;
    h.origin.on("/p", Reply::ok("origin").header("Cache-Control", "no-store"));
    h
}

/// A connection served once and kept open.
async fn served(h: &Harness) -> TcpStream {
    let mut conn = TcpStream::connect(h.addr()).await.unwrap();
    assert!(get_on(&mut conn, "/p").await.ends_with("origin"));
    conn
}

/// A connection whose request is sent, and which the proxy has accepted and holds until a
/// slot frees (its wait counted in `/stats`).
async fn waiting(h: &Harness, waits_before: u64) -> TcpStream {
    let mut conn = TcpStream::connect(h.addr()).await.unwrap();
    conn.write_all(b"GET /p HTTP/1.1\r\nHost: a\r\n\r\n").await.unwrap();
    let counted = async {
        while client_stats(h).await["connection_waits"] != waits_before + 1 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), counted).await.expect("the connection waits");
    conn
}

async fn client_stats(h: &Harness) -> serde_json::Value {
    json(&admin(h, "GET", "/stats", &[], None).await)["client"].clone()
}

#[tokio::test]
async fn past_the_limit_a_connection_waits_until_an_open_one_closes() {
    let h = limited(2).await;
    let first = served(&h).await;
    let _second = served(&h).await;
    let mut third = waiting(&h, 0).await;
    let stats = client_stats(&h).await;
    assert_eq!((stats["connections_limit"].clone(), stats["connections_total"].clone()), (2.into(), 2.into()));

    drop(first);
    let answer = read_response(&mut third).await;
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("origin"), "{answer}");
    assert_eq!(client_stats(&h).await["connections_total"], 3);
    let metrics = admin(&h, "GET", "/metrics", &[], None).await.text();
    assert!(metrics.contains("sluice_client_connections_limit 2\n"), "{metrics}");
    assert!(metrics.contains("sluice_client_connection_waits_total 1\n"), "{metrics}");
}

#[tokio::test]
async fn a_reload_that_raises_the_limit_serves_the_waiting_connection() {
    let h = limited(1).await;
    let _open = served(&h).await;
    let mut waiting = waiting(&h, 0).await;

    let mut config = h.proxy.state().config.clone();
    config.client.max_connections = 2;
    h.proxy.generations().reload(config).await.expect("reloaded");
    let answer = read_response(&mut waiting).await;
    assert!(answer.ends_with("origin"), "served with the first still open: {answer}");
    assert_eq!(client_stats(&h).await["connections_limit"], 2);
}

#[tokio::test]
async fn a_lower_limit_takes_effect_as_connections_close() {
    let h = limited(3).await;
    let (first, second) = (served(&h).await, served(&h).await);
    let mut config = h.proxy.state().config.clone();
    config.client.max_connections = 1;
    h.proxy.generations().reload(config).await.expect("reloaded");
    assert_eq!(client_stats(&h).await["connections_limit"], 1);

    let mut third = waiting(&h, 0).await;
    drop((first, second));
    let answer = read_response(&mut third).await;
    assert!(answer.ends_with("origin"), "{answer}");
    let _fourth = waiting(&h, 1).await;
    assert_eq!(client_stats(&h).await["connections_total"], 3, "one open, the fourth waits: the limit is 1");
}
