//! The platform's supply report: the ledger of record's cut ([`SupplyBody`], `GET /v1/supply`)
//! set against what each mode's own books say it holds ([`ModeBooks`]), into one verdict. The
//! node and the sentinels serve the cut; `specie audit supply` and every demo reconcile it with
//! the modes' books and print [`SupplyReport`] (docs/operator-guide.md, "The supply report").
//!
//! The check is threefold. The core's own tallies agree (issued = core outputs + hidden notes +
//! what each mode was funded and did not return). Each mode's books balance by its own rules.
//! And each mode holds exactly what the core's ledger says it was funded and did not return.
//! A difference in the last is value in flight (a funding confirmed but not yet credited, or
//! credited before the ledger sealed it) while the platform is busy, and a loss or a forgery
//! once it is quiet.

use serde::Serialize;
use specie_archiver::SupplyCut;
use specie_transaction::Counterparty;

use crate::api::ledger_head_body;
use crate::http_api::{IssuerSupplyBody, ModeFlowBody, SupplyBody};

/// The cut's body: what `GET /v1/supply` answers.
pub fn supply_body(cut: &SupplyCut) -> SupplyBody {
    let supply = &cut.supply;
    let mut issuers = Vec::new();
    let mut modes = Vec::new();
    for each in supply.counterparties() {
        let (entered, left) = (each.flow.entered, each.flow.left);
        if each.role == Counterparty::ISSUER {
            issuers.push(IssuerSupplyBody {
                key: hex::encode(each.key),
                minted: entered.to_string(),
                redeemed: left.to_string(),
            });
        } else {
            modes.push(ModeFlowBody {
                role: each.role.clone(),
                key: hex::encode(each.key),
                funded: left.to_string(),
                returned: entered.to_string(),
                held: (left as i128 - entered as i128).to_string(),
            });
        }
    }
    let issued = supply.issued();
    SupplyBody {
        ledger: ledger_head_body(&cut.head),
        issuers,
        issued: issued.to_string(),
        modes,
        core_outputs: supply.outputs().to_string(),
        hidden_notes: supply.hidden().to_string(),
        balanced: supply.balanced(),
    }
}

/// What one mode's own books say it holds of one core's currency.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ModeBooks {
    /// For people: what the mode is and where its books came from.
    pub name: String,
    /// The role and key (hex) the core's ledger knows the mode by (see [`ModeFlowBody`]).
    pub role: String,
    pub key: String,
    /// Other keys the ledger knows the same mode by, whose flows count in its row: a FastPay
    /// committee's later epochs (a redeem is certified in its epoch's committee's name).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub also_keys: Vec<String>,
    /// Everything it holds: balances, tokens, offers, burned commission, value in flight
    /// inside the mode.
    pub holds: u128,
    /// How `holds` splits, for people, in order.
    pub parts: Vec<(String, u128)>,
    /// Figures the books name besides, not part of `holds` (double-spent value refused).
    pub notes: Vec<(String, u128)>,
    /// Whether the books balance by the mode's own rules.
    pub balanced: bool,
}

/// One mode's row of the report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ModeRow {
    pub role: String,
    pub key: String,
    /// Funded − returned, per the core's ledger.
    pub core_says: String,
    /// The mode's books, if they were read.
    pub books: Option<ModeBooks>,
    /// `core_says` − the books' `holds` (0 when they agree).
    pub difference: Option<String>,
    pub agrees: bool,
}

/// The ledger's flows with those of a mode's other keys ([`ModeBooks::also_keys`]) added to its
/// own key's, in the ledger's order.
fn merged_flows(flows: &[ModeFlowBody], books: &[ModeBooks]) -> Vec<ModeFlowBody> {
    let own_key = |flow: &ModeFlowBody| {
        let of = books
            .iter()
            .find(|b| b.role == flow.role && b.also_keys.contains(&flow.key));
        of.map_or_else(|| flow.key.clone(), |b| b.key.clone())
    };
    let mut merged: Vec<ModeFlowBody> = Vec::new();
    for flow in flows {
        let key = own_key(flow);
        let Some(row) = merged.iter_mut().find(|m| m.role == flow.role && m.key == key) else {
            merged.push(ModeFlowBody { key, ..flow.clone() });
            continue;
        };
        let add = |a: &str, b: &str| match (a.parse::<i128>(), b.parse::<i128>()) {
            (Ok(a), Ok(b)) => a.saturating_add(b).to_string(),
            _ => i128::MIN.to_string(),
        };
        row.funded = add(&row.funded, &flow.funded);
        row.returned = add(&row.returned, &flow.returned);
        row.held = add(&row.held, &flow.held);
    }
    merged
}

