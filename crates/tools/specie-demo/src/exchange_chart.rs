//! The exchange demo's chart, an SVG: each currency's clearing price in the first currency per
//! block (lines, left axis), and the value traded per block (bars, right axis).

use std::fmt::Write as _;
use std::path::Path;

use specie_exchange::Valuation;

use specie_measure::error::BenchResult;

/// What one block contributes to the chart.
pub trait BlockPoint {
    fn prices(&self) -> &[Valuation];
    fn volume(&self) -> f64;
}

const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 420.0;
const MARGIN: f64 = 60.0;
const COLOURS: [&str; 6] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf"];

/// Writes the chart of `blocks` to `path`.
pub fn write<B: BlockPoint>(path: &Path, blocks: &[B], currencies: &[&str]) -> BenchResult<()> {
    std::fs::write(path, svg(blocks, currencies))?;
    Ok(())
}

fn svg<B: BlockPoint>(blocks: &[B], currencies: &[&str]) -> String {
    let (plot_w, plot_h) = (WIDTH - 2.0 * MARGIN, HEIGHT - 2.0 * MARGIN);
    let x = |i: usize| MARGIN + plot_w * (i as f64 + 0.5) / blocks.len().max(1) as f64;
    // Price of currency c in the first currency: p_c / p_0.
    let rate = |block: &B, c: usize| block.prices()[c].0 as f64 / block.prices()[0].0.max(1) as f64;
    let rates = blocks
        .iter()
        .flat_map(|b| (0..currencies.len()).map(move |c| rate(b, c)));
    let (low, high) = rates.fold((f64::MAX, f64::MIN), |(l, h), r| (l.min(r), h.max(r)));
    let (low, high) = if low < high {
        (low * 0.95, high * 1.05)
    } else {
        (0.0, 2.0)
    };
    let y = |r: f64| MARGIN + plot_h * (1.0 - (r - low) / (high - low));
    let volume_max = blocks.iter().map(B::volume).fold(0.0, f64::max).max(1.0);
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    let bar = plot_w / blocks.len().max(1) as f64 * 0.6;
    for (i, block) in blocks.iter().enumerate() {
        let h = plot_h * block.volume() / volume_max;
        let _ = writeln!(
            out,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{bar:.1}\" height=\"{h:.1}\" fill=\"#cccccc\"/>",
            x(i) - bar / 2.0,
            MARGIN + plot_h - h
        );
    }
    for (c, name) in currencies.iter().enumerate() {
        let points: Vec<String> = blocks
            .iter()
            .enumerate()
            .map(|(i, b)| format!("{:.1},{:.1}", x(i), y(rate(b, c))))
            .collect();
        let colour = COLOURS[c % COLOURS.len()];
        let _ = writeln!(
            out,
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>",
            points.join(" ")
        );
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{colour}\">{name} in {}</text>",
            MARGIN + 10.0 + 110.0 * c as f64,
            MARGIN - 20.0,
            currencies[0]
        );
    }
    let _ = writeln!(
        out,
        "<line x1=\"{MARGIN}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\" stroke=\"black\"/>\n<line x1=\"{MARGIN}\" y1=\"{MARGIN}\" x2=\"{MARGIN}\" y2=\"{0}\" stroke=\"black\"/>",
        MARGIN + plot_h,
        MARGIN + plot_w
    );
    for tick in 0..=4 {
        let r = low + (high - low) * f64::from(tick) / 4.0;
        let _ = writeln!(out, "<text x=\"5\" y=\"{:.1}\">{r:.3}</text>", y(r) + 4.0);
    }
    let _ = writeln!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\">block (1 to {}); grey bars: value traded (max {volume_max:.0} in {})</text>",
        MARGIN,
        HEIGHT - 15.0,
        blocks.len(),
        currencies[0]
    );
    out.push_str("</svg>\n");
    out
}
