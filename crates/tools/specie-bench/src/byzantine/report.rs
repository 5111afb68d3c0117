//! The figures as a table beside the reference's, or as one JSON object.

use std::fmt::Write as _;

use super::latency::{Latency, Percentiles};
use super::load::{Phase, AUTHORITIES};
use super::ByzantineReport;

/// The FastPay reference implementation (in memory, no persistence) measured on a machine of
/// this kind (2 cores): a whole committee of 4 on the 2 cores, and one authority alone.
struct Reference {
    committee_transfer_per_s: f64,
    committee_confirm_per_s: f64,
    transfer_cpu_us: f64,
    confirm_cpu_us: f64,
    alone_transfer_per_s: f64,
    alone_confirm_per_s: f64,
}

const REFERENCE: Reference = Reference {
    committee_transfer_per_s: 8_100.0,
    committee_confirm_per_s: 3_800.0,
    transfer_cpu_us: 55.0,
    confirm_cpu_us: 120.0,
    alone_transfer_per_s: 32_700.0,
    alone_confirm_per_s: 15_500.0,
};

/// specie's committee, with persistence on, should do at least this multiple of the reference's
/// committee rates…
const THROUGHPUT_TARGET_RATIO: f64 = 1.5;
/// …with CPU per order per authority within this multiple of the signature work it needs.
const CPU_TO_WORK_TARGET_RATIO: f64 = 1.5;

fn verdict(meets: bool) -> &'static str {
    match meets {
        true => "meets target",
        false => "below target",
    }
}

/// One throughput phase and the signature work its orders need.
struct PhaseView<'r> {
    name: &'static str,
    phase: &'r Phase,
    work_us: f64,
    cores: usize,
}

impl PhaseView<'_> {
    fn per_authority_equivalent(&self) -> f64 {
        self.phase.orders_per_s() * AUTHORITIES as f64
    }

    fn cpu_to_work(&self) -> f64 {
        self.phase.cpu_us_per_order_per_authority() / self.work_us
    }

    /// The committee's orders per second with every core to itself at the CPU per order
    /// measured: what the wall-clock rate would be on a machine nothing else uses.
    fn cpu_capacity_per_s(&self) -> f64 {
        self.cores as f64 * 1e6 / (AUTHORITIES as f64 * self.phase.cpu_us_per_order_per_authority())
    }

    /// The committee's orders per second on every core if signatures were all its authorities
    /// did: no implementation of this protocol does better on this machine.
    fn signature_bound_per_s(&self) -> f64 {
        self.cores as f64 * 1e6 / (AUTHORITIES as f64 * self.work_us)
    }

    /// Cores' worth of CPU this process had during the phase, as a share of the machine.
    fn machine_share(&self) -> f64 {
        self.phase.cpu.process_s / (self.phase.seconds * self.cores as f64)
    }

    fn json(&self) -> serde_json::Value {
        let p = self.phase;
        serde_json::json!({
            "orders": p.orders,
            "seconds": p.seconds,
            "committee_orders_per_s": p.orders_per_s(),
            "per_authority_equivalent_per_s": self.per_authority_equivalent(),
            "cpu_us_per_order_per_authority": p.cpu_us_per_order_per_authority(),
            "signature_work_us": self.work_us,
            "cpu_to_signature_work": self.cpu_to_work(),
            "committee_orders_per_s_at_full_cpu": self.cpu_capacity_per_s(),
            "committee_orders_per_s_signature_bound": self.signature_bound_per_s(),
            "machine_share": self.machine_share(),
            "driver_cpu_us_per_order": p.driver_cpu_us_per_order(),
            "process_cpu_s": p.cpu.process_s,
        })
    }
}

fn phases(report: &ByzantineReport) -> [PhaseView<'_>; 2] {
    [
        PhaseView {
            name: "transfer orders",
            phase: &report.load.transfer,
            work_us: report.ceilings.transfer_work_us(),
            cores: report.cores,
        },
        PhaseView {
            name: "confirmation orders",
            phase: &report.load.confirm,
            work_us: report.ceilings.confirm_work_us(),
            cores: report.cores,
        },
    ]
}

