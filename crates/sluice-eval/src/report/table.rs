//! The results table printed by `sluice sim`: one row per policy, one column per size.

use std::fmt::Write;

use crate::sim::{Cell, LatencyModel};

/// Which number a table shows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Metric {
    /// Misses per request.
    ObjectMissRatio,
    /// Missed bytes per requested byte.
    ByteMissRatio,
    /// Estimated total access time in seconds under a latency model.
    AccessTime(LatencyModel),
}

impl Metric {
    fn title(&self) -> &'static str {
        match self {
            Metric::ObjectMissRatio => "object miss ratio",
            Metric::ByteMissRatio => "byte miss ratio",
            Metric::AccessTime(_) => "estimated access time (s)",
        }
    }

    fn value(&self, cell: &Cell) -> String {
        match self {
            Metric::ObjectMissRatio => format!("{:.4}", cell.result.miss_ratio()),
            Metric::ByteMissRatio => format!("{:.4}", cell.result.byte_miss_ratio()),
            Metric::AccessTime(m) => format!("{:.1}", m.access_time_s(&cell.result)),
        }
    }
}

/// Renders `cells` (from `run_grid`) as an aligned text table; `headers[i]` labels size `i`.
/// The best online policy of each column is marked with `*`.
pub fn render_table(cells: &[Cell], headers: &[String], metric: Metric) -> String {
    let mut rows: Vec<(&str, Vec<String>)> = Vec::new();
    for cell in cells {
        let label = cell.contender.label();
        if rows.last().is_none_or(|(l, _)| *l != label) {
            rows.push((label, vec![String::new(); headers.len()]));
        }
        if let Some((_, vals)) = rows.last_mut() {
            vals[cell.size_index] = metric.value(cell);
        }
    }
    for (i, _) in headers.iter().enumerate() {
        let best = cells
            .iter()
            .filter(|c| c.size_index == i && !c.contender.is_oracle())
            .map(|c| metric.value(c))
            .min_by(|a, b| a.parse::<f64>().unwrap_or(f64::MAX).total_cmp(&b.parse::<f64>().unwrap_or(f64::MAX)));
        for (label, vals) in &mut rows {
            let oracle = cells.iter().any(|c| c.contender.label() == *label && c.contender.is_oracle());
            if !oracle && best.as_ref() == Some(&vals[i]) {
                vals[i].push('*');
            }
        }
    }
    let first = rows.iter().map(|(l, _)| l.len()).chain([6]).max().unwrap_or(6);
    let widths: Vec<usize> = headers
        .iter()
        .enumerate()
        .map(|(i, h)| rows.iter().map(|(_, v)| v[i].len()).chain([h.len()]).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    let _ = writeln!(out, "{} (* = best online policy)", metric.title());
    let _ = write!(out, "{:<first$}", "policy");
    for (h, w) in headers.iter().zip(&widths) {
        let _ = write!(out, "  {h:>w$}");
    }
    out.push('\n');
    for (label, vals) in &rows {
        let _ = write!(out, "{label:<first$}");
        for (v, w) in vals.iter().zip(&widths) {
            let _ = write!(out, "  {v:>w$}");
        }
        out.push('\n');
    }
    let bytes = cells.iter().any(|c| matches!(c.capacity, sluice_policy::Capacity::Bytes(_)));
    if bytes && cells.iter().any(|c| c.contender.is_oracle()) {
        out.push_str("note: with byte capacities no Belady row is an exact optimum (both are heuristics)\n");
    }
    out
}
