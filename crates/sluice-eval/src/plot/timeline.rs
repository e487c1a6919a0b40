//! The seed paper's "run time behaviour" figure: where in the trace each policy hits and
//! misses, one band per policy and one strip per cache size.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::style::{series, FONT};
use super::{render, text_err, Chart, Figure, PlotError};

/// Columns the request axis is cut into.
const COLUMNS: usize = 500;
/// Pixel height of one strip (one cache size of one policy).
const STRIP: u32 = 7;
/// Shades of the miss colour; equal neighbours merge into one rectangle (small SVGs).
const LEVELS: usize = 8;

struct Timeline<'a>(Figure<'a>);

/// Draws the hit/miss timeline into `path` (`.png` or `.svg`). Needs cells simulated with
/// timelines (`GridOptions::timeline`); cells without one are left blank.
///
/// # Errors
/// [`PlotError`] when the file cannot be written.
pub fn timeline(path: &Path, fig: Figure<'_>) -> Result<(), PlotError> {
    render(path, &Timeline(fig))
}

/// White for no misses, then light to dark red.
fn shade(level: usize) -> RGBColor {
    if level == 0 {
        return WHITE;
    }
    let f = level as f64 / (LEVELS - 1) as f64;
    let lerp = |a: f64, b: f64| (a + (b - a) * f) as u8;
    RGBColor(lerp(255.0, 140.0), lerp(215.0, 0.0), lerp(180.0, 0.0))
}

impl Chart for Timeline<'_> {
    fn size(&self) -> (u32, u32) {
        let rows = series(self.0.cells).len() as u32;
        let strips = self.0.headers.len().max(1) as u32;
        (1100, 150 + rows * (strips * STRIP + 12))
    }

    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, plotters::coord::Shift>) -> Result<(), String> {
        let fig = &self.0;
        let all = series(fig.cells);
        let rows = all.len().max(1) as f64;
        let n = fig.trace.requests.len().max(1);
        let sizes = fig.headers.len().max(1);
        root.fill(&WHITE).map_err(text_err)?;
        let centers: Vec<f64> = (0..all.len()).map(|k| rows - k as f64 - 0.5).collect();
        let labels: Vec<&str> = all.iter().map(|s| s.label).collect();
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("Hit/miss timeline: {}", fig.trace.name), (FONT, 24))
            .margin(15)
            .x_label_area_size(55)
            .y_label_area_size(170)
            .build_cartesian_2d(0.0..n as f64, 0.0..rows)
            .map_err(text_err)?;
        let sizes_text = match (fig.headers.first(), fig.headers.last()) {
            (Some(a), Some(b)) if sizes > 1 => format!("strips top to bottom: cache size {a} ... {b}"),
            (Some(a), _) => format!("cache size {a}"),
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc(format!(
                "request number; {sizes_text}; colour: share of misses per {} requests (white: all hits, dark red: all misses)",
                n.div_ceil(COLUMNS)
            ))
            .y_labels(0)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 14))
            .draw()
            .map_err(text_err)?;
        let cols = COLUMNS.min(n);
        let strip = 0.84 / sizes as f64;
        for (k, s) in all.iter().enumerate() {
            let top = rows - k as f64 - 0.08;
            for (j, cell) in s.cells.iter().enumerate() {
                let Some(t) = cell.result.timeline.as_ref() else { continue };
                let (y1, y0) = (top - j as f64 * strip, top - (j + 1) as f64 * strip + strip * 0.12);
                let level = |c: usize| {
                    let range = c * n / cols..(c + 1) * n / cols;
                    let len = range.len().max(1);
                    let misses = t.misses_in(range);
                    if misses == 0 {
                        0
                    } else {
                        1 + misses * (LEVELS - 2) / len
                    }
                };
                let mut c = 0;
                while c < cols {
                    let l = level(c);
                    let mut end = c + 1;
                    while end < cols && level(end) == l {
                        end += 1;
                    }
                    if l > 0 {
                        let (x0, x1) = ((c * n / cols) as f64, (end * n / cols) as f64);
                        chart
                            .draw_series(std::iter::once(Rectangle::new([(x0, y0), (x1, y1)], shade(l).filled())))
                            .map_err(text_err)?;
                    }
                    c = end;
                }
            }
        }
        let label_style = TextStyle::from((FONT, 15).into_font()).pos(Pos::new(HPos::Right, VPos::Center));
        for (label, y) in labels.iter().zip(&centers) {
            let (px, py) = chart.backend_coord(&(0.0, *y));
            root.draw(&Text::new(label.to_string(), (px - 10, py), label_style.clone())).map_err(text_err)?;
        }
        root.present().map_err(text_err)
    }
}