/// One of specie's figures beside the reference's.
struct Compared {
    /// Its name in the JSON output.
    key: &'static str,
    label: &'static str,
    reference: f64,
    measured: f64,
    /// The least ratio of measured to reference that meets the target, if there is a target.
    target_ratio: Option<f64>,
}

impl Compared {
    fn ratio(&self) -> f64 {
        self.measured / self.reference
    }
}

fn against_reference(report: &ByzantineReport) -> [Compared; 8] {
    let [transfer, confirm] = phases(report);
    let compared = |key, label, reference, measured, target_ratio| Compared {
        key,
        label,
        reference,
        measured,
        target_ratio,
    };
    [
        compared(
            "committee_transfer_per_s",
            "committee transfer orders/s",
            REFERENCE.committee_transfer_per_s,
            transfer.phase.orders_per_s(),
            Some(THROUGHPUT_TARGET_RATIO),
        ),
        compared(
            "committee_transfer_per_s_at_full_cpu",
            "  the same with the cores to itself",
            REFERENCE.committee_transfer_per_s,
            transfer.cpu_capacity_per_s(),
            Some(THROUGHPUT_TARGET_RATIO),
        ),
        compared(
            "committee_confirm_per_s",
            "committee confirmation orders/s",
            REFERENCE.committee_confirm_per_s,
            confirm.phase.orders_per_s(),
            Some(THROUGHPUT_TARGET_RATIO),
        ),
        compared(
            "committee_confirm_per_s_at_full_cpu",
            "  the same with the cores to itself",
            REFERENCE.committee_confirm_per_s,
            confirm.cpu_capacity_per_s(),
            Some(THROUGHPUT_TARGET_RATIO),
        ),
        compared(
            "transfer_cpu_us",
            "CPU µs per transfer per authority",
            REFERENCE.transfer_cpu_us,
            transfer.phase.cpu_us_per_order_per_authority(),
            None,
        ),
        compared(
            "confirm_cpu_us",
            "CPU µs per confirmation per authority",
            REFERENCE.confirm_cpu_us,
            confirm.phase.cpu_us_per_order_per_authority(),
            None,
        ),
        compared(
            "alone_transfer_per_s",
            "one authority, transfer orders/s",
            REFERENCE.alone_transfer_per_s,
            transfer.per_authority_equivalent(),
            None,
        ),
        compared(
            "alone_confirm_per_s",
            "one authority, confirmation orders/s",
            REFERENCE.alone_confirm_per_s,
            confirm.per_authority_equivalent(),
            None,
        ),
    ]
}

fn latency_json(latency: &Latency) -> serde_json::Value {
    let percentiles = |p: &Percentiles| serde_json::json!({"p50": p.p50_ms, "p99": p.p99_ms});
    serde_json::json!({
        "payments": latency.payments,
        "seconds": latency.seconds,
        "payments_per_s": latency.payments_per_s(),
        "to_certificate_ms": percentiles(&latency.to_certificate),
        "to_settlement_ms": percentiles(&latency.to_settlement),
    })
}

