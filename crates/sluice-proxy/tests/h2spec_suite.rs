//! h2spec (summerwind/h2spec, the conformance suite for HTTP/2, RFC 9113 and its RFC 7540
//! predecessor, and for HPACK, RFC 7541), run in strict mode against Sluice's HTTP/2
//! listeners: TLS with ALPN `h2`, and cleartext with prior knowledge (h2c). Each of its test
//! cases opens connections, sends frames (good ones and every kind of protocol error) and
//! checks the answer: the frames, `GOAWAY` or `RST_STREAM` with the right error code, or the
//! connection closed. `scripts/install-deps.sh` builds the pinned suite (`scripts/h2spec/`).
//!
//! Every case must pass, except those listed for a listener, each with why; a case that starts
//! passing must leave the list too.

mod common;

use common::Harness;
use sluice_proxy::config::{Mode, TlsConfig};
use sluice_testkit::Reply;
use std::path::PathBuf;

/// The cases a cleartext listener does not pass: (section, case, why).
const CLEARTEXT_EXPECTED: &[(&str, &str, &str)] = &[(
    "http2/3.5",
    "Sends invalid connection preface",
    "a cleartext listener serves HTTP/1.1 and h2c on one port: bytes that are not the HTTP/2 \
     preface are an HTTP/1.x request to it, here a malformed one, answered 400 before the \
     connection is closed (h2spec wants it closed without an answer)",
)];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2spec_passes_over_tls_with_alpn() {
    let dir = tempfile::tempdir().unwrap();
    let key = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let (cert, pem) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, key.cert.pem()).unwrap();
    std::fs::write(&pem, key.signing_key.serialize_pem()).unwrap();
    let h = Harness::build(Mode::Reverse, move |c| c.listener[0].tls = Some(TlsConfig::single(cert, pem))).await;
    assert_eq!(failures(&h, &["--tls", "--insecure"]).await, Vec::<(String, String)>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2spec_passes_over_cleartext_with_prior_knowledge_but_for_the_documented_exception() {
    let h = Harness::reverse().await;
    let expected: Vec<(String, String)> =
        CLEARTEXT_EXPECTED.iter().map(|(section, case, _)| (section.to_string(), case.to_string())).collect();
    assert_eq!(failures(&h, &[]).await, expected);
}

/// Runs the whole suite, strict cases included, against `h`'s listener with `flags`, on a
/// path the origin answers, and gives the failed cases as (section, case), in the suite's
/// order.
async fn failures(h: &Harness, flags: &[&str]) -> Vec<(String, String)> {
    h.origin.on("/h2spec", Reply::ok("conformance").header("Cache-Control", "max-age=60"));
    let report = tempfile::NamedTempFile::new().unwrap();
    let port = h.addr().port().to_string();
    let run = tokio::process::Command::new(h2spec())
        .args(["--strict", "--host", "127.0.0.1", "--port", &port, "--path", "/h2spec", "--timeout", "10"])
        .args(flags)
        .arg("--junit-report")
        .arg(report.path())
        .kill_on_drop(true)
        .output()
        .await
        .expect("run h2spec");
    let report = std::fs::read_to_string(report.path()).unwrap_or_default();
    let cases = report.matches("<testcase ").count();
    assert!(
        cases > 140,
        "the whole suite ran ({cases} cases):\n{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let failed = failed_cases(&report);
    println!("h2spec {flags:?}: {cases} cases, {} failed: {failed:?}", failed.len());
    failed
}

/// The (package, classname) of the failed or erring test cases of a JUnit report as h2spec
/// writes it: one `<testcase package=".." classname="..">` element per case, holding a
/// `<failure>` or `<error>` element when it did not pass.
fn failed_cases(report: &str) -> Vec<(String, String)> {
    report
        .split("<testcase ")
        .skip(1)
        .map(|case| case.split("</testcase>").next().unwrap_or(case))
        .filter(|case| case.contains("<failure") || case.contains("<error"))
        .map(|case| (attribute(case, "package"), attribute(case, "classname")))
        .collect()
}

/// An attribute's value in an element's text, XML entities of quotes and brackets decoded.
fn attribute(element: &str, name: &str) -> String {
    let start = format!("{name}=\"");
    let value = element.split(&start).nth(1).and_then(|rest| rest.split('"').next()).unwrap_or("");
    value.replace("&#34;", "\"").replace("&quot;", "\"").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
}

/// Where `scripts/h2spec/install.sh` builds h2spec.
fn h2spec() -> PathBuf {
    let binary = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/test-deps/h2spec/h2spec");
    assert!(binary.exists(), "no h2spec at {}: run scripts/install-deps.sh", binary.display());
    binary
}

#[test]
fn failed_cases_are_read_from_the_report() {
    let report = r#"<testsuites><testsuite name="3.5">
    <testcase package="http2/3.5" classname="Sends client connection preface" time="0.01"></testcase>
    <testcase package="http2/3.5" classname="Sends invalid connection preface" time="0.02"><failure message="x">y</failure></testcase>
    <testcase package="hpack/6.1" classname="Sends a &#34;quoted&#34; field" time="0.1"><error>z</error></testcase>
    </testsuite></testsuites>"#;
    assert_eq!(
        failed_cases(report),
        [
            ("http2/3.5".to_string(), "Sends invalid connection preface".to_string()),
            ("hpack/6.1".to_string(), "Sends a \"quoted\" field".to_string())
        ]
    );
}
