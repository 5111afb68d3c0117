//! The latency curve and the SVG charts, written by hand (no plotting dependency).

use super::*;

/// Latency by percentile for the chart: `(quantile, ms)` from 0 up to 99.99% (or as far as the
/// sample count supports), evenly spaced on a log scale of 1 / (1 - q), then the maximum.
pub(crate) fn percentile_curve(latency: &Histogram<u64>) -> Vec<(f64, f64)> {
    if latency.is_empty() {
        return vec![];
    }
    let decades = (latency.len() as f64).log10().clamp(1.0, 4.0);
    let steps = 200;
    let mut curve: Vec<(f64, f64)> = (0..=steps)
        .map(|i| {
            let q = 1.0 - 10f64.powf(-decades * i as f64 / steps as f64);
            (q, latency.value_at_quantile(q) as f64 / 1000.0)
        })
        .collect();
    // The named percentiles exactly, for the chart's labels.
    for q in [0.5, 0.9, 0.99, 0.999] {
        curve.push((q, latency.value_at_quantile(q) as f64 / 1000.0));
    }
    curve.sort_by(|a, b| a.0.total_cmp(&b.0));
    curve.push((1.0, latency.max() as f64 / 1000.0));
    curve
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MarkerKind {
    Fault,
    Elected,
    Restart,
    End,
}

/// A vertical line on the throughput chart.
#[derive(Clone, Debug)]
pub(crate) struct Marker {
    pub(crate) at_s: f64,
    pub(crate) label: String,
    pub(crate) kind: MarkerKind,
}

pub(crate) const WIDTH: f64 = 960.0;
pub(crate) const HEIGHT: f64 = 480.0;
pub(crate) const LEFT: f64 = 90.0;
pub(crate) const RIGHT: f64 = 30.0;
pub(crate) const TOP: f64 = 70.0;
pub(crate) const BOTTOM: f64 = 60.0;

pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A round step (1, 2 or 5 × 10^k) giving about `target` intervals up to `max`.
pub(crate) fn nice_step(max: f64, target: usize) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let raw = max / target.max(1) as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * magnitude);
    step.max(1e-9)
}

