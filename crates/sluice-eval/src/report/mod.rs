//! Text tables and CSV for grid results.

mod csv_out;
mod table;

pub use csv_out::write_csv;
pub use table::{render_table, Metric};

/// Bytes in binary units with one decimal (`1.5 MiB`).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let groups: Vec<&str> = digits.as_bytes().rchunks(3).rev().map(|g| std::str::from_utf8(g).unwrap_or("?")).collect();
    groups.join(",")
}

/// How a capacity reads in a column header: `10% (402)` or `64.0 MiB`.
pub fn size_header(spec: &crate::sim::SizeSpec, capacity: sluice_policy::Capacity) -> String {
    use sluice_policy::Capacity;
    let abs = match capacity {
        Capacity::Objects(n) => n.to_string(),
        Capacity::Bytes(n) => human_bytes(n),
    };
    match spec {
        crate::sim::SizeSpec::Percent(p) => format!("{p}% ({abs})"),
        _ => abs,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn human_bytes_rounds_to_binary_units() {
        assert_eq!(super::human_bytes(512), "512 B");
        assert_eq!(super::human_bytes(1536), "1.5 KiB");
        assert_eq!(super::human_bytes(64 << 20), "64.0 MiB");
        assert_eq!(super::thousands(1_234_567), "1,234,567");
        assert_eq!(super::thousands(999), "999");
    }
}