/// The run as one JSON object.
pub(crate) fn json(report: &ByzantineReport) -> serde_json::Value {
    let options = &report.options;
    let [transfer, confirm] = phases(report);
    let mut reference = serde_json::Map::new();
    for compared in against_reference(report) {
        let ratio = compared.ratio();
        let mut entry =
            serde_json::json!({"reference": compared.reference, "measured": compared.measured, "ratio": ratio});
        if let Some(target) = compared.target_ratio {
            entry["target_ratio_min"] = target.into();
            entry["meets_target"] = (ratio >= target).into();
        }
        reference.insert(compared.key.to_string(), entry);
    }
    for (key, view) in [
        ("transfer_cpu_to_signature_work", &transfer),
        ("confirm_cpu_to_signature_work", &confirm),
    ] {
        let ratio = view.cpu_to_work();
        reference.insert(
            key.to_string(),
            serde_json::json!({"ratio": ratio, "target_ratio_max": CPU_TO_WORK_TARGET_RATIO, "meets_target": ratio <= CPU_TO_WORK_TARGET_RATIO}),
        );
    }
    let c = &report.ceilings;
    serde_json::json!({
        "settings": {
            "authorities": AUTHORITIES,
            "shards_per_authority": options.shards,
            "orders": options.orders,
            "window": options.window,
            "fsync": !options.no_fsync,
            "latency_payments": options.latency_payments,
            "latency_window": options.latency_window,
        },
        "machine": {"cores": report.cores, "load_average_1m_at_start": report.load_average},
        "seconds": report.seconds,
        "setup_seconds": report.load.setup_seconds,
        "ceilings_per_core_second": {
            "sign": c.sign_per_s,
            "verify_strict": c.verify_strict_per_s,
            "certificate_check": c.certificate_check_per_s,
        },
        "transfer": transfer.json(),
        "confirmation": confirm.json(),
        "latency": {
            "window": options.latency_window,
            "all_up": latency_json(&report.all_up),
            "one_silent": latency_json(&report.one_silent),
            "p99_ratio_silent_to_all_up": {
                "to_certificate": report.one_silent.to_certificate.p99_ms / report.all_up.to_certificate.p99_ms,
                "to_settlement": report.one_silent.to_settlement.p99_ms / report.all_up.to_settlement.p99_ms,
            },
        },
        "against_reference": reference,
    })
}

/// The run as tables for a person.
pub(crate) fn text(report: &ByzantineReport) -> String {
    let mut out = String::new();
    let options = &report.options;
    let _ = writeln!(
        out,
        "FastPay committee (Byzantine mode): {AUTHORITIES} authorities × {} shards, fsync {}, {} orders, window {}",
        options.shards,
        if options.no_fsync { "OFF" } else { "on" },
        options.orders,
        options.window
    );
    let load = report.load_average.map_or("unknown".to_string(), |l| format!("{l:.1}"));
    let _ = writeln!(
        out,
        "machine: {} cores, load average {load} at the start (other processes share the cores); {:.0} s in all\n",
        report.cores, report.seconds
    );
    ceilings_text(report, &mut out);
    throughput_text(report, &mut out);
    latency_text(report, &mut out);
    reference_text(report, &mut out);
    out
}

fn ceilings_text(report: &ByzantineReport, out: &mut String) {
    let c = &report.ceilings;
    let _ = writeln!(
        out,
        "Ceilings on one core (per second of the measuring thread's CPU time)"
    );
    for (label, per_s) in [
        ("Ed25519 sign", c.sign_per_s),
        ("Ed25519 verify_strict", c.verify_strict_per_s),
        ("certificate check, batch of 3 + 1", c.certificate_check_per_s),
    ] {
        let _ = writeln!(out, "  {label:<36} {per_s:>9.0} /s  {:>7.1} µs each", 1e6 / per_s);
    }
    let _ = writeln!(
        out,
        "  signature work per order per authority: transfer (verify + sign) {:.1} µs, confirmation (check) {:.1} µs\n",
        c.transfer_work_us(),
        c.confirm_work_us()
    );
}