pub(crate) fn number(value: f64) -> String {
    if value == value.round() && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        let text = format!("{value:.3}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

pub(crate) fn svg_open(svg: &mut String, title: &str, subtitle: &str) {
    let _ = write!(
        svg,
        r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="Helvetica, Arial, sans-serif" font-size="12">
<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>
<text x="{0}" y="26" text-anchor="middle" font-size="16" font-weight="bold">{1}</text>
<text x="{0}" y="46" text-anchor="middle" font-size="12" fill="#444">{2}</text>
"##,
        WIDTH / 2.0,
        escape(title),
        escape(subtitle)
    );
}

pub(crate) fn axis_labels(svg: &mut String, x_label: &str, y_label: &str) {
    let _ = writeln!(
        svg,
        r##"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="none" stroke="#333"/>
<text x="{}" y="{}" text-anchor="middle" font-size="13">{}</text>
<text x="20" y="{}" text-anchor="middle" font-size="13" transform="rotate(-90 20 {})">{}</text>"##,
        WIDTH - LEFT - RIGHT,
        HEIGHT - TOP - BOTTOM,
        LEFT + (WIDTH - LEFT - RIGHT) / 2.0,
        HEIGHT - 15.0,
        escape(x_label),
        TOP + (HEIGHT - TOP - BOTTOM) / 2.0,
        TOP + (HEIGHT - TOP - BOTTOM) / 2.0,
        escape(y_label)
    );
}

/// Horizontal grid lines and y labels up to `y_max`, and x ticks (seconds) up to `x_max`.
pub(crate) fn time_grid(svg: &mut String, x_max: f64, y_max: f64, y_step: f64) {
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let x = |v: f64| LEFT + v / x_max * plot_w;
    let y = |v: f64| TOP + plot_h - v / y_max * plot_h;
    // Grid and ticks.
    let mut tick = 0.0;
    while tick <= y_max + y_step / 2.0 {
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="#e3e3e3"/><text x="{2:.1}" y="{3:.1}" text-anchor="end">{4}</text>"##,
            y(tick),
            LEFT + plot_w,
            LEFT - 6.0,
            y(tick) + 4.0,
            number(tick)
        );
        tick += y_step;
    }
    let x_step = nice_step(x_max, 12).max(1.0);
    let mut tick = 0.0;
    while tick <= x_max + 1e-9 {
        let _ = writeln!(
            svg,
            r##"<line x1="{0:.1}" y1="{1:.1}" x2="{0:.1}" y2="{2:.1}" stroke="#333"/><text x="{0:.1}" y="{3:.1}" text-anchor="middle">{4}</text>"##,
            x(tick),
            TOP + plot_h,
            TOP + plot_h + 5.0,
            TOP + plot_h + 19.0,
            number(tick)
        );
        tick += x_step;
    }
}

/// An SVG path of one horizontal step per second.
pub(crate) fn step_path(confirmed: &[u64], x: impl Fn(f64) -> f64, y: impl Fn(f64) -> f64) -> String {
    let mut path = String::new();
    for (second, count) in confirmed.iter().enumerate() {
        let (x0, x1, level) = (x(second as f64), x(second as f64 + 1.0), y(*count as f64));
        let _ = write!(
            path,
            "{}{x0:.1},{level:.1} L{x1:.1},{level:.1} ",
            if second == 0 { "M" } else { "L" }
        );
    }
    path.trim_end().to_string()
}

/// Confirmed transactions per second as a step line over time, with a vertical line at each
/// marker (kills red and dashed, new leaders purple, restarts green, the end of the load grey).
pub(crate) fn throughput_svg(subtitle: &str, confirmed: &[u64], markers: &[Marker]) -> String {
    let x_max = markers
        .iter()
        .map(|m| m.at_s)
        .fold(confirmed.len() as f64, f64::max)
        .max(1.0)
        .ceil();
    let peak = confirmed.iter().copied().max().unwrap_or(0) as f64;
    // Headroom above the peak for the marker labels.
    let y_step = nice_step(peak * 1.25, 6);
    let y_max = ((peak * 1.25) / y_step).ceil().max(1.0) * y_step;
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let x = |v: f64| LEFT + v / x_max * plot_w;
    let y = |v: f64| TOP + plot_h - v / y_max * plot_h;

    let mut svg = String::new();
    svg_open(&mut svg, "specie cluster: confirmed transactions per second", subtitle);
    time_grid(&mut svg, x_max, y_max, y_step);
    axis_labels(
        &mut svg,
        "time since the load started (s)",
        "confirmed transactions per second",
    );
    // The series: one horizontal step per second.
    let path = step_path(confirmed, x, y);
    if !path.is_empty() {
        let _ = writeln!(
            svg,
            r##"<path d="{path}" fill="none" stroke="#1f5fbf" stroke-width="2"/>"##
        );
    }
    // Markers, labels staggered so that close ones do not overlap.
    let mut markers = markers.to_vec();
    markers.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    for (i, marker) in markers.iter().enumerate() {
        let (colour, dash, class) = match marker.kind {
            MarkerKind::Fault => ("#d62728", "6,4", "fault"),
            MarkerKind::Elected => ("#9467bd", "1,3", "elected"),
            MarkerKind::Restart => ("#2ca02c", "2,3", "restart"),
            MarkerKind::End => ("#888888", "4,4", "end"),
        };
        let mx = x(marker.at_s);
        let label_y = TOP + 14.0 + 14.0 * (i % 4) as f64;
        let anchor = if mx > LEFT + plot_w * 0.8 { "end" } else { "start" };
        let dx = if anchor == "end" { -4.0 } else { 4.0 };
        let _ = writeln!(
            svg,
            r##"<g class="{class}"><line x1="{mx:.1}" y1="{TOP}" x2="{mx:.1}" y2="{:.1}" stroke="{colour}" stroke-width="1.5" stroke-dasharray="{dash}"/><text x="{:.1}" y="{label_y:.1}" fill="{colour}" text-anchor="{anchor}" paint-order="stroke" stroke="white" stroke-width="3">{} @ {:.1} s</text></g>"##,
            TOP + plot_h,
            mx + dx,
            escape(&marker.label),
            marker.at_s
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// One round's confirmed transactions per second, for [`transport_svg`].
pub(crate) struct RoundSeries {
    pub(crate) label: String,
    pub(crate) tls: bool,
    pub(crate) confirmed: Vec<u64>,
}

/// `--compare-transport`: confirmed transactions per second of every round as step lines
/// (mutual TLS blue and solid, plaintext orange and dashed), and each transport's median of the
/// rounds' mean throughput as a dotted horizontal line (`medians`: label, TLS or not, tx/s).
pub(crate) fn transport_svg(subtitle: &str, rounds: &[RoundSeries], medians: &[(String, bool, f64)]) -> String {
    const TLS_COLOURS: [&str; 4] = ["#1f5fbf", "#6b9be0", "#0b3d91", "#9ec0ee"];
    const PLAINTEXT_COLOURS: [&str; 4] = ["#e6550d", "#f59a55", "#a63603", "#f7bf8f"];
    let x_max = rounds.iter().map(|r| r.confirmed.len()).max().unwrap_or(0).max(1) as f64;
    let peak = rounds
        .iter()
        .flat_map(|r| r.confirmed.iter().copied())
        .max()
        .unwrap_or(0) as f64;
    // Headroom above the peak for the legend.
    let legend_rows = rounds
        .iter()
        .filter(|r| r.tls)
        .count()
        .max(rounds.iter().filter(|r| !r.tls).count())
        + 1;
    let headroom = 1.15 + 0.06 * legend_rows as f64;
    let y_step = nice_step(peak * headroom, 6);
    let y_max = ((peak * headroom) / y_step).ceil().max(1.0) * y_step;
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let x = |v: f64| LEFT + v / x_max * plot_w;
    let y = |v: f64| TOP + plot_h - v / y_max * plot_h;

    let mut svg = String::new();
    svg_open(
        &mut svg,
        "specie cluster: mutual TLS against plaintext, confirmed transactions per second",
        subtitle,
    );
    time_grid(&mut svg, x_max, y_max, y_step);
    axis_labels(
        &mut svg,
        "time since the round's load started (s)",
        "confirmed transactions per second",
    );
    // Legend: TLS in the left column, plaintext in the right one, each ending with its median.
    let mut rows = [0usize; 2];
    let mut legend = |svg: &mut String, tls: bool, label: &str, colour: &str, dash: &str| {
        let column = usize::from(!tls);
        let (lx, ly) = (
            LEFT + 12.0 + column as f64 * plot_w / 2.0,
            TOP + 16.0 + 15.0 * rows[column] as f64,
        );
        rows[column] += 1;
        let _ = writeln!(
            svg,
            r##"<line x1="{lx:.1}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"/><text x="{2:.1}" y="{3:.1}" paint-order="stroke" stroke="white" stroke-width="3">{4}</text>"##,
            ly - 4.0,
            lx + 28.0,
            lx + 34.0,
            ly,
            escape(label)
        );
    };
    let mut used = [0usize; 2];
    for round in rounds {
        let column = usize::from(!round.tls);
        let (colour, dash) = if round.tls {
            (TLS_COLOURS[used[0] % TLS_COLOURS.len()], "none")
        } else {
            (PLAINTEXT_COLOURS[used[1] % PLAINTEXT_COLOURS.len()], "7,4")
        };
        used[column] += 1;
        let path = step_path(&round.confirmed, x, y);
        if !path.is_empty() {
            let _ = writeln!(
                svg,
                r##"<path class="{}" d="{path}" fill="none" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"/>"##,
                if round.tls { "tls" } else { "plaintext" }
            );
        }
        legend(&mut svg, round.tls, &round.label, colour, dash);
    }
    for (label, tls, tps) in medians {
        let colour = if *tls { TLS_COLOURS[2] } else { PLAINTEXT_COLOURS[2] };
        let _ = writeln!(
            svg,
            r##"<line class="median" x1="{LEFT}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="{colour}" stroke-width="1.5" stroke-dasharray="1,3"/>"##,
            y(*tps),
            LEFT + plot_w
        );
        legend(&mut svg, *tls, label, colour, "1,3");
    }
    svg.push_str("</svg>\n");
    svg
}

/// Latency by percentile (`curve`: ascending `(quantile, ms)`), both axes on log scales: the
/// x axis as 1 / (1 - q), so 90%, 99%, 99.9% and 99.99% are equally spaced.
pub(crate) fn latency_svg(subtitle: &str, curve: &[(f64, f64)], count: u64) -> String {
    let mut svg = String::new();
    svg_open(&mut svg, "specie cluster: latency of confirmed swaps", subtitle);
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    if curve.is_empty() {
        axis_labels(&mut svg, "percentile", "latency (ms)");
        let _ = writeln!(
            svg,
            r##"<text x="{}" y="{}" text-anchor="middle">no confirmed transactions</text>"##,
            WIDTH / 2.0,
            HEIGHT / 2.0
        );
        svg.push_str("</svg>\n");
        return svg;
    }
    let decades = (count.max(10) as f64).log10().clamp(1.0, 4.0).ceil();
    let nines = |q: f64| (1.0 / (1.0 - q).max(10f64.powf(-decades))).log10();
    let lo = curve.iter().map(|p| p.1).fold(f64::MAX, f64::min).max(0.001);
    let hi = curve.iter().map(|p| p.1).fold(0.0, f64::max).max(lo * 1.01);
    let (y_lo, y_hi) = (lo.log10().floor(), hi.log10().ceil().max(lo.log10().floor() + 1.0));
    let x = |q: f64| LEFT + nines(q) / decades * plot_w;
    let y = |ms: f64| TOP + plot_h - (ms.max(0.001).log10() - y_lo) / (y_hi - y_lo) * plot_h;
    for decade in 0..=decades as i32 {
        let q = 1.0 - 10f64.powi(-decade);
        let label = if decade == 0 {
            "0%".to_string()
        } else {
            format!("{}%", number((100.0 * q * 100.0).round() / 100.0))
        };
        let _ = writeln!(
            svg,
            r##"<line x1="{0:.1}" y1="{TOP}" x2="{0:.1}" y2="{1:.1}" stroke="#e3e3e3"/><text x="{0:.1}" y="{2:.1}" text-anchor="middle">{3}</text>"##,
            x(q),
            TOP + plot_h,
            TOP + plot_h + 19.0,
            label
        );
    }
    for exponent in y_lo as i32..=y_hi as i32 {
        for mantissa in [1.0, 2.0, 5.0] {
            let ms = mantissa * 10f64.powi(exponent);
            if ms < 10f64.powf(y_lo) * 0.999 || ms > 10f64.powf(y_hi) * 1.001 {
                continue;
            }
            let _ = writeln!(
                svg,
                r##"<line x1="{LEFT}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="{2}"/><text x="{3:.1}" y="{4:.1}" text-anchor="end">{5}</text>"##,
                y(ms),
                LEFT + plot_w,
                if mantissa == 1.0 { "#cfcfcf" } else { "#eeeeee" },
                LEFT - 6.0,
                y(ms) + 4.0,
                number(ms)
            );
        }
    }
    axis_labels(
        &mut svg,
        "percentile (log scale of 1/(1-p))",
        "latency, submission to completion (ms, log scale)",
    );
    let points: Vec<String> = curve
        .iter()
        .filter(|(q, _)| *q < 1.0)
        .map(|(q, ms)| format!("{:.1},{:.1}", x(*q), y(*ms)))
        .collect();
    let _ = writeln!(
        svg,
        r##"<polyline points="{}" fill="none" stroke="#1f5fbf" stroke-width="2"/>"##,
        points.join(" ")
    );
    // Named percentiles, and the maximum at the right edge.
    let at = |q: f64| {
        curve
            .iter()
            .find(|(p, _)| *p >= q - 1e-12)
            .map_or(curve[curve.len() - 1].1, |p| p.1)
    };
    let mut named: Vec<(String, f64, f64)> = [(0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p99.9")]
        .into_iter()
        .filter(|(q, _)| nines(*q) <= decades)
        .map(|(q, name)| (name.to_string(), q, at(q)))
        .collect();
    named.push(("max".into(), 1.0, curve[curve.len() - 1].1));
    // Labels alternate above and below the curve, so that equal neighbours do not collide.
    for (i, (name, q, ms)) in named.into_iter().enumerate() {
        let (px, py) = (x(q.min(1.0 - 10f64.powf(-decades))), y(ms));
        let anchor = if px > LEFT + plot_w * 0.85 { "end" } else { "start" };
        let dx = if anchor == "end" { -6.0 } else { 6.0 };
        let _ = writeln!(
            svg,
            r##"<circle cx="{px:.1}" cy="{py:.1}" r="3.5" fill="#d62728"/><text x="{:.1}" y="{:.1}" text-anchor="{anchor}" paint-order="stroke" stroke="white" stroke-width="3">{name} {} ms</text>"##,
            px + dx,
            if i % 2 == 0 { py - 7.0 } else { py + 17.0 },
            number((ms * 10.0).round() / 10.0)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn well_formed(xml: &str) -> Result<(), String> {
        let mut stack: Vec<String> = vec![];
        let mut rest = xml;
        let mut roots = 0;
        while let Some(open) = rest.find('<') {
            let text = &rest[..open];
            for (i, _) in text.match_indices('&') {
                let entity = &text[i..];
                if !["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                    .iter()
                    .any(|e| entity.starts_with(e))
                {
                    return Err(format!("bare & in {text:?}"));
                }
            }
            let close = rest[open..].find('>').ok_or("unclosed tag")? + open;
            let tag = &rest[open + 1..close];
            rest = &rest[close + 1..];
            if tag.starts_with('?') {
                continue;
            }
            if tag.contains('<') || tag.matches('"').count() % 2 == 1 {
                return Err(format!("malformed tag <{tag}>"));
            }
            if let Some(name) = tag.strip_prefix('/') {
                match stack.pop() {
                    Some(open) if open == name.trim() => {}
                    other => return Err(format!("</{name}> closes {other:?}")),
                }
            } else {
                let name = tag.split_whitespace().next().ok_or("empty tag")?.trim_end_matches('/');
                if stack.is_empty() {
                    roots += 1;
                }
                if !tag.ends_with('/') {
                    stack.push(name.to_string());
                }
            }
        }
        if !stack.is_empty() || roots != 1 || !rest.trim().is_empty() {
            return Err(format!("unbalanced: {stack:?}, {roots} roots"));
        }
        Ok(())
    }

    #[test]
    fn charts_are_well_formed_and_mark_the_faults() {
        let series = [300, 1000, 1000, 0, 0, 800, 1000];
        let markers = vec![
            Marker {
                at_s: 2.5,
                label: "kill shard-0 leader (r2) <&>".into(),
                kind: MarkerKind::Fault,
            },
            Marker {
                at_s: 4.5,
                label: "restart shard-0-2".into(),
                kind: MarkerKind::Restart,
            },
            Marker {
                at_s: 7.0,
                label: "load stops".into(),
                kind: MarkerKind::End,
            },
        ];
        let svg = throughput_svg("2 shard groups & 1 coordinator", &series, &markers);
        well_formed(&svg).unwrap();
        assert!(svg.contains(r#"class="fault""#), "{svg}");
        assert!(svg.contains("kill shard-0 leader (r2) &lt;&amp;&gt; @ 2.5 s"), "{svg}");
        assert!(svg.contains(r#"class="restart""#));
        assert!(svg.contains("confirmed transactions per second"));
        assert!(svg.contains("time since the load started (s)"));

        let mut latency = latency_histogram();
        for micros in 1..=20_000u64 {
            latency.saturating_record(micros * 50);
        }
        let curve = percentile_curve(&latency);
        assert!(curve.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        let svg = latency_svg("latency", &curve, latency.len());
        well_formed(&svg).unwrap();
        assert!(
            svg.contains("99.99%") && svg.contains("p99 ") && svg.contains("max 100"),
            "{svg}"
        );
        well_formed(&latency_svg("empty", &[], 0)).unwrap();
        assert!(well_formed("<svg><g></svg>").is_err());
    }

    #[test]
    fn the_transport_chart_is_well_formed() {
        let rounds = vec![
            RoundSeries {
                label: "round 1 mutual-tls: 900 tx/s".into(),
                tls: true,
                confirmed: vec![300, 1000, 950],
            },
            RoundSeries {
                label: "round 2 insecure-plaintext: 1000 tx/s <&>".into(),
                tls: false,
                confirmed: vec![400, 1100, 1000],
            },
        ];
        let medians = vec![
            ("median mutual-tls: 900 tx/s".to_string(), true, 900.0),
            ("median insecure-plaintext: 1000 tx/s".to_string(), false, 1000.0),
        ];
        let svg = transport_svg("2 shard groups; TLS cost 10.0%", &rounds, &medians);
        well_formed(&svg).unwrap();
        assert!(
            svg.contains(r#"class="tls""#) && svg.contains(r#"class="plaintext""#),
            "{svg}"
        );
        assert_eq!(svg.matches(r#"class="median""#).count(), 2);
        assert!(svg.contains("&lt;&amp;&gt;"));
        well_formed(&transport_svg("empty", &[], &[])).unwrap();
    }
}
