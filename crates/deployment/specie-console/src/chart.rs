//! A line chart as inline SVG, drawn on the server: no script, no style attribute (the Content
//! Security Policy allows neither), a title and a sentence for screen readers.

use maud::{html, Markup};

use crate::sampler::Point;

const WIDTH: f64 = 600.0;
const HEIGHT: f64 = 160.0;
const MARGIN: f64 = 4.0;

/// The largest value of `points`, rounded up to a round number for the axis (at least 1).
fn axis_max(points: &[Point]) -> f64 {
    let max = points.iter().map(|p| p.1).fold(0.0_f64, f64::max);
    if max <= 1.0 {
        return 1.0;
    }
    let magnitude = 10f64.powf(max.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|step| step * magnitude)
        .find(|top| *top >= max)
        .unwrap_or(10.0 * magnitude)
}

/// The polyline's points, the x axis spanning the points' time, the y axis 0 to `top`.
fn polyline(points: &[Point], top: f64) -> String {
    let (first, last) = match (points.first(), points.last()) {
        (Some(first), Some(last)) => (first.0, last.0),
        _ => return String::new(),
    };
    let span = (last - first).max(1.0);
    let x = |t: f64| MARGIN + (WIDTH - 2.0 * MARGIN) * (t - first) / span;
    let y = |v: f64| HEIGHT - MARGIN - (HEIGHT - 2.0 * MARGIN) * (v / top).clamp(0.0, 1.0);
    let coordinates: Vec<String> = points
        .iter()
        .map(|&(t, v)| format!("{:.1},{:.1}", x(t), y(v)))
        .collect();
    coordinates.join(" ")
}

/// A chart of `points` named `title`, values in `unit`; `id` names its title for
/// `aria-labelledby`.
pub fn line(id: &str, title: &str, unit: &str, points: &[Point]) -> Markup {
    let top = axis_max(points);
    let now = points.last().map(|p| p.1);
    let peak = points.iter().map(|p| p.1).fold(0.0_f64, f64::max);
    let summary = match now {
        Some(now) => format!(
            "now {now:.1} {unit}, peak {peak:.1} {unit} over the last {} samples",
            points.len()
        ),
        None => "no data yet: the console samples the sentinels' metrics every few seconds".to_string(),
    };
    html! {
        figure class="chart" {
            svg viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) role="img" aria-labelledby=(format!("{id}-title {id}-summary"))
                xmlns="http://www.w3.org/2000/svg" {
                title id=(format!("{id}-title")) { (title) }
                line x1="0" y1=(HEIGHT - MARGIN) x2=(WIDTH) y2=(HEIGHT - MARGIN) class="axis" {}
                polyline points=(polyline(points, top)) class="series" fill="none" {}
                text x=(MARGIN) y="14" class="scale" { (format!("{top} {unit}")) }
            }
            figcaption {
                strong { (title) } ": "
                span id=(format!("{id}-summary")) { (summary) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_axis_rounds_up_and_the_line_spans_the_box() {
        assert_eq!(axis_max(&[]), 1.0);
        assert_eq!(axis_max(&[(0.0, 730.0)]), 1000.0);
        assert_eq!(axis_max(&[(0.0, 12.0)]), 20.0);
        assert_eq!(axis_max(&[(0.0, 40.0)]), 50.0);
        let line = polyline(&[(10.0, 0.0), (20.0, 50.0)], 100.0);
        assert_eq!(
            line,
            format!(
                "{MARGIN:.1},{:.1} {:.1},{:.1}",
                HEIGHT - MARGIN,
                WIDTH - MARGIN,
                HEIGHT / 2.0
            )
        );
    }

    #[test]
    fn a_chart_says_what_it_shows_in_words() {
        let markup = line("tps", "Confirmed", "tx/s", &[(0.0, 3.0), (2.0, 5.0)]).into_string();
        assert!(markup.contains("now 5.0 tx/s, peak 5.0 tx/s"), "{markup}");
        assert!(!markup.contains("style="), "the policy forbids inline styles");
        let empty = line("tps", "Confirmed", "tx/s", &[]).into_string();
        assert!(empty.contains("no data yet"));
    }
}