/// The report: the cut, a row per mode, and the verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SupplyReport {
    pub supply: SupplyBody,
    pub modes: Vec<ModeRow>,
    /// The books of modes the ledger never funded (each must hold nothing).
    pub unfunded: Vec<ModeBooks>,
    pub ok: bool,
}

impl SupplyReport {
    /// Sets the cut against the modes' books. A mode the ledger funded but whose books were
    /// not given is shown unchecked (it does not fail the report).
    pub fn reconcile(supply: SupplyBody, books: Vec<ModeBooks>) -> SupplyReport {
        let flows = merged_flows(&supply.modes, &books);
        let mut books: Vec<Option<ModeBooks>> = books.into_iter().map(Some).collect();
        let modes: Vec<ModeRow> = flows
            .iter()
            .map(|flow| {
                let theirs = books
                    .iter_mut()
                    .find(|each| each.as_ref().is_some_and(|b| b.role == flow.role && b.key == flow.key))
                    .and_then(Option::take);
                let core_says: i128 = flow.held.parse().unwrap_or(i128::MIN);
                let difference = theirs.as_ref().map(|b| core_says.saturating_sub(b.holds as i128));
                ModeRow {
                    role: flow.role.clone(),
                    key: flow.key.clone(),
                    core_says: flow.held.clone(),
                    agrees: theirs.as_ref().is_none_or(|b| b.balanced) && difference.is_none_or(|d| d == 0),
                    books: theirs,
                    difference: difference.map(|d| d.to_string()),
                }
            })
            .collect();
        let unfunded: Vec<ModeBooks> = books.into_iter().flatten().collect();
        let ok = supply.balanced
            && modes.iter().all(|row| row.agrees)
            && unfunded.iter().all(|b| b.balanced && b.holds == 0);
        SupplyReport {
            supply,
            modes,
            unfunded,
            ok,
        }
    }

    /// Whether every mode the ledger funded had its books read.
    pub fn every_mode_checked(&self) -> bool {
        self.modes.iter().all(|row| row.books.is_some())
    }

    /// The report for people, one line each.
    pub fn lines(&self) -> Vec<String> {
        let s = &self.supply;
        let short = |hex: &str| hex.chars().take(16).collect::<String>();
        let mut lines = vec![format!(
            "supply at ledger height {} (head {}; UHS {} ids, sha256 {})",
            s.ledger.height,
            s.ledger.head.as_ref().map_or("none".to_string(), |h| short(&h.hash)),
            s.ledger.uhs_ids,
            short(&s.ledger.uhs_sha256_sorted),
        )];
        for issuer in &s.issuers {
            lines.push(format!(
                "  issuer {}: minted {}, redeemed {}",
                short(&issuer.key),
                issuer.minted,
                issuer.redeemed
            ));
        }
        lines.push(format!("  issued (minted − redeemed)  {}", s.issued));
        lines.push(format!("  = core outputs              {}", s.core_outputs));
        lines.push(format!("  + hidden notes              {}", s.hidden_notes));
        for row in &self.modes {
            let books = match &row.books {
                None => "its books not read".to_string(),
                Some(b) => {
                    let parts: Vec<String> = b.parts.iter().map(|(what, v)| format!("{what} {v}")).collect();
                    let notes: Vec<String> = b.notes.iter().map(|(what, v)| format!("{what} {v}")).collect();
                    let mut text = format!("{} holds {} ({})", b.name, b.holds, parts.join(", "));
                    if !notes.is_empty() {
                        text.push_str(&format!("; {}", notes.join(", ")));
                    }
                    if !b.balanced {
                        text.push_str("; ITS BOOKS DO NOT BALANCE");
                    }
                    text
                }
            };
            let verdict = match (&row.difference, row.agrees) {
                (None, _) => "unchecked".to_string(),
                (Some(_), true) => "agrees".to_string(),
                (Some(d), false) => format!("DIFFERS by {d}"),
            };
            lines.push(format!(
                "  + {} {}: {} held per the ledger; {books} [{verdict}]",
                row.role,
                short(&row.key),
                row.core_says
            ));
        }
        for b in &self.unfunded {
            lines.push(format!(
                "  {} ({} {}) was never funded by this core, yet holds {}",
                b.name,
                b.role,
                short(&b.key),
                b.holds
            ));
        }
        lines.push(format!(
            "  the core's tallies {}",
            if s.balanced {
                "agree"
            } else {
                "DO NOT AGREE (issued ≠ outputs + hidden notes + modes)"
            }
        ));
        lines.push(format!("supply audit {}", if self.ok { "OK" } else { "FAILED" }));
        lines
    }
}

