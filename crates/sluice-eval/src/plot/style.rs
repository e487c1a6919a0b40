//! Shared look: the embedded font, the palette, the x axis of size-sweep figures.

use std::sync::Once;

use plotters::style::{FontStyle, RGBColor};

use crate::sim::{Cell, Unit};
use crate::trace::Trace;

/// Font family name the figures use.
pub(super) const FONT: &str = "sans-serif";

/// Registers the embedded DejaVu Sans once per process.
pub(super) fn register_fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Registration only fails on an invalid font file; the embedded one is valid.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
        let _ = plotters::style::register_font(FONT, FontStyle::Bold, dejavu::sans::bold());
    });
}

/// Distinguishable line colours (Tableau 10 and two darker extras); oracles are black.
const PALETTE: [RGBColor; 12] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 128),
    RGBColor(128, 64, 0),
];

/// Colour of the `i`-th online series.
pub(super) fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// One series of a size sweep: label, oracle flag, and the cells in increasing capacity.
pub(super) struct Series<'a> {
    pub label: &'static str,
    pub oracle: bool,
    pub cells: Vec<&'a Cell>,
}

/// Groups cells by contender, each sorted by capacity.
pub(super) fn series(cells: &[Cell]) -> Vec<Series<'_>> {
    let mut out: Vec<Series<'_>> = Vec::new();
    for c in cells {
        match out.iter_mut().find(|s| s.label == c.contender.label()) {
            Some(s) => s.cells.push(c),
            None => out.push(Series { label: c.contender.label(), oracle: c.contender.is_oracle(), cells: vec![c] }),
        }
    }
    for s in &mut out {
        s.cells.sort_by_key(|c| c.capacity.limit());
    }
    out
}

/// X value of a cell: its capacity as a percentage of the trace's distinct objects or bytes.
pub(super) fn x_percent(trace: &Trace, unit: Unit, cell: &Cell) -> f64 {
    let total = match unit {
        Unit::Objects => trace.objects,
        Unit::Bytes => trace.object_bytes,
    };
    if total == 0 {
        0.0
    } else {
        cell.capacity.limit() as f64 * 100.0 / total as f64
    }
}

/// X axis caption for size sweeps.
pub(super) fn x_caption(trace: &Trace, unit: Unit) -> String {
    match unit {
        Unit::Objects => format!("cache size (% of the {} distinct objects)", trace.objects),
        Unit::Bytes => {
            format!("cache size (% of the {} of distinct objects)", crate::report::human_bytes(trace.object_bytes))
        }
    }
}
