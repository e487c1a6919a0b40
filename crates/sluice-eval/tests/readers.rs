//! One fixture per trace format (tests/fixtures, see its README), compressed inputs, and
//! malformed lines: counted with their line numbers, never fatal.

use std::path::PathBuf;

use sluice_eval::trace::{encode_oracle_general, load, load_from, Filter, Format, ReadOptions, Trace};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn read(name: &str, format: Option<Format>) -> Trace {
    let opts = ReadOptions { format, ..ReadOptions::default() };
    load(&fixture(name), &opts).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// (records, kept, filtered, malformed, malformed line numbers, distinct objects)
fn summary(t: &Trace) -> (u64, u64, u64, u64, Vec<u64>, u64) {
    let s = &t.stats;
    (s.records, s.kept, s.filtered, s.malformed, s.errors.iter().map(|e| e.0).collect(), t.objects)
}

#[test]
fn squid_native_access_log() {
    let t = read("access.log", Some(Format::Squid));
    // Line 6 is blank (not a record); 1 (status 400) and 7 (CONNECT) are filtered.
    assert_eq!(summary(&t), (7, 3, 2, 2, vec![4, 8], 2));
    assert_eq!(t.requests.iter().map(|r| (r.id, r.size)).collect::<Vec<_>>(), vec![(0, 11719), (1, 5120), (0, 11719)]);
    assert_eq!(t.stats.errors[1].1, "bad byte count");
    assert_eq!(summary(&read("access.log", None)), summary(&t), "auto-detected as squid");
}

#[test]
fn common_and_combined_log() {
    let t = read("common.log", Some(Format::Clf));
    assert_eq!(summary(&t), (6, 3, 2, 1, vec![5], 2));
    assert_eq!(t.object_bytes, 2326 + 5120);
    assert_eq!(summary(&read("common.log", None)), summary(&t), "auto-detected as clf");
}

#[test]
fn epa_ita_log() {
    let t = read("epa.txt", Some(Format::Epa));
    assert_eq!(summary(&t), (6, 4, 1, 1, vec![5], 3));
    assert_eq!(t.requests[3].id, t.requests[0].id, "same URL, same object");
    assert_eq!(summary(&read("epa.txt", None)), summary(&t), "auto-detected as epa");
}

#[test]
fn csv_with_named_columns() {
    let cols = "key=url,size=bytes,status=status".parse().unwrap();
    let t = read("trace.csv", Some(Format::Csv(cols)));
    assert_eq!(summary(&t), (6, 3, 1, 2, vec![6, 7], 2));
    let cols = "key=2,size=4".parse().unwrap();
    let opts = ReadOptions { format: Some(Format::Csv(cols)), filter: Filter::All, limit: None };
    let t = load(&fixture("trace.csv"), &opts).unwrap();
    // No header: line 1 is malformed (size "bytes"), as are lines 6 and 7.
    assert_eq!(summary(&t), (7, 4, 0, 3, vec![1, 6, 7], 3));
    let missing = "key=url,size=length".parse().unwrap();
    let err = load(&fixture("trace.csv"), &ReadOptions::new(Format::Csv(missing))).unwrap_err();
    assert!(err.to_string().contains("no column \"length\""), "{err}");
}

#[test]
fn gzip_and_zstd_made_by_the_command_line_tools() {
    let plain = summary(&read("common.log", Some(Format::Clf)));
    assert_eq!(summary(&read("common.log.gz", Some(Format::Clf))), plain);
    assert_eq!(summary(&read("common.log.zst", Some(Format::Clf))), plain);
    assert_eq!(summary(&read("common.log.zst", None)), plain, "detection sees the decompressed text");
}

#[test]
fn oracle_general_binary_with_a_truncated_tail() {
    let mut bytes = encode_oracle_general([(10, 100), (20, 200), (10, 100)]);
    bytes.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7]);
    let t = load_from("mem", std::io::Cursor::new(bytes.clone()), &ReadOptions::new(Format::OracleGeneral)).unwrap();
    assert_eq!(summary(&t), (4, 3, 0, 1, vec![4], 2));
    assert_eq!(t.object_bytes, 300);
    assert!(t.stats.errors[0].1.contains("truncated"));
    // Also through zstd (two frames, as multi-threaded zstd writes them).
    let half = 24;
    let mut zst = ruzstd::encoding::compress_to_vec(&bytes[..half], ruzstd::encoding::CompressionLevel::Fastest);
    zst.extend(ruzstd::encoding::compress_to_vec(&bytes[half..], ruzstd::encoding::CompressionLevel::Fastest));
    let z = load_from("mem.zst", std::io::Cursor::new(zst), &ReadOptions::new(Format::OracleGeneral)).unwrap();
    assert_eq!(summary(&z), summary(&t));
}

#[test]
fn real_squid_log_is_mostly_tunnels() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/squid-access-2023.log");
    let t = load(&path, &ReadOptions::default()).unwrap();
    assert_eq!((t.stats.records, t.stats.malformed), (1060, 0));
    assert_eq!(t.stats.kept, 16, "GET with status 200");
    let all = load(&path, &ReadOptions { filter: Filter::All, ..ReadOptions::default() }).unwrap();
    assert_eq!(all.stats.kept, 1060);
}

#[test]
fn limit_and_undetectable_formats() {
    let opts = ReadOptions { limit: Some(2), ..ReadOptions::new(Format::Epa) };
    assert_eq!(load(&fixture("epa.txt"), &opts).unwrap().requests.len(), 2);
    let err = load(&fixture("trace.csv"), &ReadOptions::default()).unwrap_err().to_string();
    assert!(err.contains("--format"), "{err}");
}

#[test]
fn zstd_with_two_frames() {
    let t = read("two-frames.epa.zst", Some(Format::Epa));
    assert_eq!(summary(&t), (2, 2, 0, 0, vec![], 2));
}