#[cfg(test)]
mod tests {
    use specie_archiver::{LedgerHead, Supply, SupplyCut};

    use super::*;

    fn body(balanced: bool, held: &str) -> SupplyBody {
        let cut = SupplyCut {
            head: LedgerHead {
                height: 0,
                head: None,
                uhs: (0, [0; 32]),
                waiting: 0,
                undecided: 0,
            },
            supply: Supply::default(),
        };
        let mut body = supply_body(&cut);
        body.balanced = balanced;
        body.modes.push(ModeFlowBody {
            role: "bridge".into(),
            key: "ab".into(),
            funded: held.into(),
            returned: "0".into(),
            held: held.into(),
        });
        body
    }

    fn books(key: &str, holds: u128, balanced: bool) -> ModeBooks {
        ModeBooks {
            name: "offline authority".into(),
            role: "bridge".into(),
            key: key.into(),
            also_keys: vec![],
            holds,
            parts: vec![("tokens outstanding".into(), holds)],
            notes: vec![],
            balanced,
        }
    }

    #[test]
    fn a_mode_agrees_only_when_its_books_balance_and_hold_what_the_ledger_says() {
        assert!(SupplyReport::reconcile(body(true, "30"), vec![books("ab", 30, true)]).ok);
        assert!(!SupplyReport::reconcile(body(true, "30"), vec![books("ab", 29, true)]).ok);
        assert!(!SupplyReport::reconcile(body(true, "30"), vec![books("ab", 30, false)]).ok);
        assert!(!SupplyReport::reconcile(body(false, "30"), vec![books("ab", 30, true)]).ok);
        // Books not given: unchecked, not failed; books of a mode never funded must hold nothing.
        let unchecked = SupplyReport::reconcile(body(true, "30"), vec![]);
        assert!(unchecked.ok && !unchecked.every_mode_checked());
        assert!(SupplyReport::reconcile(body(true, "30"), vec![books("cd", 0, true)]).ok);
        let stranger = SupplyReport::reconcile(body(true, "30"), vec![books("cd", 1, true)]);
        assert!(!stranger.ok);
        assert!(stranger.lines().last().is_some_and(|line| line.ends_with("FAILED")));
    }

    #[test]
    fn the_flows_of_a_modes_other_keys_count_in_its_row() {
        // 30 funded under "ab"; 12 came back under "ef", the same mode's later key.
        let mut supply = body(true, "30");
        supply.modes.push(ModeFlowBody {
            role: "bridge".into(),
            key: "ef".into(),
            funded: "0".into(),
            returned: "12".into(),
            held: "-12".into(),
        });
        let mut ours = books("ab", 18, true);
        ours.also_keys = vec!["ef".into()];
        let report = SupplyReport::reconcile(supply.clone(), vec![ours]);
        assert!(report.ok, "{:?}", report.modes);
        assert_eq!(report.modes.len(), 1);
        assert_eq!(
            (report.modes[0].key.as_str(), report.modes[0].core_says.as_str()),
            ("ab", "18")
        );
        // Without the other key the row says 30, and the 12 stand apart, unchecked.
        let apart = SupplyReport::reconcile(supply, vec![books("ab", 18, true)]);
        assert!(!apart.ok && apart.modes.len() == 2);
    }
}
