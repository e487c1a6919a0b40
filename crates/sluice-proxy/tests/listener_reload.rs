//! Listeners across a configuration reload (`crate::listeners`): a listener whose address
//! stays keeps its socket and connections, a new address is listened on, a removed one
//! stops accepting and its connections close gracefully (a request in flight is answered
//! first), and an address that cannot be bound rejects the reload.

mod common;

use common::raw::{get_on, read_response};
use common::Harness;
use sluice_proxy::config::{Config, ListenerConfig};
use sluice_proxy::generation::ReloadError;
use sluice_testkit::Reply;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A reverse proxy whose origin answers `/p`, never stored, and `/slow` after 300 ms.
async fn proxy() -> Harness {
    let h = Harness::reverse().await;
    h.origin.on("/p", Reply::ok("origin").header("Cache-Control", "no-store"));
    h.origin.on("/slow", Reply::ok("slow").header("Cache-Control", "no-store").delay(Duration::from_millis(300)));
    h
}

/// The running configuration with a second reverse listener on an ephemeral port.
fn with_second_listener(h: &Harness) -> Config {
    let mut config = h.proxy.state().config.clone();
    let first = config.listener[0].clone();
    config.listener.push(ListenerConfig { addr: "127.0.0.1:0".parse().unwrap(), ..first });
    config
}

#[tokio::test]
async fn a_reload_listens_on_a_new_address_and_keeps_the_running_ones() {
    let h = proxy().await;
    let first = h.addr();
    let mut kept = tokio::net::TcpStream::connect(first).await.unwrap();
    assert!(get_on(&mut kept, "/p").await.ends_with("origin"));

    let report = h.proxy.generations().reload(with_second_listener(&h)).await.expect("reloaded");
    let listeners = &report.listeners;
    assert_eq!((listeners.listening.len(), listeners.listening[0]), (2, first), "{listeners:?}");
    assert_eq!((listeners.opened.clone(), listeners.closed.clone()), (vec![listeners.listening[1]], vec![]));
    assert_eq!(h.proxy.listeners(), listeners.listening);

    let second = listeners.listening[1];
    assert_eq!(sluice_testkit::client::get(second, "/p", &[]).await.text(), "origin", "the new listener serves");
    assert_eq!(sluice_testkit::client::get(first, "/p", &[]).await.text(), "origin", "the old one still accepts");
    assert!(get_on(&mut kept, "/p").await.ends_with("origin"), "its open connection stays");
}

#[tokio::test]
async fn a_listener_left_out_of_the_file_stops_accepting_and_closes_its_connections_gracefully() {
    let h = proxy().await;
    let report = h.proxy.generations().reload(with_second_listener(&h)).await.expect("reloaded");
    let second = report.listeners.listening[1];
    let mut idle = tokio::net::TcpStream::connect(second).await.unwrap();
    assert!(get_on(&mut idle, "/p").await.ends_with("origin"));
    let mut busy = tokio::net::TcpStream::connect(second).await.unwrap();
    busy.write_all(b"GET /slow HTTP/1.1\r\nHost: a\r\n\r\n").await.unwrap();
    h.eventually("the origin to receive /slow", |h| h.origin.hits("/slow") == 1).await;

    // Both listeners are configured as 127.0.0.1:0: the one left is the first.
    let mut config = h.proxy.state().config.clone();
    config.listener.truncate(1);
    let report = h.proxy.generations().reload(config).await.expect("reloaded");
    assert_eq!((report.listeners.listening.clone(), report.listeners.closed.clone()), (vec![h.addr()], vec![second]));

    let refused = tokio::net::TcpStream::connect(second).await;
    assert!(refused.is_err(), "the socket is closed when the reload returns");
    let answered = read_response(&mut busy).await;
    assert!(answered.starts_with("HTTP/1.1 200") && answered.ends_with("slow"), "in flight: answered: {answered}");
    assert_eq!(read_to_end(&mut busy).await, 0, "then closed");
    assert_eq!(read_to_end(&mut idle).await, 0, "an idle connection is closed");
    assert_eq!(h.get("/p").await.text(), "origin", "the listener kept serves on");
}

#[tokio::test]
async fn an_address_that_cannot_be_bound_rejects_the_reload() {
    let h = proxy().await;
    let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut config = with_second_listener(&h);
    config.listener[1].addr = taken.local_addr().unwrap();
    config.route[0].origin = Some("http://127.0.0.1:1".into());
    let before = h.proxy.state();
    let err = h.proxy.generations().reload(config).await.unwrap_err();
    assert!(matches!(err, ReloadError::Listen(_)), "{err:?}");
    assert!(err.to_string().contains(&format!("cannot listen on {}", taken.local_addr().unwrap())), "{err}");
    assert!(Arc::ptr_eq(&before, &h.proxy.state()), "the same generation runs");
    assert_eq!(h.proxy.listeners(), [h.addr()]);
    assert_eq!(h.get("/p").await.text(), "origin", "routes unchanged");
}

#[tokio::test]
async fn a_listener_moved_to_another_address_is_closed_on_the_old_one() {
    let h = proxy().await;
    let old = h.addr();
    let free = free_port().await;
    let mut config = h.proxy.state().config.clone();
    config.listener[0].addr = free;
    let report = h.proxy.generations().reload(config).await.expect("reloaded");
    assert_eq!((report.listeners.opened.clone(), report.listeners.closed.clone()), (vec![free], vec![old]));
    assert_eq!(sluice_testkit::client::get(free, "/p", &[]).await.text(), "origin");
    assert!(tokio::net::TcpStream::connect(old).await.is_err());
}

/// Reads `conn` until the proxy closes it; returns what came (0: nothing).
async fn read_to_end(conn: &mut tokio::net::TcpStream) -> usize {
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut rest)).await.expect("closed").unwrap_or(0)
}

/// A port on 127.0.0.1 nothing listens on (just freed by the system).
async fn free_port() -> SocketAddr {
    let probe = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    probe.local_addr().unwrap()
}
