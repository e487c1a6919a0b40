//! Figures of a grid run, as PNG or SVG, drawn with `plotters` and an embedded DejaVu Sans
//! font (no system font or library needed):
//!
//! * [`miss_ratio`]: object or byte miss ratio against cache size, one line per policy;
//! * [`timeline`]: the seed paper's per-request hit/miss picture, one band per policy;
//! * [`access_time`]: total access time under a [`LatencyModel`] against cache size.

mod access_time;
mod miss_ratio;
mod style;
mod timeline;

use std::path::Path;

use plotters::prelude::*;

pub use access_time::access_time;
pub use miss_ratio::{miss_ratio, Ratio};
pub use timeline::timeline;

use crate::sim::{Cell, LatencyModel, Unit};
use crate::trace::Trace;

/// Image file format, chosen by the file extension (`.png` or `.svg`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageFormat {
    /// Raster, 1000 pixels wide.
    Png,
    /// Vector.
    Svg,
}

impl ImageFormat {
    /// The format of `path` by extension.
    pub fn of(path: &Path) -> Option<Self> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "png" => Some(ImageFormat::Png),
            "svg" => Some(ImageFormat::Svg),
            _ => None,
        }
    }
}

/// Everything a figure needs from a run.
#[derive(Clone, Copy)]
pub struct Figure<'a> {
    /// The trace simulated.
    pub trace: &'a Trace,
    /// The grid's cells (contender-major).
    pub cells: &'a [Cell],
    /// Column headers, one per size index (for the timeline's legend).
    pub headers: &'a [String],
    /// What capacities count.
    pub unit: Unit,
    /// The latency model of the access-time figure.
    pub latency: LatencyModel,
}

/// Drawing failed.
#[derive(Debug, thiserror::Error)]
#[error("drawing {path}: {message}")]
pub struct PlotError {
    /// The file being drawn.
    pub path: String,
    /// What went wrong.
    pub message: String,
}

/// A figure that can draw itself on any plotters backend.
trait Chart {
    /// Pixel size of the image.
    fn size(&self) -> (u32, u32);
    /// Draws onto `area`.
    fn draw<DB: DrawingBackend>(&self, area: DrawingArea<DB, plotters::coord::Shift>) -> Result<(), String>;
}

/// Draws `chart` into `path`, PNG or SVG by extension.
fn render(path: &Path, chart: &impl Chart) -> Result<(), PlotError> {
    style::register_fonts();
    let err = |message: String| PlotError { path: path.display().to_string(), message };
    match ImageFormat::of(path) {
        Some(ImageFormat::Png) => {
            let area = BitMapBackend::new(path, chart.size()).into_drawing_area();
            chart.draw(area).map_err(err)
        }
        Some(ImageFormat::Svg) => {
            let area = SVGBackend::new(path, chart.size()).into_drawing_area();
            chart.draw(area).map_err(err)
        }
        None => Err(err("the file name must end in .png or .svg".into())),
    }
}

/// Turns a plotters error into text.
fn text_err(e: impl std::fmt::Display) -> String {
    e.to_string()
}