fn throughput_text(report: &ByzantineReport, out: &mut String) {
    let _ = writeln!(
        out,
        "Committee throughput (each order to all {AUTHORITIES} authorities, done when all {AUTHORITIES} answered)"
    );
    let _ = writeln!(
        out,
        "  {:<20} {:>7} {:>8} {:>12} {:>14} {:>15} {:>10} {:>9}",
        "", "orders", "seconds", "committee/s", "per-authority", "CPU µs/order/", "signature", "CPU /"
    );
    let _ = writeln!(
        out,
        "  {:<20} {:>7} {:>8} {:>12} {:>14} {:>15} {:>10} {:>9}",
        "", "", "", "", "equivalent/s", "authority", "work µs", "work"
    );
    for view in phases(report) {
        let p = view.phase;
        let _ = writeln!(
            out,
            "  {:<20} {:>7} {:>8.2} {:>12.0} {:>14.0} {:>15.1} {:>10.1} {:>8.2}x",
            view.name,
            p.orders,
            p.seconds,
            p.orders_per_s(),
            view.per_authority_equivalent(),
            p.cpu_us_per_order_per_authority(),
            view.work_us,
            view.cpu_to_work()
        );
    }
    let [transfer, confirm] = phases(report);
    let _ = writeln!(
        out,
        "  the driving thread (not counted above): {:.1} µs per transfer order, {:.1} µs per confirmation order",
        transfer.phase.driver_cpu_us_per_order(),
        confirm.phase.driver_cpu_us_per_order()
    );
    let _ = writeln!(
        out,
        "  what bounds it, on {} cores {:>22} {:>22} {:>22}",
        report.cores, "share of the machine", "committee/s with the", "committee/s if signing"
    );
    let _ = writeln!(
        out,
        "  {:<26} {:>22} {:>22} {:>22}",
        "", "this process used", "cores to itself", "and verifying were all"
    );
    for view in phases(report) {
        let _ = writeln!(
            out,
            "  {:<26} {:>21.0}% {:>22.0} {:>22.0}",
            view.name,
            100.0 * view.machine_share(),
            view.cpu_capacity_per_s(),
            view.signature_bound_per_s()
        );
    }
    let _ = writeln!(out);
}

fn latency_text(report: &ByzantineReport, out: &mut String) {
    let _ = writeln!(
        out,
        "Payment latency (client pipeline: votes checked, certificate, confirmation; {} payments, window {})",
        report.options.latency_payments, report.options.latency_window
    );
    let _ = writeln!(
        out,
        "  {:<26} {:>24} {:>24} {:>11}",
        "", "to certificate p50 / p99", "to settlement p50 / p99", "payments/s"
    );
    for (label, latency) in [
        ("all 4 up", &report.all_up),
        ("1 silent (f = 1 down)", &report.one_silent),
    ] {
        let _ = writeln!(
            out,
            "  {label:<26} {:>11.2} / {:>6.2} ms {:>11.2} / {:>6.2} ms {:>11.0}",
            latency.to_certificate.p50_ms,
            latency.to_certificate.p99_ms,
            latency.to_settlement.p50_ms,
            latency.to_settlement.p99_ms,
            latency.payments_per_s()
        );
    }
    let _ = writeln!(
        out,
        "  p99 ratio, silent / all up: to certificate {:.2}x, to settlement {:.2}x\n",
        report.one_silent.to_certificate.p99_ms / report.all_up.to_certificate.p99_ms,
        report.one_silent.to_settlement.p99_ms / report.all_up.to_settlement.p99_ms
    );
}

fn reference_text(report: &ByzantineReport, out: &mut String) {
    let _ = writeln!(
        out,
        "Against the FastPay reference implementation (in memory, no persistence; 2 cores)"
    );
    let _ = writeln!(
        out,
        "  {:<38} {:>10} {:>10} {:>8}  {:<9} verdict",
        "figure", "reference", "specie", "ratio", "target"
    );
    for compared in against_reference(report) {
        let ratio = compared.ratio();
        let (target, verdict) = match compared.target_ratio {
            Some(target) => (format!("≥ {target:.1}x"), verdict(ratio >= target)),
            None => ("-".to_string(), ""),
        };
        let _ = writeln!(
            out,
            "  {:<38} {:>10.0} {:>10.1} {ratio:>7.2}x  {target:<9} {verdict}",
            compared.label, compared.reference, compared.measured
        );
    }
    for view in phases(report) {
        let ratio = view.cpu_to_work();
        let _ = writeln!(
            out,
            "  {:<38} {:>10} {:>10} {ratio:>7.2}x  {:<9} {}",
            format!("CPU / signature work, {}", view.name.trim_end_matches(" orders")),
            "-",
            "-",
            format!("≤ {CPU_TO_WORK_TARGET_RATIO:.1}x"),
            verdict(ratio <= CPU_TO_WORK_TARGET_RATIO)
        );
    }
    let _ = writeln!(
        out,
        "  (one authority: specie's committee rate × {AUTHORITIES}, what the same CPU per order gives one authority \
         with the machine to itself; the reference measured it alone)"
    );
}
